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

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)
