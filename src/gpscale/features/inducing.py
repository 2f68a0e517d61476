"""Inducing features φ(x) = k(Z, x), and their whitened form Luu⁻¹k(Z, x) (Luu Luuᵀ =
K_ZZ): the m "features" whose row sums give a sparse GP's statistics.

Titsias's (2009) collapsed bound (eq. 9) reads the rows only through sums: K_ZX K_XZ,
K_ZX y, yᵀy, n and Σᵢ k(xᵢ, xᵢ), which the finite-feature statistics pass forms
(:mod:`gpscale.models.feature_stats`), in process or on dask workers, and whose second
pass gives the gradient in the map's parameters, the kernel's θ and the inducing inputs
Z.

The bound's value is taken from sums of *whitened* features, as the in-memory SGPR
whitens K_ZX before its products: ΦᵀΦ is then a sum of Gram matrices, positive
semi-definite as computed. Summing K_ZX K_XZ and whitening the m × m sum afterwards
amplifies its rounding by K_ZZ⁻¹: at 2·10⁵ rows I + Luu⁻¹GLuu⁻ᵀ/σ² needed jitter of up
to 1e-4 × its diagonal, which corrupts the bound (benchmarks/results/sgpr-scale/). The
whitening costs a triangular solve per row; the gradient pass needs none (it runs on
the plain features, :mod:`gpscale.models.sgpr_passes`).
"""

from __future__ import annotations

import torch
from torch import nn

from ..kernels import Kernel, Scale, Stationary
from ..kernels.base import cross_matrix
from .base import FeatureMap

__all__ = ["InducingFeatures", "constant_diagonal", "check_constant_diagonal",
           "diagonal_sum"]


class InducingFeatures(FeatureMap):
    """Φ = K(X, Z) (n × m), or K(X, Z) Luu⁻ᵀ given ``whitener`` = Luu (a constant: no
    gradient flows to it): ``kernel`` and inducing inputs ``Z`` (m, d) are shared with the
    model that made the map (the same parameter objects), so gradients of the statistics
    land on the model's parameters."""

    def __init__(self, kernel: Kernel, Z: nn.Parameter,
                 whitener: torch.Tensor | None = None) -> None:
        super().__init__()
        self.kernel = kernel
        self.Z = Z
        self.register_buffer("whitener", None if whitener is None else whitener.detach())
        self.num_features, self.d = int(Z.shape[0]), int(Z.shape[1])

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        # K_ZX by the kernel's input contraction (differentiable in Z and θ, not X)
        Kzx = cross_matrix(self.kernel, self.Z, X)
        if self.whitener is not None:
            Kzx = torch.linalg.solve_triangular(self.whitener, Kzx, upper=False)
        return Kzx.mT


def constant_diagonal(kernel: Kernel) -> bool:
    """Whether k(x, x) is the same for every x: a :class:`~gpscale.kernels.Stationary`
    kernel, optionally under :class:`~gpscale.kernels.Scale`."""
    while isinstance(kernel, Scale):
        kernel = kernel.base
    return isinstance(kernel, Stationary)


def check_constant_diagonal(kernel: Kernel) -> None:
    """ValueError, naming the way out, unless ``kernel`` has a constant diagonal
    (:func:`constant_diagonal`): Σ k(x, x) of any other kernel would need the rows."""
    if not constant_diagonal(kernel):
        raise ValueError(
            f"sgpr over passes of the rows needs a stationary kernel (Σ k(x, x) = n k(0)); "
            f"{type(kernel).__name__} is not one: use rbf, matern or rq, or give the rows in "
            "memory (sgpr then holds them and sums k(x, x) itself)")


def diagonal_sum(kernel: Kernel, n: int, d: int, like: torch.Tensor) -> torch.Tensor:
    """Σᵢ k(xᵢ, xᵢ) = n k(0, 0) over n rows of d columns, for a kernel with a constant
    diagonal (differentiable in θ; ``like`` gives dtype and device); ValueError for any
    other kernel (:func:`check_constant_diagonal`)."""
    check_constant_diagonal(kernel)
    zero = torch.zeros(1, d, dtype=like.dtype, device=like.device)
    return n * kernel.diag(zero)[0]
