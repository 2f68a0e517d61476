"""Titsias's (2009) collapsed bound and the SGPR posterior from row sums only.

With the whitened inducing features Φ = K_XZ Luu⁻ᵀ (Luu Luuᵀ = K_ZZ;
:mod:`gpscale.features.inducing`), the rows enter the bound (eq. 9) and the posterior
through

    W = ΦᵀΦ = Luu⁻¹ K_ZX K_XZ Luu⁻ᵀ,   v = Φᵀy = Luu⁻¹ K_ZX y,   yᵀy,   n,   t = Σᵢ k(xᵢ, xᵢ),

sums over rows that a pass forms block by block. In the notation of
:mod:`gpscale.models.vfe_bound` (A = Luu⁻¹K_ZX/σ):

    AAᵀ = W / σ²,   B = I + AAᵀ = LB LBᵀ,   c = LB⁻¹ v / σ²,
    F = ½[n log 2π + n log σ² + 2 Σ log diag LB + yᵀy/σ² − cᵀc] + ½[t/σ² − tr AAᵀ],

every step m × m (:func:`~gpscale.models.vfe_bound.inner_factors` and
:func:`~gpscale.models.vfe_bound.negative_bound`, the row form's own, with AAᵀ = W/σ²
and c from v), so the gradient in (W, v, σ², t) is torch autograd's; the statistics
pass carries it on to θ and Z. The posterior (Titsias eq. 6; the same formulas as
:meth:`gpscale.models.SGPR.predict`) with w = LB⁻ᵀc and V = Luu⁻¹K_Z*:

    μ* = Vᵀw,   v* = k** − ‖V‖² + ‖LB⁻¹V‖².
"""

from __future__ import annotations

import torch

from ..kernels import Kernel
from ..linalg import robust_cholesky
from .base import MeanAndVariance
from .vfe_bound import inner_factors, negative_bound

__all__ = ["bound_from_statistics", "posterior_factors", "posterior", "whiten"]


def _factors(gram: torch.Tensor, proj: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(AAᵀ, LB, c) from W = σ²AAᵀ (symmetrised: a sum over row blocks) and v = σAy
    (:func:`~gpscale.models.vfe_bound.inner_factors`)."""
    AAt = 0.5 * (gram + gram.mT) / noise
    _, LB, c = inner_factors(AAt, proj, noise)
    return AAt, LB, c


def bound_from_statistics(gram: torch.Tensor, proj: torch.Tensor, yy: torch.Tensor, n: int,
                          trace: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The negative bound F (total nats; module doc) from W, v, yᵀy, n, t and σ²;
    differentiable in every tensor argument."""
    AAt, LB, c = _factors(gram, proj, noise)
    return negative_bound(n, noise, LB, c, yy, trace, torch.diagonal(AAt).sum())


@torch.no_grad()
def posterior_factors(gram: torch.Tensor, proj: torch.Tensor, Kzz: torch.Tensor,
                      noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Luu, LB, w = LB⁻ᵀc): the training side of the posterior, O(m³)."""
    _, LB, c = _factors(gram, proj, noise)
    return robust_cholesky(Kzz), LB, torch.linalg.solve_triangular(LB.mT, c[:, None],
                                                                   upper=True)


def whiten(gram: torch.Tensor, proj: torch.Tensor, Kzz: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, v) from the unwhitened sums G = K_ZX K_XZ and b = K_ZX y, which model files
    written before the features were whitened hold."""
    Luu = robust_cholesky(Kzz)
    half = torch.linalg.solve_triangular(Luu, gram, upper=False)
    W = torch.linalg.solve_triangular(Luu, half.mT, upper=False)
    v = torch.linalg.solve_triangular(Luu, proj[:, None], upper=False)[:, 0]
    return 0.5 * (W + W.mT), v


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
