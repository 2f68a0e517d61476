"""GPCV-ADMM (cross-validation training of an exact GP in O(n²) per iteration):
``admm-hocv`` (hold-out), ``admm-kfold`` (per-fold ADMM, averaged θ) and
``admm-consensus`` (K-fold by consensus ADMM)."""

from __future__ import annotations

from typing import Any

import torch

from ..kernels import Kernel
from ..models import ExactGP
from ..train import FitResult
from ..train.admm import fit_admm_consensus, fit_admm_hocv, fit_admm_kfold
from ..validation import check_int, check_positive
from .registry import register_method


def _admm(fit_fn, name: str):
    def fit_admm_method(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, noise: float = 0.1,
                        seed: int = 0, max_iter: int = 100, progress: bool = False,
                        device: torch.device | str | None = None,
                        **admm_options: Any) -> tuple[ExactGP, FitResult]:
        model = ExactGP(kernel, X, y, noise=check_positive("noise", noise), device=device)
        kw = {"progress": progress} if name == "admm-hocv" else {}
        result = fit_fn(model, seed=check_int("seed", seed, 0),
                        max_iter=check_int("max_iter", max_iter, 1), **kw, **admm_options)
        return model, result

    fit_admm_method.__name__ = f"fit_{name.replace('-', '_')}"
    fit_admm_method.__doc__ = (f"Exact GP trained by {name} (see gpscale.train.admm); extra "
                               "keyword options go to the trainer (e.g. rho, k, "
                               "val_fraction).")
    return fit_admm_method


register_method("admm-hocv", _admm(fit_admm_hocv, "admm-hocv"),
                "exact GP, hold-out cross-validation by GPCV-ADMM: predictive accuracy "
                "rather than likelihood, O(n²) per iteration; kernel products recomputed "
                "by row blocks (beyond memory) on the cluster's workers", cluster=True)
register_method("admm-kfold", _admm(fit_admm_kfold, "admm-kfold"),
                "exact GP, K-fold cross-validation by per-fold GPCV-ADMM (averaged θ): as "
                "admm-hocv with every row validated once; folds in parallel",
                cluster=True)
register_method("admm-consensus", _admm(fit_admm_consensus, "admm-consensus"),
                "exact GP, K-fold cross-validation by consensus ADMM: as admm-kfold, the "
                "folds agreeing on one θ", cluster=True)
