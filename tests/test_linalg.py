import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.linalg import (
    CholeskyError,
    NumericalWarning,
    cg,
    robust_cholesky,
    robust_eigh,
    woodbury_factor,
    woodbury_logdet,
    woodbury_solve,
)

D64 = torch.float64


def _spd(n, seed=0, cond=10.0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=D64))
    ev = torch.logspace(0, torch.log10(torch.tensor(cond)).item(), n, dtype=D64)
    return (Q * ev) @ Q.T


def test_cholesky_plain_matrix_no_warning(device):
    A = _spd(20).to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        L = robust_cholesky(A)
    torch.testing.assert_close(L @ L.T, A)


def test_cholesky_jitter_ladder_warns_with_value():
    X = torch.linspace(0, 1, 30, dtype=D64)[:, None]
    A = torch.exp(-0.5 * (X - X.T) ** 2 / 0.5**2)  # numerically singular
    A[0, 0] -= 1e-6  # now indefinite by a hair
    with pytest.warns(NumericalWarning, match="jitter"):
        L = robust_cholesky(A)
    assert torch.isfinite(L).all()


def test_cholesky_fails_clearly():
    A = -torch.eye(4, dtype=D64)
    with pytest.raises(CholeskyError, match="not positive definite"):
        robust_cholesky(A)
    with pytest.raises(CholeskyError, match="NaN"):
        robust_cholesky(torch.full((3, 3), float("nan"), dtype=D64))


def test_robust_eigh_retries_with_a_shift_when_lapack_fails(monkeypatch):
    g = torch.Generator().manual_seed(3)
    B = torch.randn(6, 6, generator=g, dtype=torch.float64)
    A = B @ B.T + 0.1 * torch.eye(6, dtype=torch.float64)
    real = torch.linalg.eigh
    calls = {"n": 0}

    def flaky(M):
        calls["n"] += 1
        if calls["n"] == 1:
            raise torch.linalg.LinAlgError("the algorithm failed to converge")
        return real(M)

    monkeypatch.setattr(torch.linalg, "eigh", flaky)
    with pytest.warns(NumericalWarning, match="diagonal shift"):
        lam, Q = robust_eigh(A)
    torch.testing.assert_close(lam, real(A)[0], rtol=0, atol=1e-10)
    torch.testing.assert_close((Q * lam) @ Q.T, A, rtol=0, atol=1e-10)
    def broken(M):
        raise torch.linalg.LinAlgError("never converges")

    monkeypatch.setattr(torch.linalg, "eigh", broken)
    with pytest.raises(torch.linalg.LinAlgError, match="even with a diagonal shift"):
        robust_eigh(A)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 5), seed=st.integers(0, 1000),
       precond=st.booleans())
def test_cg_solves_spd_systems(n, k, seed, precond):
    A = _spd(n, seed, cond=100.0)
    B = torch.randn(n, k, dtype=D64, generator=torch.Generator().manual_seed(seed + 1))
    P = (lambda R: R / torch.diagonal(A)[:, None]) if precond else None
    X, info = cg(lambda V: A @ V, B, precond=P, tol=1e-11, max_iter=10 * n)
    assert info.converged
    torch.testing.assert_close(X, torch.linalg.solve(A, B), rtol=1e-7, atol=1e-8)
    assert (info.rel_residual <= 1e-11).all()


def test_cg_warm_start_and_iteration_cap(device):
    A = _spd(50, 3, cond=1e4).to(device)
    b = torch.ones(50, dtype=D64, device=device)
    x_true = torch.linalg.solve(A, b)
    x, info = cg(lambda v: A @ v, b, x0=x_true, tol=1e-9)
    assert info.iterations == 0 and info.converged
    _, info = cg(lambda v: A @ v, b, tol=1e-14, max_iter=3)
    assert info.iterations == 3 and not info.converged


@pytest.mark.parametrize("p,scalar", [(3, True), (7, False), (12, False)])
def test_woodbury_matches_dense(p, scalar, device):
    n = 10
    g = torch.Generator().manual_seed(p)
    phi = torch.randn(n, p, generator=g, dtype=D64).to(device)
    noise = torch.tensor(0.3, dtype=D64, device=device)
    w = (torch.tensor(1.5, dtype=D64) if scalar else torch.rand(p, generator=g, dtype=D64) + 0.5)
    w = w.to(device)
    C = noise * torch.eye(n, dtype=D64, device=device) + (phi * w.expand(p)) @ phi.T
    B = torch.randn(n, 2, generator=g, dtype=D64).to(device)
    torch.testing.assert_close(woodbury_solve(phi, noise, w, B), torch.linalg.solve(C, B))
    L = woodbury_factor(phi.T @ phi, noise, w)
    torch.testing.assert_close(woodbury_logdet(n, noise, w, L), torch.linalg.slogdet(C)[1])
