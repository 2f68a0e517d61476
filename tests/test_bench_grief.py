"""Smoke tests of the GP-GRIEF benchmarks (tiny configurations, into a tmp dir)."""

import json
import math

import pytest

import benchmarks.grief  # noqa: F401  (registers grief-reconstruction/-scaling/-uci)
from benchmarks import main


def _summary(out, name):
    lines = (out / f"{name}.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    assert row["summary"] is True
    assert (out / f"{name}.md").exists() and (out / f"{name}.png").stat().st_size > 0
    return row


def _finite(row, keys):
    for k in keys:
        assert row[k] is not None and math.isfinite(row[k]), (k, row[k])


def test_reconstruction_tiny(tmp_path):
    rc = main(["grief-reconstruction", "--n", "80", "--d", "5", "--p", "4", "10",
               "--m-bar", "8", "--samples", "1", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    row = _summary(tmp_path, "grief-reconstruction")
    keys = [f"{m}_{s}_p10" for m in ("grief", "nystrom", "rff", "optimal")
            for s in ("train", "joint")]
    _finite(row, keys)
    assert all(0.0 <= row[k] <= 10.0 for k in keys)
    assert row["optimal_train_p10"] <= row["nystrom_train_p10"] + 1e-9


def test_reconstruction_rejects_odd_p(tmp_path):
    assert main(["grief-reconstruction", "--n", "40", "--d", "3", "--p", "5",
                 "--out", str(tmp_path)]) == 1


def test_scaling_tiny(tmp_path):
    # one size: each n runs in a freshly spawned interpreter (seconds to import torch)
    rc = main(["grief-scaling", "--n", "600", "--p", "40", "--d", "3",
               "--repeats", "50", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    row = _summary(tmp_path, "grief-scaling")
    _finite(row, ["lml_s_at_600", "lml_p3_s_at_600", "stats_pass_s_at_600",
                  "peak_mem_gib", "lml_ratio_last_first"])
    assert row["peak_mem_gib"] > 0


def test_fig1_tiny(tmp_path):
    rc = main(["grief-fig1", "--seeds", "2", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = (tmp_path / "grief-fig1.jsonl").read_text().splitlines()
    models = [json.loads(x) for x in lines if "\"against\": \"y\"" in x]
    assert {r["model"] for r in models} == {"exact", "vfe", "grief", "griefard"}
    _finite({r["model"]: r["rmse_median"] for r in models}, ["exact", "vfe", "grief"])


def test_uci_tiny(tmp_path, data_dir, monkeypatch):
    if not (data_dir / "uci" / "challenger.npz").exists():
        pytest.skip("uci/challenger.npz not in the shared data")
    monkeypatch.setenv("GPSCALE_DATA", str(data_dir))
    rc = main(["grief-uci", "--datasets", "challenger", "--folds", "1", "--first-fold", "3",
               "--mcmc-iter", "150",
               "--burn", "50", "--thin", "10", "--p-i", "30", "--max-iter", "5",
               "--methods", "grief-ii", "grief-i", "exact", "grief-i-rotated",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    row = _summary(tmp_path, "grief-uci")
    assert row["sets"] == ["challenger"]
    _finite(row["rmse_mean"], ["challenger/grief-ii", "challenger/grief-i", "challenger/exact"])
    assert row["grief_i_beats_own_exact_gp"] in ("0/1", "1/1")
    recs = [json.loads(x) for x in (tmp_path / "grief-uci.jsonl").read_text().splitlines()]
    per_set = [r for r in recs if r.get("kind") == "per set"]
    assert {r["method"] for r in per_set} == {"grief-ii", "grief-i", "exact", "grief-i-rotated"}
    assert all(r["folds"] == 1 and (r["paper_rmse"] or r["method"] == "exact")
               for r in per_set)
    fold_i = [r for r in recs if r.get("kind") == "fold" and r["method"] == "grief-i"]
    assert fold_i[0]["basis"] == "eigen" and fold_i[0]["form"] == "dual"
    assert {r["fold"] for r in recs if r.get("kind") == "fold"} == {3}
    assert main(["grief-uci", "--datasets", "challenger", "--folds", "2", "--first-fold",
                 "9", "--out", str(tmp_path / "bad")]) == 1
