"""A kernel given by a finite feature map: k(x, x') = φ(x)ᵀφ(x').

Any :class:`~gpscale.features.FeatureMap` (random Fourier features, neural features,
GRIEF eigenfunctions) becomes a :class:`Kernel`, so that the function-space models
(ExactGP, SVGP) can use exactly the covariance that the weight-space FeatureGP uses:
K(X₁, X₂) = Φ₁ Φ₂ᵀ with Φ = features(X). The feature map's parameters are the
kernel's parameters (gradients flow through Φ). No signal variance is added: the
feature map carries its own scale; wrap it in :class:`~gpscale.kernels.Scale` for
s² φ(x)ᵀφ(x'). It lives with the feature maps, not the kernels, because it is made of
one: features import kernels, never the other way round.
"""

from __future__ import annotations

from typing import Any

import torch

from ..kernels import Kernel
from .base import FeatureMap


class FeatureKernel(Kernel):
    """k(x, x') = φ(x)ᵀφ(x'),  k(x, x) = ‖φ(x)‖²."""

    def __init__(self, features: FeatureMap, active_dims: list[int] | None = None) -> None:
        super().__init__(active_dims)
        if not isinstance(features, FeatureMap):
            raise ValueError(f"features must be a gpscale FeatureMap, got "
                             f"{type(features).__name__}")
        self.features = features

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        phi1 = self.features(X1)
        phi2 = phi1 if X2 is X1 else self.features(X2)
        return phi1 @ phi2.mT

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        phi = self.features(X)
        return (phi * phi).sum(-1)

    def _config_args(self) -> dict[str, Any]:
        return {"features": type(self.features).__name__,
                "num_features": int(self.features.num_features)}

    @classmethod
    def from_config(cls, args: dict[str, Any], children: list[Kernel]) -> Kernel:
        """Refused: the config names the feature map's type, not how to rebuild it (its
        frequencies or grid are not in the kernel's state)."""
        raise ValueError(
            f"a FeatureKernel ({args.get('features')}) cannot be rebuilt from a saved kernel "
            "config; save the weight-space model instead (gpscale.fit with method='rff', "
            "'grief-ii' or 'minimax' keeps its feature map in the file)")
