"""Fitting an :class:`~gpscale.models.sgpr.SGPR`: inducing inputs initialised at random
training inputs or k-means centres, then Z and the hyperparameters jointly by L-BFGS."""

from __future__ import annotations

import torch

from ..kernels import Kernel
from ..models.sgpr import SGPR
from ..validation import as_matrix, check_xy
from .lbfgs import fit_lbfgs
from .result import FitResult


def kmeans(X: torch.Tensor, m: int, seed: int = 0, iters: int = 25) -> torch.Tensor:
    """m centres by Lloyd's algorithm from m distinct random rows (seeded); empty
    clusters keep their previous centre."""
    gen = torch.Generator().manual_seed(int(seed))
    C = X[torch.randperm(X.shape[0], generator=gen)[:m].to(X.device)].clone()
    for _ in range(iters):
        lab = torch.cdist(X, C).argmin(1)
        counts = torch.bincount(lab, minlength=m).to(X.dtype)
        sums = torch.zeros_like(C).index_add_(0, lab, X)
        new = torch.where(counts[:, None] > 0, sums / counts.clamp_min(1)[:, None], C)
        if torch.equal(new, C):
            break
        C = new
    return C


def fit_sgpr(X, y, kernel: Kernel, m: int, noise: float = 0.1,
             init: str | torch.Tensor = "kmeans", seed: int = 0, max_iter: int = 200,
             learn_z: bool = True, dtype: torch.dtype = torch.float64,
             device: torch.device | str | None = None) -> tuple[SGPR, FitResult]:
    """Fit an :class:`SGPR` with Z and the hyperparameters optimised jointly by L-BFGS.

    ``init``: ``"random"`` (m distinct training inputs), ``"kmeans"`` (Lloyd centres)
    or an (m, d) tensor of initial inducing inputs.
    """
    X, y = check_xy(X, y, dtype, device)
    n = X.shape[0]
    if isinstance(init, str):
        if not isinstance(m, int) or m < 1 or m > n:
            raise ValueError(f"m must be between 1 and n={n}, got {m}")
        if init == "random":
            gen = torch.Generator().manual_seed(int(seed))
            Z = X[torch.randperm(n, generator=gen)[:m].to(X.device)]
        elif init == "kmeans":
            Z = kmeans(X, m, seed)
        else:
            raise ValueError(f"init must be 'random', 'kmeans' or a tensor, got {init!r}")
    else:
        Z = as_matrix(init, "init", dtype, X.device)
    model = SGPR(kernel, X, y, Z, noise=noise, learn_z=learn_z, dtype=dtype, device=X.device)
    result = fit_lbfgs(model, model.objective, max_iter=max_iter, seed=seed, method="sgpr")
    return model, result
