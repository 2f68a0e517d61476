"""A covariance made for categories: the exchangeable kernel of one categorical column,
and a table's kernel, the product of a stationary kernel on the numeric columns with one
exchangeable factor per categorical column (as BoTorch's mixed and multi-task GPs).

The column arrives one-hot coded (:mod:`gpscale.io.encoding`): each row of its block
holds one 1 (its level) or none (a level not seen in training, a level of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..params import Positive
from .base import Kernel, Product, Scale
from .stationary import RBF, Matern

__all__ = ["Exchangeable", "mixed_kernel"]


class Exchangeable(Kernel):
    """k(a, b) = 1 if a = b else ρ = exp(−θ), on the one-hot block ``active_dims`` of one
    categorical column (θ > 0 learned).

    With φ(a) = (a, 1 − Σ_l a_l), the rows' levels as indicator vectors (the last entry
    marks an unseen level), [a = b] = ⟨φ(a), φ(b)⟩, so k = ρ + (1 − ρ) ⟨φ(a), φ(b)⟩: a
    constant plus a linear kernel, positive semi-definite for ρ ∈ [0, 1].
    """

    raw_inputs = True
    theta = Positive(doc="θ, the log-correlation between two different levels: ρ = e^−θ")

    def __init__(self, theta: float = 1.0, active_dims: list[int] | None = None) -> None:
        super().__init__(active_dims)
        self.theta = torch.as_tensor(theta, dtype=torch.float64).reshape(1)

    @staticmethod
    def _same(X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """[a_i = b_j], (n1, n2): ⟨φ(a), φ(b)⟩."""
        u1, u2 = 1.0 - X1.sum(1, keepdim=True), 1.0 - X2.sum(1, keepdim=True)
        return X1 @ X2.mT + u1 @ u2.mT

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        rho = torch.exp(-self.theta)
        return rho + (1.0 - rho) * self._same(X1, X2)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        # 1 on one-hot rows; exact also for rows that are not (e.g. inducing inputs)
        rho = torch.exp(-self.theta)
        return rho + (1.0 - rho) * ((X * X).sum(1) + (1.0 - X.sum(1)) ** 2)

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        with torch.no_grad():
            same = self._same(self._cols(X1), self._cols(X2))
            rho = torch.exp(-self.theta.detach())
            total, matched = G.sum(), torch.vdot(G.reshape(-1), same.reshape(-1))
            inner = rho * total + (1.0 - rho) * matched
            d_theta = -rho * (total - matched)  # ∂k/∂θ = −ρ (1 − [a = b])
        grads = {}
        if self.raw_theta.requires_grad:
            grads[self.raw_theta] = type(self).theta.raw_grad(self, d_theta)
        return grads, inner.reshape(())

    def _config_args(self) -> dict[str, Any]:
        return {}


def mixed_kernel(d: int, blocks: Sequence[Sequence[int]], base: str = "rbf",
                 theta: float = 1.0) -> Kernel:
    """Scale(k_numeric · Π_c Exchangeable_c) for ``d`` input columns, ``blocks`` the
    one-hot column blocks of the categorical columns (the others are numeric; ARD
    lengthscales on them); ``base`` ``"rbf"`` or ``"matern52"``."""
    taken = sorted({int(j) for b in blocks for j in b})
    if any(j < 0 or j >= d for j in taken):
        raise ValueError(f"blocks name columns outside 0..{d - 1}")
    numeric = [j for j in range(d) if j not in set(taken)]
    parts: list[Kernel] = [Exchangeable(theta, active_dims=list(b)) for b in blocks]
    if numeric:
        if base not in ("rbf", "matern52"):
            raise ValueError(f"base must be 'rbf' or 'matern52', got {base!r}")
        k = (RBF(1.0, ard_dims=len(numeric), active_dims=numeric) if base == "rbf"
             else Matern(2.5, 1.0, ard_dims=len(numeric), active_dims=numeric))
        parts.insert(0, k)
    if not parts:
        raise ValueError("mixed_kernel needs at least one column")
    return Scale(parts[0] if len(parts) == 1 else Product(*parts))
