"""Periodic kernels."""

from __future__ import annotations

import math

import torch

from ..params import Positive
from .base import Kernel


def _sin2_sum(X1: torch.Tensor, X2: torch.Tensor, period: torch.Tensor) -> torch.Tensor:
    """Σ_d sin²(π (x_d − x'_d) / p)."""
    diff = X1[:, None, :] - X2[None, :, :]
    return torch.sin(math.pi * diff / period).pow(2).sum(-1)


def _periodic_vjp(kernel: Kernel, X1: torch.Tensor, X2: torch.Tensor, G: torch.Tensor,
                  sq_weight: float):
    """Closed-form ⟨G, ∂K/∂θ⟩ for K = exp(−(2S + w Q)/l²), S = Σ_d sin²(πδ_d/p),
    Q = Σ_d δ_d², w = ``sq_weight`` (0: Periodic; ½: LocallyPeriodic), one column at a
    time (no n1 x n2 x d tensor):

    ∂K/∂l = K (4S + 2wQ)/l³,   ∂K/∂p = K · 2π/(l² p²) · Σ_d δ_d sin(2πδ_d/p).
    """
    with torch.no_grad():
        X1, X2 = kernel._cols(X1), kernel._cols(X2)
        l, p = kernel.lengthscale.detach(), kernel.period.detach()
        S = torch.zeros_like(G)
        Q = torch.zeros_like(G)
        T = torch.zeros_like(G)
        for j in range(X1.shape[1]):
            delta = X1[:, j, None] - X2[None, :, j]
            S += torch.sin(math.pi * delta / p).pow(2)
            T += delta * torch.sin(2 * math.pi * delta / p)
            if sq_weight:
                Q += delta * delta
        GK = torch.exp(-(2.0 * S + sq_weight * Q) / l**2).mul_(G)
        inner = GK.sum()
        grad_l = torch.vdot(GK.reshape(-1), (4.0 * S + 2.0 * sq_weight * Q).reshape(-1)) / l**3
        grad_p = torch.vdot(GK.reshape(-1), T.reshape(-1)) * (2 * math.pi / (l**2 * p**2))
    grads = {}
    for name, g in (("lengthscale", grad_l), ("period", grad_p)):
        raw = getattr(kernel, "raw_" + name)
        if raw.requires_grad:
            grads[raw] = getattr(type(kernel), name).raw_grad(kernel, g)
    return grads, inner


class Periodic(Kernel):
    """k(x, x') = exp(−2 Σ_d sin²(π |x_d − x'_d| / p) / l²)  (MacKay's periodic kernel)."""

    lengthscale = Positive(doc="lengthscale l")
    period = Positive(doc="period p")

    def __init__(
        self, lengthscale: float = 1.0, period: float = 1.0, active_dims: list[int] | None = None
    ) -> None:
        super().__init__(active_dims)
        self.lengthscale = lengthscale
        self.period = period

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return torch.exp(-2.0 * _sin2_sum(X1, X2, self.period) / self.lengthscale**2)

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        return _periodic_vjp(self, X1, X2, G, 0.0)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)


class LocallyPeriodic(Kernel):
    """GPCV-ADMM paper eq. (20), one lengthscale shared by both factors:

    k(x, x') = exp(−2 sin²(π |x − x'| / p) / l²) · exp(−(x − x')² / (2 l²)).
    (Multiply by :class:`Scale` for the σ² in front.)
    """

    lengthscale = Positive(doc="lengthscale l (shared)")
    period = Positive(doc="period p")

    def __init__(
        self, lengthscale: float = 1.0, period: float = 1.0, active_dims: list[int] | None = None
    ) -> None:
        super().__init__(active_dims)
        self.lengthscale = lengthscale
        self.period = period

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        l2 = self.lengthscale**2
        diff = X1[:, None, :] - X2[None, :, :]
        sq = diff.pow(2).sum(-1)
        sin2 = torch.sin(math.pi * diff / self.period).pow(2).sum(-1)
        return torch.exp(-2.0 * sin2 / l2 - 0.5 * sq / l2)

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        return _periodic_vjp(self, X1, X2, G, 0.5)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)
