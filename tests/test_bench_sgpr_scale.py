"""Smoke test of ``gpscale bench sgpr-scale``: its quick run, smaller still (a real dask
scheduler and two worker processes, Parquet rows, kin40k with auto told n = 10⁶)."""

import json
import math
import sys
from pathlib import Path

import pytest

import benchmarks.sgpr_scale  # noqa: F401 - registers sgpr-scale
from benchmarks import main
from gpscale.data.sources import data_dir


def test_quick_run_structure(tmp_path):
    pytest.importorskip("distributed")
    if not Path(sys.executable).with_name("dask").exists():
        pytest.skip("the dask command is not installed next to this Python")
    sets = ["kin40k"] if (data_dir() / "uci" / "kin40k.npz").exists() else []
    args = ["sgpr-scale", "--quick", "--threads", "1", "--out", str(tmp_path), "--n", "6000",
            "--m", "16", "--reference-rows", "1500", "--test-rows", "500", "--max-train",
            "1200", "--data-dir", str(tmp_path / "data"), "--sets", *sets]
    assert main(args) == 0
    lines = [json.loads(x) for x in (tmp_path / "sgpr-scale.jsonl").read_text().splitlines()]
    passes = [r for r in lines if r.get("kind") == "passes"]
    assert [r["workers"] for r in passes] == [1, 2]
    assert all(len(r["worker_peak_rss_gib"]) == r["workers"] for r in passes)
    assert abs(passes[0]["bound_theta0"] - passes[1]["bound_theta0"]) <= \
        1e-10 * abs(passes[0]["bound_theta0"])
    (fit,) = [r for r in lines if r.get("kind") == "fit"]
    assert fit["all_rows_iters"] >= 1 and math.isfinite(fit["test_rmse"])
    assert fit["test_rmse"] < 0.5  # y's sd is about 1; the noise floor 0.1
    (ref,) = [r for r in lines if r.get("kind") == "reference"]
    assert ref["ref_rows"] > 1000 and math.isfinite(ref["ref_theta_all_rows_test_rmse"])
    summary = lines[-1]
    assert summary["summary"] is True and len(summary["targets"]) == 4 + len(sets)
    for row in (r for r in lines if r.get("kind") == "set"):
        assert row["picked"] == "sgpr" and row["model"] == "StreamedSGPR"
        assert row["test_rmse_std"] < 0.6
    assert (tmp_path / "sgpr-scale.md").exists()
