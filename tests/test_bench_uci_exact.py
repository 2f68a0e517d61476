"""Smoke test of ``gpscale bench uci-exact --quick`` (gpscale and GPyTorch's recipe only;
scikit-learn and BoTorch are the slow peers), into a tmp dir."""

import json
import math

import pytest

import benchmarks.uci_exact  # noqa: F401  (registers uci-exact)
from benchmarks import main
from gpscale.data.sources import data_dir


def test_uci_exact_quick(tmp_path):
    if not all((data_dir() / "uci" / f"{s}.npz").exists() for s in ("challenger", "servo")):
        pytest.skip(f"UCI sets challenger/servo not found under {data_dir()}")
    pytest.importorskip("gpytorch")
    rc = main(["uci-exact", "--quick", "--peers", "gpytorch", "--gpytorch-iters", "30",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "uci-exact.jsonl").read_text().splitlines()]
    summary = lines[-1]
    assert summary["summary"] is True and summary["sets"] == 2
    fits = [r for r in lines if r.get("kind") == "fit"]
    assert {r["method"] for r in fits} == {"gpscale", "gpscale-botorch", "gpytorch"}
    assert all(math.isfinite(r["rmse"]) and math.isfinite(r["nlpd"]) for r in fits)
    sets = [r for r in lines if r.get("kind") == "set"]
    assert [r["set"] for r in sets] == ["challenger", "servo"]
    assert all(r["gs_t/gpytorch"] > 0 and r["gs_rmse/best"] > 0 for r in sets)
    md = (tmp_path / "uci-exact.md").read_text()
    assert "## Targets" in md and "## set" in md
    assert (tmp_path / "uci-exact.png").stat().st_size > 0


def test_uci_exact_rejects_unknown_peer(tmp_path):
    assert main(["uci-exact", "--quick", "--peers", "gpflow", "--out", str(tmp_path)]) == 1
