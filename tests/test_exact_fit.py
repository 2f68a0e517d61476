"""The exact method as users meet it: jitter warm start, the size guard, the stopping
rule's default, the auto start."""

import warnings

import pytest
import torch

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


def test_exact_cost_formula():
    est = exact_method.exact_cost(20_000, 5)
    assert est["memory_bytes"] == pytest.approx(3 * 20_000**2 * 8 + 4 * 20_000 * 5 * 8)
    small = exact_method.exact_cost(1000, 5)
    assert est["seconds"] == pytest.approx(small["seconds"] * 20**3, rel=1e-12)


def test_size_guard_warns_with_the_estimate_and_the_methods_that_scale(monkeypatch):
    monkeypatch.setattr(exact_method, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 9.6e9, "seconds": 3.6e4})
    with pytest.warns(exact_method.SizeWarning, match=r"600 minutes.*rff.*grief-ii.*svgp"):
        exact_method.size_guard(20_000, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert exact_method.size_guard(exact_method.GUARD_MIN_N - 1, 5) is None
    monkeypatch.setattr(exact_method, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 1e3, "seconds": 1.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert exact_method.size_guard(20_000, 5)["seconds"] == 1.0
    monkeypatch.setattr(exact_method, "available_memory", lambda: 1e9)
    monkeypatch.setattr(exact_method, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 9.6e9, "seconds": 1.0})
    with pytest.warns(exact_method.SizeWarning, match="GiB available"):
        exact_method.size_guard(20_000, 5)


def test_fit_exact_runs_the_size_guard(monkeypatch):
    monkeypatch.setattr(exact_method, "GUARD_MIN_N", 10)
    monkeypatch.setattr(exact_method, "exact_cost",
                        lambda n, d, dtype=None: {"memory_bytes": 1e3, "seconds": 1e5})
    X = torch.rand(20, 2, dtype=torch.float64)
    with pytest.warns(exact_method.SizeWarning):
        exact_method.fit_exact(X, X.sum(1), make_kernel("rbf-ard", 2), max_iter=3)


def _highdim(n=200, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, :3].sum(1)) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, (y - y.mean()) / y.std()


def test_default_stopping_rule_stops_early_near_the_optimum():
    X, y = _highdim()
    _, ref = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 16), tol=None, max_iter=300)
    _, res = exact_method.fit_exact(X, y, make_kernel("rbf-ard", 16))
    assert res.reason == "converged"
    assert res.n_evals < ref.n_evals
    assert res.objective - ref.objective < 3 * 1e-4 * len(y) * 3  # a few tol·n per point


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
