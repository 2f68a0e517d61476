"""``rff``: a finite-feature GP on orthogonal random Fourier features of the kernel's
spectral density (the weight-space model shared with MINIMAX/SCGD and GRIEF), ML-II by
L-BFGS from the streamed statistics ΦᵀΦ, Φᵀy."""

from __future__ import annotations

import torch

from ..features import RandomFourierFeatures
from ..kernels import RBF, Kernel, Matern, Scale
from ..models import FeatureGP
from ..models.feature import PartitionRows
from ..train import FitResult, fit_lbfgs
from ..validation import check_int, check_positive
from .registry import register


def spectral_kind(kernel: Kernel, method: str) -> tuple[str, bool]:
    """('rbf' | 'matern12' | 'matern32' | 'matern52', ard) of a (scaled) RBF/Matérn kernel:
    the kernels whose spectral density the feature methods sample or expand."""
    base = kernel.base if isinstance(kernel, Scale) else kernel
    if isinstance(base, Matern):
        return {0.5: "matern12", 1.5: "matern32", 2.5: "matern52"}[base.nu], bool(base.ard_dims)
    if isinstance(base, RBF):
        return "rbf", bool(base.ard_dims)
    raise ValueError(f"method {method!r} needs an RBF or Matérn kernel ('rbf', 'rbf-ard', "
                     "'matern12-ard', 'matern32-ard', 'matern52-ard')")


@register("rff", "random Fourier features (orthogonal), ML-II by L-BFGS", streams=True)
def fit_rff(X: torch.Tensor | PartitionRows, y: torch.Tensor | None, kernel: Kernel,
            num_features: int = 512, noise: float = 0.1, max_iter: int = 200, seed: int = 0,
            progress: bool = False,
            device: torch.device | str | None = None) -> tuple[FeatureGP, FitResult]:
    """Weight-space GP on ``num_features`` orthogonal random Fourier features of the
    kernel's spectral density, lengthscales, signal variance and noise by L-BFGS. ``X``
    may be :class:`PartitionRows` (y None): every L-BFGS evaluation is then a statistics
    pass and a gradient pass over the partitions, in process or on a dask cluster."""
    kind, ard = spectral_kind(kernel, "rff")
    streamed = isinstance(X, PartitionRows)
    d = X.num_features if streamed else X.shape[1]
    feats = RandomFourierFeatures(d, check_int("num_features", num_features, 2),
                                  kernel=kind, ard=ard, seed=check_int("seed", seed, 0))
    noise = check_positive("noise", noise)
    model = (FeatureGP(feats, rows=X, noise=noise, device=device) if streamed
             else FeatureGP(feats, X, y, noise=noise, device=device))
    return model, fit_lbfgs(model, max_iter=check_int("max_iter", max_iter, 1),
                            progress=progress, method="rff")
