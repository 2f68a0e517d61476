"""The exact GP's iterative path as users meet it: ``gpscale.fit``, the command line and
the estimator with ``solver="cg"``, ``solver="auto"`` switching past the size guard,
and the saved file (the dense references of the solver are in test_iterative.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gpscale
import gpscale.methods.cost as cost
import gpscale.methods.exact as exact_method
from gpscale.models import ExactGP

CG = {"method": "exact", "solver": "cg", "seed": 0, "max_iter": 40}


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    X_test = rng.uniform(-2, 2, (50, 3))
    return X, y, X_test


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gpscale.ConvergenceWarning)
        yield


def test_cg_on_every_row_predicts_as_the_cholesky_model_with_its_hyperparameters():
    """θ from the sample (here: every row), then the posterior by CG: the same means as
    the Cholesky fit to the solver's tolerance, the same variances within the cache's
    sampling error."""
    X, y, X_test = _data()
    chol = gpscale.fit(X, y, method="exact", solver="cholesky", seed=0, max_iter=40)
    cg = gpscale.fit(X, y, subsample=len(y), cg_tol=1e-8, **CG)
    assert isinstance(chol.model, ExactGP) and _on_cg(cg.model)
    m1, s1 = chol.predict(X_test, return_std=True)
    m2, s2 = cg.predict(X_test, return_std=True)
    np.testing.assert_allclose(m2, m1, rtol=1e-6, atol=1e-6 * y.std())
    np.testing.assert_allclose(s2, s1, rtol=0.1)
    history = cg.result.history[-1]
    assert history["phase"] == "all rows" and history["converged"]
    assert history["residual"] <= 1e-8


def test_the_sample_sets_theta_and_every_row_sets_the_posterior(tmp_path):
    X, y, X_test = _data(900)
    sub = gpscale.fit(X, y, subsample=300, **CG)
    assert sub.model.n == 900  # the posterior is on every row
    small = gpscale.fit(X, y, method="exact", solver="cholesky",
                        seed=0, max_iter=40)
    # θ from 300 rows is not θ from 900, but both predict the smooth function well
    f = np.sin(2 * X_test[:, 0]) + 0.3 * X_test[:, 1] ** 2
    assert np.sqrt(np.mean((sub.predict(X_test) - f) ** 2)) < 0.1
    assert np.sqrt(np.mean((small.predict(X_test) - f) ** 2)) < 0.1
    sub.save(tmp_path / "m.pt")
    back = gpscale.load(tmp_path / "m.pt")
    assert _on_cg(back.model)
    for a, b in zip(sub.predict(X_test, return_std=True), back.predict(X_test, return_std=True)):
        np.testing.assert_array_equal(a, b)


def test_auto_solver_goes_iterative_past_the_size_guard(monkeypatch):
    X, y, X_test = _data(400)
    assert not cost.too_large(400, 3)
    below = gpscale.fit(X, y, method="exact", seed=0, max_iter=10)
    assert isinstance(below.model, ExactGP)
    monkeypatch.setattr(cost, "GUARD_MIN_N", 100)
    monkeypatch.setattr(cost, "iterative_seconds", lambda n, d, rbf=True: 1e-6)
    monkeypatch.setattr(cost, "SUBSAMPLE_SECONDS",
                        250 ** 3 * cost.EXACT_EVALS * cost.EXACT_N3_SECONDS)
    assert cost.too_large(400, 3) and cost.sample_size(400) == 200
    above = gpscale.fit(X, y, method="exact", seed=0, max_iter=10)
    assert _on_cg(above.model) and above.model.n == 400
    with pytest.raises(ValueError, match="solver must be one of"):
        gpscale.fit(X, y, method="exact", solver="lu")


def test_the_solver_switch_counts_the_kernels_contraction(monkeypatch):
    """A kernel without the tiled contraction (float64 vjp slabs, 7x slower per entry by
    the cost model) leaves Cholesky later than an RBF: the switch and fit_seconds use
    the kernel fit_exact is given."""
    monkeypatch.setattr(cost, "available_memory", lambda: None)  # time alone
    assert cost.too_large(4800, 8) and not cost.too_large(4800, 8, rbf=False)
    assert cost.fit_seconds(4800, 8, rbf=False) == cost.exact_seconds(4800)
    assert cost.fit_seconds(4800, 8) == cost.iterative_seconds(4800, 8)
    seen = []
    monkeypatch.setattr(exact_method, "too_large",
                        lambda n, d, dtype=None, rbf=True: seen.append(rbf) or False)
    X, y, _ = _data(60)
    for name in ("rbf-ard", "matern52-ard"):
        gpscale.fit(X, y, method="exact", kernel=name, seed=0, max_iter=3)
    assert seen == [True, False]


def test_the_estimator_takes_the_iterative_path():
    from gpscale.sklearn import GPRegressor

    X, y, X_test = _data(300)
    est = GPRegressor(method="exact", options={"solver": "cg", "subsample": 150,
                                               "max_iter": 20}).fit(X, y)
    assert _on_cg(est.predictor_.model)
    mean, std = est.predict(X_test, return_std=True)
    assert mean.shape == std.shape == (50,) and np.all(std > 0)


def test_the_command_line_fits_saves_describes_and_predicts(tmp_path):
    X, y, X_test = _data(400)
    head = "a,b,c,y\n"
    (tmp_path / "t.csv").write_text(head + "".join(
        f"{a!r},{b!r},{c!r},{v!r}\n" for (a, b, c), v in zip(X.tolist(), y.tolist())))
    (tmp_path / "new.csv").write_text("a,b,c\n" + "".join(
        f"{a!r},{b!r},{c!r}\n" for a, b, c in X_test.tolist()))
    exe = [sys.executable, "-m", "gpscale.cli"]

    def run(*args):
        return subprocess.run([*exe, *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)

    fit = run("fit", "--data", "t.csv", "--target", "y", "--method", "exact", "--option",
              "solver=cg", "--option", "subsample=200", "--max-iter", "30", "--out", "m.pt")
    assert fit.returncode == 0, fit.stderr
    info = run("info", "m.pt", "--json")
    assert info.returncode == 0, info.stderr
    found = json.loads(info.stdout)
    assert found["model"] == "ExactGP" and found["solver"] is not None and found["n"] == 400
    assert found["solver"]["iterations"] >= 1 and found["solver"]["residual"] <= 1e-3
    assert set(found["solver"]["stored_bytes"]) == {"rows", "weights", "variance_cache"}
    assert "preconditioned CG" in run("info", "m.pt").stdout
    pred = run("predict", "--model", "m.pt", "--data", "new.csv", "--out", "p.csv")
    assert pred.returncode == 0, pred.stderr
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "mean,std" and len(lines) == 51
    mine = gpscale.load(tmp_path / "m.pt").predict(X_test)
    np.testing.assert_allclose([float(r.split(",")[0]) for r in lines[1:]], mine,
                               rtol=1e-12, atol=1e-12)


def test_the_exact_large_benchmark_on_a_small_slice(tmp_path, capsys, data_dir):
    import benchmarks as bench

    if not (data_dir / "uci" / "skillcraft.npz").exists():
        pytest.skip(f"skillcraft not found under {data_dir / 'uci'}")
    argv = ["exact-large", "--sets", "skillcraft", "--fold-list", "0", "--max-train", "300",
            "--max-test", "100", "--methods", "exact", "--option", "solver=cg", "--option",
            "subsample=100", "--out", str(tmp_path)]
    assert bench.main(argv) == 0
    lines = [json.loads(s) for s in capsys.readouterr().out.splitlines() if s.startswith("{")]
    fits = [r for r in lines if r.get("kind") == "fit" and r["method"] == "exact"]
    assert len(fits) == 1 and fits[0]["model"] == "ExactGP/cg"
    row = fits[0]
    assert row["n"] == 300 and row["cg_iterations"] >= 1 and 0 <= row["coverage95"] <= 1
    assert row["rmse"] < 1.0 and row["peak_rss_gib"] > 0
    assert lines[-1]["summary"] and (tmp_path / "exact-large.md").exists()


def test_a_sample_fit_ending_at_the_noise_floor_is_checked_on_held_out_rows():
    """θ from a sample whose ML-II fit ends with the noise at its floor (noise-free y)
    is compared, on rows outside the sample, with θ from half the sample; the kept one
    has the lower held-out NLPD, recomputed here from the two models, and a warning
    says which was kept."""
    import torch

    from gpscale.kernels import make_kernel

    rng = np.random.default_rng(4)
    X = torch.as_tensor(rng.uniform(-2, 2, (300, 2)))
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1])  # no noise: ML-II interpolates
    with pytest.warns(gpscale.ConvergenceWarning, match="noise at or near its floor"):
        model, result = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 2),
                                               solver="cg", subsample=120, seed=0, refine=0)
    check = next(h for h in result.history if h.get("phase") == "held-out check")
    assert check["rows"] == 180  # every row outside the sample (fewer than HELD_OUT_ROWS)
    best = min(check["nlpd_sample_theta"], check["nlpd_half_sample_theta"])
    kept = ("half sample" if check["nlpd_half_sample_theta"] < check["nlpd_sample_theta"]
            else "sample")
    assert check["kept"] == kept and np.isfinite(best)
    assert _on_cg(model) and model.n == 300


def test_a_sample_fit_ending_at_the_noise_floor_refines_from_a_smooth_start():
    """With ``refine``, the same noise-free data start the refinement on every row from
    the half sample's fit with the noise above 1e-2 var(y), under the user's floor: the
    refinement takes the noise back down (noise-free y), far below where it started."""
    import torch

    from gpscale.kernels import make_kernel

    rng = np.random.default_rng(4)
    X = torch.as_tensor(rng.uniform(-2, 2, (300, 2)))
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1])
    with pytest.warns(gpscale.ConvergenceWarning, match="starts instead from a fit on half"):
        model, result = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 2),
                                               solver="cg", subsample=120, seed=0, refine=12)
    start = next(h for h in result.history if h.get("phase") == "smooth start")
    assert start["start_noise"] >= 0.5e-2 * float(y.var())  # 1e-2 x var(y) of its rows
    assert not any(h.get("phase") == "held-out check" for h in result.history)
    assert sum(h.get("phase") == "refine" for h in result.history) >= 5
    assert float(model.noise.detach()) < start["start_noise"] / 10
    assert ExactGP.noise.floor_of(model) < 1e-3 * float(y.var())


def _on_cg(model) -> bool:
    """The exact GP, solved by conjugate gradients."""
    return isinstance(model, ExactGP) and model.solver.name == "cg"
