"""Inducing features: φ(x) = Luu⁻¹ k(Z, x) with Luu Luuᵀ = K_ZZ, the m "features" whose
row sums give a sparse GP's statistics.

Titsias's (2009) collapsed bound (eq. 9) reads the rows only through
ΦᵀΦ = Luu⁻¹ K_ZX K_XZ Luu⁻ᵀ, Φᵀy, yᵀy, n and Σᵢ k(xᵢ, xᵢ), with Φ = K_XZ Luu⁻ᵀ (n × m):
the sums the finite-feature statistics pass already forms
(:mod:`gpscale.models.feature_stats`), in process or on dask workers, and whose second
pass gives the gradient in this map's parameters, the kernel's θ and the inducing
inputs Z.

The features are whitened by Luu, as the in-memory SGPR whitens K_ZX before its
products, because ΦᵀΦ is then a sum of Gram matrices, positive semi-definite as
computed. Summing K_ZX K_XZ and whitening the m × m sum afterwards amplifies its
rounding by K_ZZ⁻¹: at 2·10⁵ rows I + Luu⁻¹GLuu⁻ᵀ/σ² already needed jitter of up to
1e-4 × its diagonal, which corrupts the bound, and at 10⁶ rows the fit ended at 1.6x
the in-memory model's test RMSE (benchmarks/results/sgpr-scale/). Whitening costs one
triangular solve per row (m² operations, as the in-memory SGPR spends) and one m × m
Cholesky per chunk.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from ..kernels import Kernel, Scale, Stationary
from ..kernels.base import cross_matrix
from ..linalg import NumericalWarning, robust_cholesky
from .base import FeatureMap

__all__ = ["InducingFeatures", "constant_diagonal", "check_constant_diagonal",
           "diagonal_sum"]


class InducingFeatures(FeatureMap):
    """Φ = K(X, Z) Luu⁻ᵀ (n × m; module doc): ``kernel`` and inducing inputs ``Z`` (m, d),
    both shared with the model that made the map (the same parameter objects), so
    gradients of the statistics land on the model's parameters."""

    def __init__(self, kernel: Kernel, Z: nn.Parameter) -> None:
        super().__init__()
        self.kernel = kernel
        self.Z = Z
        self.num_features, self.d = int(Z.shape[0]), int(Z.shape[1])

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        # K_ZX by the kernel's input contraction (differentiable in Z and θ, not X)
        Kzx = cross_matrix(self.kernel, self.Z, X)
        return torch.linalg.solve_triangular(self.whitener(), Kzx, upper=False).mT

    def whitener(self) -> torch.Tensor:
        """Luu, the Cholesky factor of K_ZZ (jittered where needed, without a warning: the
        model's posterior factors warn once for the same matrix)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericalWarning)
            return robust_cholesky(self.kernel(self.Z))


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
