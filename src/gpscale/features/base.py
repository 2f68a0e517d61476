"""Feature maps: X (n, d) ↦ Φ (n, p), so that k(x, x') ≈ φ(x)ᵀ W φ(x')."""

from __future__ import annotations

import torch
from torch import nn

from ..params import summary


class FeatureMap(nn.Module):
    """Base class. Subclasses set ``num_features`` (p) and ``d`` (input columns) and
    implement ``forward(X) -> Φ``."""

    num_features: int
    d: int

    def forward(self, X: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def summary(self) -> str:
        return summary(self)
