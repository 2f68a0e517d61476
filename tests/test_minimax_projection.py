"""MINIMAX's default projection (weight_space.project_A_factored) against the dense
eigenvalue clip, its log|A| and A⁻¹ against dense forms, and fit_minimax's default
path against the eigendecomposition-every-step path (projection="eigh")."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gpscale.train.stochastic as stochastic
from gpscale.features import RandomFourierFeatures
from gpscale.train.stochastic import fit_minimax
from gpscale.train.weight_space import (
    project_A,
    project_A_factored,
    project_B,
    psi_batch,
)

D64 = torch.float64


def _clip(A, noise, a_max=None):
    """Dense reference: U clip(Λ) Uᵀ of the symmetric part."""
    ev, U = torch.linalg.eigh(0.5 * (A + A.T))
    return (U * ev.clamp(min=noise, max=a_max)) @ U.T


def _spectrum_matrix(p, g, lam):
    Q = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=D64))[0]
    return (Q * lam) @ Q.T


def _check(A, noise, a_max=None, test_inside=True):
    P, (value, inverse), _ = project_A_factored(A, noise, a_max, test_inside)
    ref = _clip(A, noise, a_max)
    scale = float(ref.abs().max())
    # the clip to 1e-10 relative, wherever the inside test lands
    assert torch.allclose(P, ref, rtol=0, atol=1e-10 * scale)
    ev = torch.linalg.eigvalsh(0.5 * (P + P.T))
    assert float(ev.min()) >= noise - 1e-10 * scale
    if a_max is not None:
        assert float(ev.max()) <= a_max + 1e-10 * scale
    # log|P| and P⁻¹ equal the dense forms of the returned P
    assert float(value) == pytest.approx(float(torch.logdet(ref)), rel=1e-10, abs=1e-10)
    dense_inv = torch.linalg.inv(ref)
    assert torch.allclose(inverse, dense_inv, rtol=0,
                          atol=1e-9 * float(dense_inv.abs().max()))
    return P


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 9), noise=st.floats(1e-3, 10.0), seed=st.integers(0, 10_000),
       shift=st.floats(-3.0, 3.0), bounded=st.booleans())
def test_factored_projection_equals_clip(p, noise, seed, shift, bounded):
    """Spectra inside, across and outside [σ², a_max], plus a non-symmetric part."""
    g = torch.Generator().manual_seed(seed)
    lam = noise * (1 + shift + 0.5 * torch.rand(p, generator=g, dtype=D64))
    A = _spectrum_matrix(p, g, lam) + 1e-3 * noise * torch.randn(p, p, generator=g,
                                                                 dtype=D64)
    for test_inside in (True, False):
        _check(A, noise, 2.5 * noise if bounded else None, test_inside)


@pytest.mark.parametrize("rel", [0.0, 1e-15, -1e-15, 1e-13, -1e-13, 1e-8, -1e-8])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_factored_projection_near_the_bound(rel, seed):
    """Eigenvalues at σ²(1 + rel), some of them on the bound itself: whichever branch the
    Cholesky test takes, the result is the clip to 1e-10 and PSD above σ² − tol."""
    g = torch.Generator().manual_seed(seed)
    noise, p = 0.3, 12
    lam = noise * (1 + 5 * torch.rand(p, generator=g, dtype=D64))
    lam[: p // 2] = noise * (1 + rel)
    for test_inside in (True, False):
        _check(_spectrum_matrix(p, g, lam), noise, test_inside=test_inside)
        _check(_spectrum_matrix(p, g, lam), noise, float(lam.max()) * (1 + rel), test_inside)


def test_factored_projection_branches():
    """The inside test leaves a strictly feasible A as it is (no eigendecomposition),
    and reports a clip when an eigenvalue lies below σ²; both agree with project_A."""
    g = torch.Generator().manual_seed(3)
    noise, p = 0.5, 20
    M = torch.randn(p, p, generator=g, dtype=D64)
    S = M @ M.T  # symmetric only up to the BLAS's rounding, which varies with its threads
    feasible = 0.5 * (S + S.T) + 2 * noise * torch.eye(p, dtype=D64)  # exactly symmetric
    P, _, clipped = project_A_factored(feasible, noise)
    assert not clipped and torch.equal(P, feasible)
    infeasible = feasible - 3 * noise * torch.eye(p, dtype=D64)
    P, _, clipped = project_A_factored(infeasible, noise)
    assert clipped
    assert torch.allclose(P, project_A(infeasible, noise), rtol=0, atol=1e-12 * p)
    assert float(torch.linalg.eigvalsh(P).min()) == pytest.approx(noise, rel=1e-10)


def test_factored_projection_uses_the_larger_side():
    """More than half the eigenvalues clipped: the full U clip(Λ) Uᵀ branch."""
    g = torch.Generator().manual_seed(4)
    noise, p = 0.2, 15
    lam = noise * torch.linspace(-2.0, 1.5, p, dtype=D64)
    _check(_spectrum_matrix(p, g, lam) + 1e-4 * torch.randn(p, p, generator=g, dtype=D64),
           noise)


@settings(max_examples=20, deadline=None)
@given(p=st.integers(1, 8), seed=st.integers(0, 10_000), noise=st.floats(1e-3, 10.0),
       mu=st.floats(0.1, 10.0))
def test_psi_batch_with_known_logdet_equals_cholesky(p, seed, noise, mu):
    """psi_batch with (log|A|, A⁻¹) from the projection: value and every gradient equal
    to the Cholesky (autograd) form."""
    g = torch.Generator().manual_seed(seed)
    n, s = 30, 7
    A, (value, inverse), _ = project_A_factored(torch.randn(p, p, generator=g, dtype=D64),
                                                noise)
    B = project_B(torch.randn(p, p, generator=g, dtype=D64))
    phi = torch.randn(s, p, generator=g, dtype=D64)
    y = torch.randn(s, generator=g, dtype=D64)
    w0 = torch.randn(p, generator=g, dtype=D64)
    out = []
    for known in (None, (value + p * torch.log(torch.tensor(float(n), dtype=D64)),
                         inverse / n)):
        w = w0.clone().requires_grad_(True)
        sigma2 = torch.tensor(noise, dtype=D64, requires_grad=True)
        A_bar = A.clone().requires_grad_(True)
        psi = psi_batch(phi, y, n, w, sigma2, n * A_bar, B, mu, known=known)
        psi.backward()
        out.append((psi.detach(), w.grad, sigma2.grad, A_bar.grad))
    for got, ref in zip(out[1], out[0]):
        assert torch.allclose(got, ref, rtol=1e-10, atol=1e-10 * (1 + ref.abs().max()))


def _toy(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=D64) * 4 - 2
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, generator=g,
                                                                          dtype=D64)
    return X, (y - y.mean()) / y.std()


def _recorded_fit(monkeypatch, projection, **kw):
    """fit_minimax over 30 steps, recording each step's (w, σ²/n, projected A_bar) and
    whether the projection clipped."""
    log = {"w": [], "noise": [], "A": [], "clipped": []}
    psi, full, factored = stochastic.psi_batch, stochastic.project_A, \
        stochastic.project_A_factored

    def psi_rec(phi, y, n, w, *args, **kwargs):
        log["w"].append(w.detach().clone())
        return psi(phi, y, n, w, *args, **kwargs)

    def full_rec(A, noise, a_max=None, return_eig=False):
        out = full(A, noise, a_max, return_eig=return_eig)
        log["noise"].append(float(noise))
        log["A"].append(out[0].clone())
        return out

    def factored_rec(A, noise, a_max=None, test_inside=True):
        out = factored(A, noise, a_max, test_inside)
        log["noise"].append(float(noise))
        log["A"].append(out[0].clone())
        log["clipped"].append(out[2])
        return out

    monkeypatch.setattr(stochastic, "psi_batch", psi_rec)
    monkeypatch.setattr(stochastic, "project_A", full_rec)
    monkeypatch.setattr(stochastic, "project_A_factored", factored_rec)
    X, y = _toy()
    with pytest.warns(UserWarning, match="optimiser steps"):  # 30 steps on 60 rows
        fit_minimax(X, y, RandomFourierFeatures(2, 10, seed=0), batch_size=10, epochs=5,
                    seed=1, projection=projection, **kw)
    monkeypatch.undo()
    return log


@pytest.mark.parametrize("kw, clips", [
    (dict(), 30), (dict(zeta_max=50.0), 30),
    (dict(optimizer="adam", lr=1e-5), "some"), (dict(optimizer="adam", lr=1e-6), 0)],
    ids=["adadelta", "zeta_max", "adam-mixed", "adam-inside"])
def test_fit_minimax_default_equals_eigh_path(monkeypatch, kw, clips):
    """30 steps of the default path give the iterates (w, σ², A) of the
    eigendecomposition-every-step path, to rounding. AdaDelta (the default) clips at
    every step; Adam at rate 1e-5 clips at some steps and at 1e-6 at none (A stays
    inside: the Cholesky-test branch), so both branches and their hand-overs are met."""
    new = _recorded_fit(monkeypatch, "auto", **kw)
    ref = _recorded_fit(monkeypatch, "eigh", **kw)
    assert len(new["A"]) == len(ref["A"]) == 30
    for key in ("w", "A"):
        for got, want in zip(new[key], ref[key]):
            assert torch.allclose(got, want, rtol=1e-9, atol=1e-11 * float(want.abs().max()))
    assert new["noise"] == pytest.approx(ref["noise"], rel=1e-10)
    count = sum(new["clipped"])
    assert 0 < count < 30 if clips == "some" else count == clips


def test_fit_minimax_rejects_unknown_projection():
    X, y = _toy()
    with pytest.raises(ValueError, match="projection"):
        fit_minimax(X, y, RandomFourierFeatures(2, 4, seed=0), projection="qr")
