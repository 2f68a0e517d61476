"""One Titsias bound: the row form (:class:`~gpscale.models.vfe_bound.VFEBound`, used by
SGPR and by SparseGP with Z = X[I]), the statistics form
(:func:`~gpscale.models.sgpr_stats.bound_from_statistics`, StreamedSGPR) and the paper's
decomposition (:meth:`SparseGP.terms`) give the same value and gradient as the dense
O(n³) formula, float64, small n."""

import math

import pytest
import torch
from test_sgpr import dense_vfe
from test_sgpr_passes import _rows

from gpscale.kernels import RBF, Scale
from gpscale.models import SGPR, SparseGP, StreamedSGPR
from gpscale.models.sgpr_stats import bound_from_statistics
from gpscale.models.vfe_bound import VFEBound, inner_factors, negative_bound


def _problem(n=41, d=2, m=7, seed=3):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X.sum(1)) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    idx = torch.randperm(n, generator=g)[:m]
    return X, y, idx


def _kernel():
    return Scale(RBF([0.9, 1.3], ard_dims=2), 1.4)


def _paths(X, y, idx, noise=0.05):
    """The models whose objective is the Titsias bound at Z = X[idx], at one θ and σ²."""
    Z = X[idx]
    return {"SparseGP": SparseGP(_kernel(), X, y, idx, noise=noise),
            "SGPR": SGPR(_kernel(), X, y, Z, noise=noise, learn_z=False),
            "StreamedSGPR": StreamedSGPR(_kernel(), Z, rows=_rows(X, y, (15, 26), 9),
                                         noise=noise, learn_z=False)}


def _value_and_grads(model):
    model.zero_grad()
    F = model.objective()
    F.backward()
    return F.detach(), {k: p.grad.clone() for k, p in model.named_parameters()
                        if p.grad is not None}


def test_every_path_gives_the_dense_bound_and_gradient():
    X, y, idx = _problem()
    models = _paths(X, y, idx)
    k, s2 = _kernel(), torch.tensor(0.05, dtype=torch.float64)
    with torch.no_grad():
        dense = dense_vfe(k(X), k(X, X[idx]), k(X[idx]), y, s2)
    got = {name: _value_and_grads(model) for name, model in models.items()}
    terms = models["SparseGP"].terms()
    paper = 0.5 * (terms["E_D"] + terms["E_C"] + terms["E_V"]) + 0.5 * len(y) * math.log(
        2 * math.pi)
    torch.testing.assert_close(paper.detach(), dense, rtol=1e-10, atol=0)
    reference_grads = got["SGPR"][1]
    assert {"raw_noise", "kernel.raw_outputscale"} <= set(reference_grads)
    for name, (F, grads) in got.items():
        torch.testing.assert_close(F, dense, rtol=1e-10, atol=0, msg=name)
        assert sorted(grads) == sorted(reference_grads), name
        for p, g in grads.items():
            torch.testing.assert_close(g, reference_grads[p], rtol=1e-8,
                                       atol=1e-8 * reference_grads[p].abs().max(), msg=name)


def test_the_dtc_objective_is_the_bound_without_its_trace_term():
    X, y, idx = _problem(seed=5)
    vfe = SparseGP(_kernel(), X, y, idx, noise=0.05)
    dtc = SparseGP(_kernel(), X, y, idx, noise=0.05, objective="dtc")
    with torch.no_grad():
        K, Kxz, Kzz = vfe.kernel(X), vfe.kernel(X, X[idx]), vfe.kernel(X[idx])
        trace_term = torch.trace(K - Kxz @ torch.linalg.solve(Kzz, Kxz.mT)) / (2 * 0.05)
        torch.testing.assert_close(vfe.objective() - dtc.objective(), trace_term,
                                   rtol=1e-8, atol=0)


@pytest.mark.parametrize("trace", [True, False])
def test_row_and_statistics_forms_share_the_m_by_m_part(trace):
    """From the same A = Luu⁻¹P/σ the row form's factors and the sums W = σ²AAᵀ,
    v = σAy give one bound (to rounding: the sums are formed differently)."""
    g = torch.Generator().manual_seed(0)
    P = torch.randn(6, 30, generator=g, dtype=torch.float64)
    R = torch.randn(6, 6, generator=g, dtype=torch.float64)
    Kzz = R @ R.mT + 6 * torch.eye(6, dtype=torch.float64)
    y = torch.randn(30, generator=g, dtype=torch.float64)
    noise, t = torch.tensor(0.2, dtype=torch.float64), torch.tensor(45.0, dtype=torch.float64)
    row = VFEBound.apply(P, Kzz, noise, t, y, trace)
    A = torch.linalg.solve_triangular(torch.linalg.cholesky(Kzz), P, upper=False) / noise.sqrt()
    B, LB, c = inner_factors(A @ A.mT, A @ y, noise.sqrt())
    F = negative_bound(30, noise, LB, c, y @ y, t if trace else None, (A * A).sum())
    torch.testing.assert_close(F, row, rtol=1e-13, atol=0)  # the row form is these two
    if trace:
        stats = bound_from_statistics(noise * (A @ A.mT), noise.sqrt() * (A @ y), y @ y, 30,
                                      t, noise)
        torch.testing.assert_close(stats, row, rtol=1e-12, atol=0)
