"""The ADMM benchmarks' preset runs (issue 57): admm-synthetic's test RMSE / NLPD and
Alg. 1's ε on the paper preset, admm-quality's named-preset variants."""

import argparse
import json
import math

import numpy as np
import pytest
import torch

from benchmarks import Recorder


def _synthetic(capsys, **kw):
    from benchmarks.admm import run as run_synthetic

    args = argparse.Namespace(**{
        "kernels": ["se"], "n": [60], "trials": 1, "methods": ["admm-hocv", "exact"],
        "noise": 0.1, "init_scale": 1.2, "init_noise": 0.2, "rho": 5.0, "eps": None,
        "max_iter": 30, "adaptive_rho": False, "tangent": False, "preset": "paper",
        "quick": True, "device": torch.device("cpu"), **kw})
    rec = Recorder("admm-synthetic", None, "cpu")
    run_synthetic(args, rec)
    rec.finish()
    return [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]


def test_synthetic_trials_carry_test_rmse_and_the_cholesky_nlpd(capsys):
    """Each trial's test RMSE is √MSE and its NLPD is the Gaussian NLPD of the Cholesky
    predictor at the fitted θ (recomputed here densely)."""
    from gpscale.data.synthetic import synthetic_admm

    lines = _synthetic(capsys)
    trials = {r["method"]: r for r in lines if r.get("kind") == "trial"}
    assert set(trials) == {"admm-hocv", "exact"}
    for r in trials.values():
        assert r["test_rmse"] == pytest.approx(math.sqrt(r["test_mse"]), rel=1e-12)
    # the exact row, densely: its θ is in the record, the data is seeded by the trial
    ds = synthetic_admm("se", 60, seed=0, noise=0.1)
    r = trials["exact"]
    X, y, Xs, ys = (t.double().numpy() for t in (ds.X, ds.y, ds.X_test, ds.y_test))

    def k(a, b):
        return np.exp(-0.5 * (a[:, None, 0] - b[None, :, 0]) ** 2 / r["l"] ** 2)

    C = k(X, X) + r["noise"] * np.eye(len(y))
    mean = k(Xs, X) @ np.linalg.solve(C, y)
    var = 1.0 - np.einsum("ij,ji->i", k(Xs, X), np.linalg.solve(C, k(X, Xs))) + r["noise"]
    ref = np.mean(0.5 * np.log(2 * np.pi * var) + (ys - mean) ** 2 / (2 * var))
    assert r["test_nlpd"] == pytest.approx(ref, rel=1e-6)
    table = [t for t in lines if t.get("kind") == "table" and t["method"] == "exact"][0]
    assert table["test_nlpd"] == pytest.approx(r["test_nlpd"], rel=1e-12)


def test_synthetic_paper_preset_with_eps_stops_on_alg1_test(capsys):
    """--eps 1e-2 with the paper preset: the run stops at the first iteration whose
    ‖Δθ‖ < ε (converged), and without --eps it takes max_iter iterations."""
    with_eps = _synthetic(capsys, eps=1e-2, methods=["admm-hocv"])
    trial = [r for r in with_eps if r.get("kind") == "trial"][0]
    assert trial["reason"] == "converged" and trial["stop_iters"][0] < 30
    assert with_eps[-1]["eps"] == 1e-2
    without = _synthetic(capsys, methods=["admm-hocv"])
    trial = [r for r in without if r.get("kind") == "trial"][0]
    assert trial["reason"] == "max_iter" and trial["stop_iters"] == [30]
    assert without[-1]["eps"] == 0.0


def test_quality_runs_the_named_presets_with_their_own_stops(tmp_path, data_dir):
    """admm-quality's '(paper preset)' variant runs preset='paper' for
    --paper-max-iter iterations (no ε test), the '(lbfgs-cg)' one the library default
    for at most --max-iter; both rows carry finite metrics and s per iteration."""
    from benchmarks import main

    rc = main(["admm-quality", "--quick", "--n", "200", "--test-n", "100", "--max-iter", "12",
               "--paper-max-iter", "2", "--no-reference", "--variants",
               "admm-hocv (paper preset)", "admm-hocv (lbfgs-cg)", "--threads", "1",
               "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in
             (tmp_path / "admm-quality.jsonl").read_text().splitlines()]
    fits = {r["method"]: r for r in lines if r.get("kind") == "fit" and r["fit_s"] > 0}
    paper, lbfgs = fits["admm-hocv (paper preset)"], fits["admm-hocv (lbfgs-cg)"]
    assert (paper["iters"], paper["reason"], paper["max_iter"]) == (2, "max_iter", 2)
    assert lbfgs["max_iter"] == 12 and lbfgs["iters"] <= 12
    for r in (paper, lbfgs):
        assert math.isfinite(r["rmse"]) and math.isfinite(r["nlpd"])
        assert r["s_per_iter"] == pytest.approx(r["fit_s"] / r["iters"], rel=1e-12)
