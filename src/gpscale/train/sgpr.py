"""Fitting an :class:`~gpscale.models.sgpr.SGPR`: inducing inputs initialised at random
training inputs or k-means centres, then Z and the hyperparameters jointly by L-BFGS
(after a warm start on a sample of rows, :func:`gpscale.train.starts.warm_start_sgpr`,
when asked for)."""

from __future__ import annotations

import torch

from ..deadline import Deadline
from ..kernels import Kernel
from ..models.sgpr import SGPR
from ..validation import as_matrix, check_xy
from .lbfgs import fit_lbfgs
from .result import FitResult
from .starts import warm_start_sgpr


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
             device: torch.device | str | None = None, *, tol: float | None = None,
             warm_rows: int | None = None, warm_iter: int = 200,
             kmeans_rows: int | None = None, progress: bool = False,
             prepare=None, patience: int = 3, deadline: Deadline | None = None
             ) -> tuple[SGPR, FitResult]:
    """Fit an :class:`SGPR` with Z and the hyperparameters optimised jointly by L-BFGS.

    ``init``: ``"random"`` (m distinct training inputs), ``"kmeans"`` (Lloyd centres,
    on a seeded sample of ``kmeans_rows`` rows when given) or an (m, d) tensor of
    initial inducing inputs. ``tol``: the per-point stopping rule of
    :func:`~gpscale.train.fit_lbfgs` over ``patience`` iterations (None: torch's
    absolute tests only).

    ``warm_rows``: when given and below n, a first search (at most ``warm_iter``
    iterations) runs on that many random rows, each of its evaluations costing
    ``warm_rows / n`` of a full one; the full-data search (``max_iter``) continues from
    its Z and hyperparameters. ``prepare(model)``, when given, may set initial values
    before any search (e.g. lengthscales from the data's dimension). ``deadline``: both
    searches stop there (:func:`~gpscale.train.fit_lbfgs`).
    """
    X, y = check_xy(X, y, dtype, device)
    n = X.shape[0]
    gen = torch.Generator().manual_seed(int(seed))
    if isinstance(init, str):
        if not isinstance(m, int) or m < 1 or m > n:
            raise ValueError(f"m must be between 1 and n={n}, got {m}")
        if init == "random":
            Z = X[torch.randperm(n, generator=gen)[:m].to(X.device)]
        elif init == "kmeans":
            rows = X
            if kmeans_rows is not None and m <= kmeans_rows < n:
                rows = X[torch.randperm(n, generator=gen)[:kmeans_rows].to(X.device)]
            Z = kmeans(rows, m, seed)
        else:
            raise ValueError(f"init must be 'random', 'kmeans' or a tensor, got {init!r}")
    else:
        Z = as_matrix(init, "init", dtype, X.device)
    options = dict(seed=seed, method="sgpr", tol=tol, patience=patience, progress=progress,
                   deadline=deadline)
    model = SGPR(kernel, X, y, Z, noise=noise, learn_z=learn_z, dtype=dtype, device=X.device)
    if prepare is not None:
        prepare(model)
    warm = None
    if warm_rows is not None and max(m, 1) < warm_rows < n:
        warm = warm_start_sgpr(model, X, y, warm_rows, gen, warm_iter, **options)
    result = fit_lbfgs(model, model.objective, max_iter=max_iter, **options)
    if warm is not None:
        result.n_evals += warm.n_evals
        result.wall_s += warm.wall_s
    return model, result
