"""The exact method as users meet it: jitter warm start, the size guard, the stopping
rule's default, the auto start."""

import warnings

import pytest
import torch

import gpscale.methods.cost as cost
import gpscale.methods.exact as exact_method
from gpscale import ExactGP
from gpscale.kernels import make_kernel
from gpscale.linalg import NumericalWarning, robust_cholesky
from gpscale.linalg.cholesky import JITTERS, JitterLadder, inverse_from_cholesky


def _needs_jitter(n=40, seed=0):
    """PSD of rank 5 shifted down by 1e-7·mean diagonal: plain Cholesky and jitters up to
    1e-7 fail, 1e-6 (rung 4 of the ladder) works."""
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(n, 5, generator=g, dtype=torch.float64)
    A = B @ B.mT
    return A - 1e-7 * torch.diagonal(A).mean() * torch.eye(n, dtype=torch.float64)


def test_jitter_ladder_warm_start_gives_the_same_factor_with_fewer_attempts():
    A = _needs_jitter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        cold = [robust_cholesky(A) for _ in range(4)]
        ladder = JitterLadder()
        warm = [robust_cholesky(A + 0.0, ladder=ladder) for _ in range(4)]
    for a, b in zip(cold, warm):
        assert torch.equal(a, b)
    assert ladder.level == JITTERS.index(1e-6)
    # cold: plain + 1e-10 ... 1e-6 = 6 attempts each; warm: 6, then plain, 1e-7, 1e-6
    assert ladder.attempts == 6 + 3 * 3
    with pytest.warns(NumericalWarning, match="jitter"):
        robust_cholesky(A, ladder=ladder)


def test_jitter_ladder_adds_no_jitter_to_a_matrix_that_needs_none():
    ladder = JitterLadder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)
        robust_cholesky(_needs_jitter(), ladder=ladder)
    good = torch.eye(5, dtype=torch.float64) * 2.0
    before = ladder.attempts
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no jitter, so no warning
        L = robust_cholesky(good, ladder=ladder)
    assert torch.equal(L, torch.linalg.cholesky(good))
    assert ladder.level == -1 and ladder.attempts == before + 1


def test_exact_nlml_uses_the_models_ladder_once_per_evaluation():
    g = torch.Generator().manual_seed(1)
    X = torch.rand(50, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X.sum(1))
    model = ExactGP(make_kernel("rbf-ard", 2), X, y, noise=0.1)
    for _ in range(3):
        model.nlml().backward()
    assert model.jitter.attempts == 3 and model.jitter.level == -1


def test_inverse_from_cholesky_is_the_inverse():
    A = _needs_jitter() + 1.0 * torch.eye(40, dtype=torch.float64)
    Ainv = inverse_from_cholesky(torch.linalg.cholesky(A))
    torch.testing.assert_close(Ainv, torch.linalg.inv(A), rtol=1e-10, atol=1e-12)
    # row-major, so that the gradient's elementwise passes and reshape(-1) need no copy
    assert Ainv.is_contiguous() and torch.equal(Ainv, Ainv.mT)


def test_finite_check_of_robust_cholesky():
    from gpscale.linalg.cholesky import _finite

    A = torch.eye(4, dtype=torch.float64)
    assert _finite(A)
    for bad in (float("nan"), float("inf"), -float("inf")):
        B = A.clone()
        B[2, 1] = bad
        assert not _finite(B)
    big = torch.full((4, 4), 1e308, dtype=torch.float64)  # finite, but its sum overflows
    assert _finite(big) and not _finite(torch.cat([big, big.new_full((1, 4), torch.nan)]))


def test_exact_cost_formula():
    est = cost.exact_cost(20_000, 5)
    assert est["memory_bytes"] == pytest.approx(3 * 20_000**2 * 8 + 4 * 20_000 * 5 * 8)
    small = cost.exact_cost(1000, 5)
    assert est["seconds"] == pytest.approx(small["seconds"] * 20**3, rel=1e-12)


def test_size_guard_warns_with_the_estimate_and_the_methods_that_scale(monkeypatch):
    monkeypatch.setattr(cost, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 9.6e9, "seconds": 3.6e4})
    with pytest.warns(cost.SizeWarning, match=r"600 minutes.*rff.*grief-ii.*svgp"):
        cost.size_guard(20_000, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cost.size_guard(cost.GUARD_MIN_N - 1, 5) is None
    monkeypatch.setattr(cost, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 1e3, "seconds": 1.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cost.size_guard(20_000, 5)["seconds"] == 1.0
    monkeypatch.setattr(cost, "available_memory", lambda: 1e9)
    monkeypatch.setattr(cost, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 9.6e9, "seconds": 1.0})
    with pytest.warns(cost.SizeWarning, match="GiB available"):
        cost.size_guard(20_000, 5)


def test_the_size_guard_names_registered_methods_sgpr_first():
    import gpscale

    assert cost.SCALABLE_METHODS[0] == "sgpr"
    assert set(cost.SCALABLE_METHODS) <= set(gpscale.METHODS)


def test_the_size_guard_and_auto_read_one_cost_model():
    """exact's cost model (exact_cost) is what method='auto' reads: the same seconds and
    bytes for the same n, and nothing timed at run time (the same answer every call)."""
    from gpscale.methods import auto

    for n, d in ((500, 3), (5000, 8), (40_000, 20)):
        est = cost.exact_cost(n, d)
        assert auto.exact_seconds(n) == est["seconds"] == cost.exact_cost(n, d)["seconds"]
        assert cost.exact_bytes(n, d) == est["memory_bytes"]
    assert auto.exact_seconds is cost.exact_seconds


def test_fit_exact_runs_the_size_guard(monkeypatch):
    monkeypatch.setattr(cost, "GUARD_MIN_N", 10)
    monkeypatch.setattr(cost, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 1e3, "seconds": 1e5})
    X = torch.rand(20, 2, dtype=torch.float64)
    with pytest.warns(cost.SizeWarning):
        exact_method.fit_exact(X, X.sum(1), make_kernel("rbf-ard", 2), max_iter=3)


def _highdim(n=200, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, :3].sum(1)) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, (y - y.mean()) / y.std()


def test_default_stopping_rule_stops_early_near_the_optimum():
    X, y = _highdim()
    # one start for both (the auto start may add a second run, see below)
    _, ref = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 16), tol=None, max_iter=300,
                                    init="given")
    _, res = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 16), init="given")
    assert res.reason == "converged"
    assert res.n_evals < ref.n_evals
    assert res.objective - ref.objective < 3 * 1e-4 * len(y) * 3  # a few tol·n per point


def test_auto_start_escapes_the_plateau_where_the_old_race_kept_the_unit_start():
    """Two relevant columns of 32 (pumadyn32nm's shape): the unit start reaches the
    plateau where the model explains y as noise (NLML ≈ 1.41 per point) within the few
    iterations of a race, while the √d start is still above it; the race kept the
    plateau. The auto start begins at √d and finds the structure."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(80, 32, generator=g, dtype=torch.float64)
    y = torch.sin(1.5 * X[:, 0]) * X[:, 1] + 0.1 * torch.randn(80, generator=g,
                                                              dtype=torch.float64)
    y = (y - y.mean()) / y.std()
    _, given = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 32), init="given")
    assert given.objective / 80 > 1.4  # the plateau
    _, auto = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 32))
    assert auto.objective / 80 < 0.5


def test_auto_start_keeps_given_lengthscales():
    X, y = _highdim(n=60, d=4)

    def kernel():  # a fit trains the kernel it is given: a new one for each
        k = make_kernel("rbf-ard", 4)
        k.base.lengthscale = torch.full((4,), 0.7, dtype=torch.float64)
        return k

    _, auto = exact_method.fit_exact(X, y, kernel(), max_iter=40)
    _, given = exact_method.fit_exact(X, y, kernel(), max_iter=40, init="given")
    assert auto.objective == given.objective and auto.theta == given.theta


def test_a_long_lengthscale_start_that_ends_at_the_noise_floor_gets_a_second_run():
    """16 columns, 3 relevant, noise variance ≈ 0.015: from √d the search ends in an
    interpolating optimum with σ² at its floor (NLML ≈ +19); the unit start finds
    σ² ≈ 0.015 (NLML ≈ −14) and wins."""
    X, y = _highdim()
    model, auto = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 16))
    _, given = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 16), init="given")
    assert auto.objective == pytest.approx(given.objective, abs=1e-9)
    assert float(model.noise) == pytest.approx(0.015, rel=0.2)
    assert auto.n_evals > given.n_evals  # both runs are counted


def test_noise_floor_is_relative_to_the_variance_of_y_and_survives_save_and_load(tmp_path):
    g = torch.Generator().manual_seed(3)
    X = torch.rand(30, 2, generator=g, dtype=torch.float64)
    y = 50.0 * torch.sin(4 * X.sum(1))  # noise-free, var(y) ≈ 1000

    def kernel():  # in the units of y
        k = make_kernel("rbf-ard", 2)
        k.outputscale = y.var()
        return k

    model, _ = exact_method.fit_exact(X, y, kernel(), noise=10.0)
    floor = 1e-4 * float(y.var())
    assert ExactGP.noise.floor_of(model) == pytest.approx(floor)
    assert float(model.noise) >= floor  # ML-II wants σ² → 0 here
    assert float(model.noise) < 1.01 * floor
    low, _ = exact_method.fit_exact(X, y, kernel(), noise=10.0, noise_floor=1e-9)
    assert float(low.noise) < 1e-3 * floor
    with pytest.raises(ValueError, match="noise floor"):
        exact_method.fit_exact(X, y, kernel(), noise=0.01)
    # the floor is part of the saved model: the loaded one has it and the same noise
    import gpscale

    pred = gpscale.fit(X.numpy(), y.numpy(), method="exact", standardize=False,
                       noise=10.0, max_iter=5)
    again = gpscale.load(pred.save(tmp_path / "m.gpscale"))
    assert ExactGP.noise.floor_of(again.model) == pytest.approx(floor)
    torch.testing.assert_close(again.model.noise, pred.model.noise)
    # other models keep the class's floor
    other = ExactGP(make_kernel("rbf-ard", 2), X, y)
    assert ExactGP.noise.floor_of(other) == ExactGP.noise.floor


def test_warnings_are_exported_from_the_package_and_train():
    import gpscale
    import gpscale.train
    from gpscale.train import lbfgs

    assert gpscale.ConvergenceWarning is gpscale.train.ConvergenceWarning
    assert gpscale.ConvergenceWarning is lbfgs.ConvergenceWarning
    assert gpscale.SizeWarning is gpscale.train.SizeWarning is cost.SizeWarning
    assert {"ConvergenceWarning", "SizeWarning"} <= set(gpscale.__all__)
    assert {"ConvergenceWarning", "SizeWarning"} <= set(gpscale.train.__all__)
    X, y = _highdim(n=40, d=2)
    with pytest.warns(gpscale.ConvergenceWarning, match="max_iter"):
        gpscale.fit(X.numpy(), y.numpy(), method="exact", max_iter=2)


def test_auto_start_escapes_the_plateau_of_unit_lengthscales_in_many_dimensions():
    """32 standardised columns: points are ~8 unit lengthscales apart, K ≈ s²I and the
    gradient almost vanishes, so a fit from the given start stalls where the model
    explains nothing; the √d start does not."""
    X, y = _highdim(d=32)
    _, given = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 32), init="given")
    _, auto = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 32))
    assert auto.objective < given.objective - 100
    with pytest.raises(ValueError, match="init"):
        exact_method.fit_exact(X, y, make_kernel("rbf-ard", 32), init="random")


def test_a_constant_column_does_not_change_the_exact_fit():
    """The exact GP with a column that is constant over the training rows (and 1e-6 off
    at one test row) predicts what it predicts without the column. Before the scaler
    tracked each column's range, that column was divided by the roundoff of its mean and
    the off row was predicted at the prior mean."""
    import numpy as np

    import gpscale

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (1200, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 + 0.1 * rng.standard_normal(1200)
    X_test = rng.uniform(-2, 2, (20, 3))
    c = -0.00043009
    with_c = np.column_stack([X, np.full(1200, c)])
    test_c = np.column_stack([X_test, np.full(20, c)])
    test_c[0, 3] += 1e-6
    opts = dict(method="exact", kernel="rbf-ard", max_iter=60, seed=0)
    plain = gpscale.fit(X, y, **opts).predict(X_test, return_std=True)
    const = gpscale.fit(with_c, y, **opts).predict(test_c, return_std=True)
    for a, b in zip(plain, const):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-3)


def test_the_exact_fit_s_options_are_declared_once_on_exact_fit():
    """fit_exact's signature is ExactFit's fields (what the CLI and ``gpscale methods``
    read); the options every path reads are checked when the fit object is built, the CG
    path's only where that path runs."""
    import dataclasses
    import inspect

    from gpscale.methods.registry import METHODS

    fields = {f.name: f.default for f in dataclasses.fields(exact_method.ExactFit)}
    params = list(inspect.signature(exact_method.fit_exact).parameters.values())
    assert [p.name for p in params[:3]] == ["X", "y", "kernel"]
    assert {p.name: p.default for p in params[3:]} == fields
    assert set(METHODS["exact"].options) == set(fields) - {"client"}
    assert set(exact_method.ExactFit.CG_OPTIONS) < set(fields)
    for bad in ({"max_iter": 0}, {"init": "random"}, {"solver": "lu"}, {"noise": -1.0},
                {"time_limit": -1.0}, {"dtype": "int64"}):
        with pytest.raises(ValueError):
            exact_method.ExactFit(**bad)
    exact_method.ExactFit(solver="cholesky", refine="never", subsample=1)  # not read
    with pytest.raises(ValueError, match="subsample"):
        X = torch.linspace(0, 1, 20, dtype=torch.float64).reshape(-1, 1)
        exact_method.fit_exact(X, X[:, 0], make_kernel("rbf", 1), solver="cg", subsample=1)


def test_the_solver_is_chosen_on_the_rows_the_fit_uses(monkeypatch):
    """ExactFit.solver_on counts rows as the fit does, repeated inputs merged: rows
    that are each input twice switch to CG only where the distinct inputs would."""
    monkeypatch.setattr(exact_method, "too_large", lambda n, d, dtype, rbf: n > 100)
    X = torch.rand(80, 2, dtype=torch.float64)
    twice = torch.cat([X, X])
    fit = exact_method.ExactFit()
    assert fit.solver_on(twice) == "cholesky"
    assert fit.solver_on(torch.rand(160, 2, dtype=torch.float64)) == "cg"
    assert exact_method.ExactFit(solver="cg").solver_on(X) == "cg"
    assert exact_method.ExactFit(solver="cholesky").solver_on(twice) == "cholesky"
