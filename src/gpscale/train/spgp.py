"""Fitting a :class:`~gpscale.models.fitc.FITC` (SPGP, Snelson & Ghahramani 2006):
pseudo-inputs initialised at training inputs, then Z, the hyperparameters and σ² jointly
by L-BFGS on the FITC negative log marginal likelihood (eq. 8)."""

from __future__ import annotations

import torch

from ..deadline import Deadline
from ..kernels import Kernel, Scale, Stationary
from ..models.fitc import FITC
from ..validation import as_matrix, check_xy
from .lbfgs import fit_lbfgs
from .result import FitResult
from .sgpr import kmeans

__all__ = ["fit_spgp", "initial_pseudo_inputs", "snelson_start"]

#: the ways the initial pseudo-inputs may be named
INITS = ("random", "kmeans", "clump")


def initial_pseudo_inputs(X: torch.Tensor, m: int, init: str | torch.Tensor,
                          gen: torch.Generator, seed: int = 0) -> torch.Tensor:
    """Z₀ (m, d): ``"random"`` m distinct training inputs (SPGP's own start),
    ``"kmeans"`` Lloyd centres, ``"clump"`` the m nearest neighbours of one random
    training input (the poor start of SPGP's Fig. 1c and Cao et al. Fig. 4(c)), or the
    given (m, d) tensor."""
    n = X.shape[0]
    if not isinstance(init, str):
        Z = as_matrix(init, "init", X.dtype, X.device)
        if Z.shape[0] != m:
            raise ValueError(f"init holds {Z.shape[0]} pseudo-inputs but m = {m}")
        return Z
    if isinstance(m, bool) or not isinstance(m, int) or m < 1 or m > n:
        raise ValueError(f"m must be an int between 1 and n={n}, got {m!r}")
    if init == "random":
        return X[torch.randperm(n, generator=gen)[:m].to(X.device)].clone()
    if init == "kmeans":
        return kmeans(X, m, seed)
    if init == "clump":
        c = int(torch.randint(n, (1,), generator=gen))
        d2 = ((X - X[c]) ** 2).sum(1)
        return X[torch.argsort(d2, stable=True)[:m]].clone()
    raise ValueError(f"init must be one of {INITS} or an (m, d) tensor, got {init!r}")


def snelson_start(model: FITC) -> None:
    """SPGP's initial hyperparameters (Snelson's ``spgp_demo``): every lengthscale half
    the range of its input, signal variance var(y), noise variance var(y)/4. Applies to
    a Scale(Stationary) kernel; other kernels keep their values."""
    k = model.kernel
    if not (isinstance(k, Scale) and isinstance(k.base, Stationary)):
        return
    X, y = model.X, model.y
    cols = X if k.base.active_dims is None else X[:, list(k.base.active_dims)]
    half_range = ((cols.max(0).values - cols.min(0).values) / 2).clamp_min(1e-3)
    if k.base.lengthscale.numel() == 1:
        half_range = half_range.mean()
    var_y = float(y.var(correction=0).clamp_min(1e-6))
    k.base.lengthscale = half_range.reshape(k.base.lengthscale.shape)
    k.outputscale = var_y
    model.noise = var_y / 4


def fit_spgp(X, y, kernel: Kernel, m: int, noise: float = 0.1,
             init: str | torch.Tensor = "random", seed: int = 0, max_iter: int = 200,
             learn_z: bool = True, dtype: torch.dtype = torch.float64,
             device: torch.device | str | None = None, *, tol: float | None = None,
             patience: int = 3, progress: bool = False, prepare=None,
             deadline: Deadline | None = None) -> tuple[FITC, FitResult]:
    """Fit a :class:`FITC` with Z, the hyperparameters and σ² optimised jointly by
    L-BFGS on the FITC NLML.

    ``init``: see :func:`initial_pseudo_inputs` (default ``"random"``, SPGP's).
    ``prepare(model)``, when given, sets initial values before the search
    (:func:`snelson_start` is SPGP's). ``tol``, ``patience``: the per-point stopping
    rule of :func:`~gpscale.train.fit_lbfgs` (None: torch's absolute tests only).
    ``deadline``: the search stops there."""
    X, y = check_xy(X, y, dtype, device)
    n = X.shape[0]
    if isinstance(m, bool) or not isinstance(m, int) or m < 1 or m > n:
        raise ValueError(f"m must be an int between 1 and n={n} (the training rows), "
                         f"got {m!r}")
    gen = torch.Generator().manual_seed(int(seed))
    Z = initial_pseudo_inputs(X, m, init, gen, seed)
    model = FITC(kernel, X, y, Z, noise=noise, learn_z=learn_z, dtype=dtype, device=X.device)
    if prepare is not None:
        prepare(model)
    result = fit_lbfgs(model, model.objective, max_iter=max_iter, seed=seed, method="spgp",
                       tol=tol, patience=patience, progress=progress, deadline=deadline)
    return model, result
