"""``exact``: the exact GP, ML-II (marginal likelihood) by L-BFGS — the baseline every
paper measures against."""

from __future__ import annotations

import torch

from ..kernels import Kernel
from ..models import ExactGP
from ..train import FitResult, fit_lbfgs
from ..validation import as_dtype, check_int, check_positive
from .registry import register


@register("exact", "exact GP, ML-II (marginal likelihood) by L-BFGS")
def fit_exact(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, noise: float = 0.1,
              mean: str = "zero", max_iter: int = 200, restarts: int = 0,
              seed: int | None = None, progress: bool = False,
              device: torch.device | str | None = None,
              dtype: torch.dtype | str = torch.float64) -> tuple[ExactGP, FitResult]:
    """Exact GP, ML-II by L-BFGS (:func:`gpscale.train.fit_lbfgs`); ``noise`` is the
    initial noise variance in the units of y given (standardised ones by default)."""
    seed = None if seed is None else check_int("seed", seed, 0)
    model = ExactGP(kernel, X, y, noise=check_positive("noise", noise), mean=mean,
                    dtype=as_dtype(dtype), device=device)
    return model, fit_lbfgs(model, max_iter=check_int("max_iter", max_iter, 1),
                            restarts=check_int("restarts", restarts, 0), seed=seed,
                            progress=progress, method="exact")
