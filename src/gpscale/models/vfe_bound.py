"""The collapsed VFE bound (Titsias 2009, eq. 9) as a function of the kernel matrices,
with its gradient written out, so a step costs ~3 m²n multiply-adds instead of the ~6
that autograd spends through the triangular solve and the m × n products.

With P = K_ZX (m × n), Luu Luuᵀ = K_ZZ, A = Luu⁻¹P/σ, B = I + AAᵀ = LB LBᵀ,
c = LB⁻¹Ay/σ and t = Σᵢ k(xᵢ, xᵢ):

    F = ½[n log 2π + n log σ² + log|B| + yᵀy/σ² − cᵀc] + ½[t/σ² − tr(AAᵀ)].

Gradients (M = σ²K_ZZ + PPᵀ, α = M⁻¹Py = Luu⁻ᵀLB⁻ᵀc, r = y − Pᵀα):

    ∂F/∂P     = Luu⁻ᵀ(B⁻¹ − I)A/σ − α rᵀ/σ²,
    ∂F/∂K_ZZ  = ½[Luu⁻ᵀ(B⁻¹ + B − 2I)Luu⁻¹ + ααᵀ],
    ∂F/∂σ²    = ½[n/σ² + (tr B⁻¹ − m)/σ² − (yᵀy − σ²cᵀc)/σ⁴ + ‖LB⁻ᵀc‖²/σ²
                  − (t − σ² tr AAᵀ)/σ⁴],
    ∂F/∂t     = 1/(2σ²).

The kernel's own derivatives (hyperparameters and inducing inputs Z) follow from ∂F/∂P
and ∂F/∂K_ZZ by the kernel's contraction (:func:`gpscale.kernels.base.cross_matrix` for
K_ZX, autograd for the m × m K_ZZ), which costs O(mnd), not O(m²n).

``trace=False`` drops the trace term ½[t/σ² − tr(AAᵀ)]: F is then the DTC / PP
negative log marginal likelihood −log N(y | 0, PᵀK_ZZ⁻¹P + σ²I) (Cao et al. 2013,
eq. 4), and the "−I" in ∂F/∂P, one "B − I" in ∂F/∂K_ZZ and the last term of ∂F/∂σ²
go with it. The sparse GP on a subset of training points
(:class:`~gpscale.models.SparseGP`, CholQR's continuous phase) evaluates both of its
objectives here, with Z = X[I] and K_ZZ the columns I of P.

The m × m part, B = I + AAᵀ, LB, c and F from them, is written once
(:func:`inner_factors`, :func:`negative_bound`): the rows' sums W = σ²AAᵀ, v = σAy
(:mod:`gpscale.models.sgpr_stats`) reach F through the same two functions. Only the
gradient differs: written out here in P and K_ZZ, by autograd in (W, v) there.
"""

from __future__ import annotations

import torch

from ..linalg import robust_cholesky
from ..params import LOG_2PI


def _solve(L: torch.Tensor, B: torch.Tensor, transpose: bool = False) -> torch.Tensor:
    """L⁻¹B, or L⁻ᵀB with ``transpose``, for lower-triangular L."""
    if transpose:
        return torch.linalg.solve_triangular(L.mT, B, upper=True)
    return torch.linalg.solve_triangular(L, B, upper=False)


def inner_factors(AAt: torch.Tensor, b: torch.Tensor, scale: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, LB, c): B = I + AAᵀ = LB LBᵀ and c = LB⁻¹b / scale, from AAᵀ (m × m) and
    b / scale = Ay/σ (the rows give b = Ay, scale = σ; the row sums b = v = σAy,
    scale = σ², each path keeping the rounding it has always had), in O(m³);
    differentiable."""
    B = torch.eye(AAt.shape[0], dtype=AAt.dtype, device=AAt.device) + AAt
    LB = robust_cholesky(B)
    return B, LB, _solve(LB, b[:, None])[:, 0] / scale


def negative_bound(n: int, noise: torch.Tensor, LB: torch.Tensor, c: torch.Tensor,
                   yy: torch.Tensor, trace_kxx: torch.Tensor | None,
                   tr_aat: torch.Tensor) -> torch.Tensor:
    """F of the module doc from the factors of :func:`inner_factors`, yᵀy, t = Σᵢ
    k(xᵢ, xᵢ) and tr AAᵀ; ``trace_kxx`` None: the DTC objective (no trace term).
    Differentiable."""
    F = 0.5 * (n * LOG_2PI + n * torch.log(noise)
               + 2.0 * torch.log(torch.diagonal(LB)).sum() + yy / noise - c @ c)
    if trace_kxx is not None:
        F = F + 0.5 * (trace_kxx / noise - tr_aat)
    return F


def factors(P: torch.Tensor, Kzz: torch.Tensor, noise: torch.Tensor, y: torch.Tensor):
    """(Luu, A, B, LB, c) of the module doc, in O(m²n): shared by the bound and the
    predictions."""
    sigma = noise.sqrt()
    Luu = robust_cholesky(Kzz)
    A = _solve(Luu, P) / sigma
    return Luu, A, *inner_factors(A @ A.mT, A @ y, sigma)


class VFEBound(torch.autograd.Function):
    """``VFEBound.apply(P, Kzz, noise, trace_kxx, y[, trace])`` -> F (total nats);
    ``trace=False``: the DTC objective (``trace_kxx`` unused, its gradient zero)."""

    @staticmethod
    def forward(ctx, P, Kzz, noise, trace_kxx, y, trace=True):  # noqa: D102
        Luu, A, B, LB, c = factors(P, Kzz, noise, y)
        yy = y @ y
        tr_aat = torch.diagonal(B - torch.eye(B.shape[0], dtype=B.dtype, device=B.device)).sum()
        F = negative_bound(P.shape[1], noise, LB, c, yy, trace_kxx if trace else None, tr_aat)
        ctx.trace = bool(trace)
        ctx.save_for_backward(A, B, Luu, LB, c, noise, trace_kxx, y, yy, tr_aat)
        return F

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        A, B, Luu, LB, c, noise, trace_kxx, y, yy, tr_aat = ctx.saved_tensors
        m, n = A.shape
        sigma = noise.sqrt()
        eye = torch.eye(m, dtype=A.dtype, device=A.device)
        tr = 1.0 if ctx.trace else 0.0  # weight of the trace term ½[t/σ² − tr(AAᵀ)]
        Binv = torch.cholesky_inverse(LB)
        w = _solve(LB, c[:, None], transpose=True)          # LB⁻ᵀc = Luuᵀα
        alpha = _solve(Luu, w, transpose=True)[:, 0]
        g_P = g_K = g_s = None
        if ctx.needs_input_grad[0]:
            W = _solve(Luu, Binv - tr * eye, transpose=True) / sigma
            r = y - sigma * (A.mT @ w[:, 0])                 # y − Pᵀα
            g_P = (W @ A).sub_(torch.outer(alpha, r / noise)).mul_(grad)
        if ctx.needs_input_grad[1]:
            inner = _solve(Luu, Binv - eye + tr * (B - eye), transpose=True)
            g_K = _solve(Luu, inner.mT, transpose=True)       # Luu⁻ᵀ(...)Luu⁻¹
            g_K = 0.5 * grad * (0.5 * (g_K + g_K.mT) + torch.outer(alpha, alpha))
        if ctx.needs_input_grad[2]:
            g_s = 0.5 * grad * ((n + torch.diagonal(Binv).sum() - m) / noise
                                - (yy - noise * (c @ c)) / noise**2 + (w[:, 0] @ w[:, 0]) / noise
                                - tr * (trace_kxx - noise * tr_aat) / noise**2)
        g_t = 0.5 * tr * grad / noise if ctx.needs_input_grad[3] else None
        return g_P, g_K, g_s, g_t, None, None
