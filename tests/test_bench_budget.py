"""Smoke test of ``gpscale bench budget --quick`` (the synthetic small-noise set on 1 500
rows, auto with a 20 s budget) into a tmp dir; the full benchmark is a timing run."""

import json

import numpy as np
import pytest

from benchmarks import main
from benchmarks.budget import synthetic


def test_budget_quick(tmp_path):
    rc = main(["budget", "--quick", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "budget.jsonl").read_text().splitlines()]
    fit = next(r for r in lines if r.get("kind") == "fit")
    assert fit["set"] == "smallnoise" and fit["budget_s"] == 20.0
    assert fit["picked"] == "exact" and fit["estimate_s"] > 0 and fit["fit_s"] > 0
    assert fit["kernel_choice_s"] > 0 and fit["rmse"] < 0.5
    summary = lines[-1]
    assert "fit_over_budget_worst <= 1.25" in summary["targets"]


def test_the_synthetic_sets_have_their_shapes():
    X, y, Xt, yt = synthetic("copies", rows=4400)
    assert X.shape == (4400, 4) and len(np.unique(X, axis=0)) <= 1500
    assert len(yt) == 4400 // 9 and np.isfinite(y).all()
    X, y, *_ = synthetic("smallnoise")
    assert X.shape == (15_600, 4) and len(np.unique(X, axis=0)) == 15_600


def test_a_fold_with_a_published_row_is_set_beside_it(tmp_path):
    """elevators has Lin et al.'s exact GP per fold: the fit row carries the ratio and the
    report the two targets of issue 46."""
    from benchmarks.exact_large import PUBLISHED
    from gpscale.data.sources import data_dir

    if not (data_dir() / "uci" / "elevators.npz").exists():
        pytest.skip(f"uci/elevators.npz not found under {data_dir()}")
    rc = main(["budget", "--sets", "elevators", "--fold", "1", "--max-train", "400",
               "--budget", "20", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "budget.jsonl").read_text().splitlines()]
    fit = next(r for r in lines if r.get("kind") == "fit")
    rmse, nlpd = PUBLISHED[("elevators", 1)]
    assert fit["published_rmse"] == rmse
    assert fit["rmse_over_published"] == pytest.approx(fit["rmse"] / rmse)
    assert fit["nlpd_minus_published"] == pytest.approx(fit["nlpd"] - nlpd)
    assert "rmse_over_published_elevators_fold1 <= 1.01" in lines[-1]["targets"]
