"""Titsias's (2009) collapsed bound and the SGPR posterior from row sums only.

With P = K_ZX (m × n), the rows enter the bound (eq. 9) and the posterior through

    G = P Pᵀ = K_ZX K_XZ,   b = P y = K_ZX y,   yᵀy,   n,   t = Σᵢ k(xᵢ, xᵢ),

sums over rows that a pass forms block by block (:mod:`gpscale.features.inducing`). In
the notation of :mod:`gpscale.models.vfe_bound` (Luu Luuᵀ = K_ZZ, A = Luu⁻¹P/σ):

    AAᵀ = Luu⁻¹ G Luu⁻ᵀ / σ²,   B = I + AAᵀ = LB LBᵀ,   c = LB⁻¹ Luu⁻¹ b / σ²,
    F = ½[n log 2π + n log σ² + 2 Σ log diag LB + yᵀy/σ² − cᵀc] + ½[t/σ² − tr AAᵀ],

every step m × m, so the gradient in (G, b, K_ZZ, σ², t) is torch autograd's; the
statistics pass carries it on to θ and Z. The posterior (Titsias eq. 6; the same
formulas as :meth:`gpscale.models.SGPR.predict`) with w = LB⁻ᵀc and V = Luu⁻¹K_Z*:

    μ* = Vᵀw,   v* = k** − ‖V‖² + ‖LB⁻¹V‖².
"""

from __future__ import annotations

import torch

from ..kernels import Kernel
from ..linalg import robust_cholesky
from ..params import LOG_2PI
from .base import MeanAndVariance

__all__ = ["bound_from_statistics", "posterior_factors", "posterior"]


def _whitened(gram: torch.Tensor, Kzz: torch.Tensor, noise: torch.Tensor):
    """(Luu, AAᵀ, LB) from G = K_ZX K_XZ and K_ZZ."""
    Luu = robust_cholesky(Kzz)
    V = torch.linalg.solve_triangular(Luu, gram, upper=False)            # Luu⁻¹G
    AAt = torch.linalg.solve_triangular(Luu, V.mT, upper=False) / noise  # Luu⁻¹GLuu⁻ᵀ/σ²
    AAt = 0.5 * (AAt + AAt.mT)
    LB = robust_cholesky(torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device) + AAt)
    return Luu, AAt, LB


def _c(Luu: torch.Tensor, LB: torch.Tensor, proj: torch.Tensor, noise: torch.Tensor):
    u = torch.linalg.solve_triangular(Luu, proj[:, None], upper=False)
    return torch.linalg.solve_triangular(LB, u, upper=False)[:, 0] / noise


def bound_from_statistics(gram: torch.Tensor, proj: torch.Tensor, yy: torch.Tensor, n: int,
                          trace: torch.Tensor, Kzz: torch.Tensor,
                          noise: torch.Tensor) -> torch.Tensor:
    """The negative bound F (total nats; module doc) from G, b, yᵀy, n, t, K_ZZ and σ²;
    differentiable in every tensor argument."""
    Luu, AAt, LB = _whitened(gram, Kzz, noise)
    c = _c(Luu, LB, proj, noise)
    return 0.5 * (n * LOG_2PI + n * torch.log(noise)
                  + 2.0 * torch.log(torch.diagonal(LB)).sum() + yy / noise - c @ c) \
        + 0.5 * (trace / noise - torch.diagonal(AAt).sum())


@torch.no_grad()
def posterior_factors(gram: torch.Tensor, proj: torch.Tensor, Kzz: torch.Tensor,
                      noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Luu, LB, w = LB⁻ᵀc): the training side of the posterior, O(m³)."""
    Luu, _, LB = _whitened(gram, Kzz, noise)
    c = _c(Luu, LB, proj, noise)
    return Luu, LB, torch.linalg.solve_triangular(LB.mT, c[:, None], upper=True)


@torch.no_grad()
def posterior(kernel: Kernel, Z: torch.Tensor, factors: tuple, Xs: torch.Tensor,
              noise: torch.Tensor, include_noise: bool = False,
              block: int = 4096) -> MeanAndVariance:
    """Mean and variance of f (of y with ``include_noise``) at Xs, block by block, from
    ``factors`` = (Luu, LB, w) (:func:`posterior_factors` or the in-memory model's)."""
    Luu, LB, w = factors
    means, variances = [], []
    for s in range(0, Xs.shape[0], block):
        Xb = Xs[s : s + block]
        V = torch.linalg.solve_triangular(Luu, kernel(Z, Xb), upper=False)
        means.append((V.mT @ w)[:, 0])
        W = torch.linalg.solve_triangular(LB, V, upper=False)
        var = (kernel.diag(Xb) - (V * V).sum(0) + (W * W).sum(0)).clamp_min(0.0)
        variances.append(var + noise if include_noise else var)
    return MeanAndVariance(torch.cat(means), torch.cat(variances))
