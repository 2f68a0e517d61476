"""Stationary kernels with automatic relevance determination (one lengthscale per
input column when ``ard_dims`` is given, one shared lengthscale otherwise)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..params import Positive
from .base import Kernel


def scaled_sqdist(X1: torch.Tensor, X2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """r²(x, x') = Σ_d (x_d − x'_d)² / l_d², via ‖a‖² + ‖b‖² − 2abᵀ on centred inputs."""
    centre = X2.mean(0, keepdim=True).detach() if X2.shape[0] else 0.0
    a = (X1 - centre) / lengthscale
    b = (X2 - centre) / lengthscale
    r2 = (a * a).sum(-1, keepdim=True) + (b * b).sum(-1) - 2.0 * a @ b.mT
    return r2.clamp_min(0.0)


class Stationary(Kernel):
    """A kernel of the scaled distance r between inputs."""

    lengthscale = Positive(doc="lengthscale(s) l")

    def __init__(
        self,
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        ard_dims: int | None = None,
        active_dims: list[int] | None = None,
    ) -> None:
        super().__init__(active_dims)
        ls = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(-1)
        if ard_dims is not None:
            if ard_dims < 1:
                raise ValueError(f"ard_dims must be a positive number of columns, got {ard_dims}")
            if ls.numel() == 1:
                ls = ls.expand(ard_dims).clone()
            elif ls.numel() != ard_dims:
                raise ValueError(
                    f"lengthscale has {ls.numel()} entries but ard_dims={ard_dims}; "
                    "give one value or one per input column."
                )
        self.ard_dims = ard_dims if ard_dims is not None else (ls.numel() if ls.numel() > 1
                                                               else None)
        self.lengthscale = ls

    def _config_args(self) -> dict[str, Any]:
        return {"ard_dims": self.ard_dims}

    def r2(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        if self.ard_dims is not None and X1.shape[-1] != self.ard_dims:
            raise ValueError(
                f"{type(self).__name__} has {self.ard_dims} lengthscales but the inputs have "
                f"{X1.shape[-1]} columns; build it with ard_dims={X1.shape[-1]}."
            )
        return scaled_sqdist(X1, X2, self.lengthscale)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)


class RBF(Stationary):
    """Squared exponential: k(x, x') = exp(−r²/2), r² = Σ_d (x_d − x'_d)²/l_d².

    Separable: K = Π_d K_d with K_d = exp(−(x_d − x'_d)²/(2 l_d²)); see :meth:`factors`.
    """

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return torch.exp(-0.5 * self.r2(X1, X2))

    def factors(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """The 1-D factor matrices, shape (d, n1, n2), whose elementwise product is K."""
        X1 = self._cols(X1)
        X2 = X1 if X2 is None else self._cols(X2)
        ls = self.lengthscale.expand(X1.shape[-1])
        diff = (X1.mT[:, :, None] - X2.mT[:, None, :]) / ls[:, None, None]
        return torch.exp(-0.5 * diff * diff)


class Matern(Stationary):
    """Matérn with ν ∈ {1/2, 3/2, 5/2}:

    ν=1/2: exp(−r);  ν=3/2: (1 + √3 r) exp(−√3 r);  ν=5/2: (1 + √5 r + 5r²/3) exp(−√5 r).
    """

    def __init__(
        self,
        nu: float = 2.5,
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        ard_dims: int | None = None,
        active_dims: list[int] | None = None,
    ) -> None:
        if nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"Matern nu must be 0.5, 1.5 or 2.5, got {nu}")
        super().__init__(lengthscale, ard_dims, active_dims)
        self.nu = float(nu)

    def _config_args(self) -> dict[str, Any]:
        return {"nu": self.nu, "ard_dims": self.ard_dims}

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        r2 = self.r2(X1, X2)
        r = torch.sqrt(r2.clamp_min(1e-30))
        if self.nu == 0.5:
            return torch.exp(-r)
        if self.nu == 1.5:
            s = math.sqrt(3.0) * r
            return (1.0 + s) * torch.exp(-s)
        s = math.sqrt(5.0) * r
        return (1.0 + s + (5.0 / 3.0) * r2) * torch.exp(-s)


class RationalQuadratic(Stationary):
    """k(x, x') = (1 + r²/(2α))^(−α)."""

    alpha = Positive(doc="shape α")

    def __init__(
        self,
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        alpha: float = 1.0,
        ard_dims: int | None = None,
        active_dims: list[int] | None = None,
    ) -> None:
        super().__init__(lengthscale, ard_dims, active_dims)
        self.alpha = alpha

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return torch.pow(1.0 + self.r2(X1, X2) / (2.0 * self.alpha), -self.alpha)


class Linear(Kernel):
    """k(x, x') = v · xᵀx'."""

    variance = Positive(doc="variance v")

    def __init__(self, variance: float = 1.0, active_dims: list[int] | None = None) -> None:
        super().__init__(active_dims)
        self.variance = variance

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self.variance * (X1 @ X2.mT)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return self.variance * (X * X).sum(-1)
