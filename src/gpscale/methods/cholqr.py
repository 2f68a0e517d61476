"""CholQR (Cao, Brubaker, Fleet & Hertzmann 2013): ``cholqr-vfe`` and ``cholqr-dtc``, a
sparse GP on m training points chosen by swaps jointly with the hyperparameters."""

from __future__ import annotations

import torch

from ..models import SparseGP
from ..train import FitResult
from ..train.cholqr import fit_cholqr
from ..validation import as_dtype
from .registry import register_method


def _cholqr(objective: str):
    def fit_cholqr_method(X: torch.Tensor, y: torch.Tensor, kernel, m: int | None = None,
                          noise: float = 0.1, init=None, seed: int = 0,
                          max_epochs: int | None = None,
                          max_time: float | None = None, z: int = 16, tol: float = 1e-4,
                          window: int | None = None,
                          swaps_per_epoch: int | str | None = None, prefit: bool = False,
                          progress: bool = False, device: torch.device | str | None = None,
                          max_iter: int | None = None,
                          dtype: torch.dtype | str = torch.float64
                          ) -> tuple[SparseGP, FitResult]:
        m = min(X.shape[0], 128) if m is None else m
        max_epochs = max_epochs if max_iter is None else max_iter  # the CLI's --max-iter
        return fit_cholqr(X, y, kernel, m, objective=objective, noise=noise, init=init,
                          seed=seed, max_epochs=max_epochs, max_time=max_time, z=z, tol=tol,
                          window=window, swaps_per_epoch=swaps_per_epoch, prefit=prefit,
                          progress=progress, dtype=as_dtype(dtype), device=device)

    fit_cholqr_method.__name__ = f"fit_cholqr_{objective}"
    fit_cholqr_method.__doc__ = (f"CholQR-{objective.upper()}: sparse GP on m (default "
                                 "min(n, 128)) training points chosen by swaps, jointly with "
                                 "the hyperparameters (see gpscale.train.cholqr.fit_cholqr), "
                                 "until a whole sweep of the inducing set is rejected with "
                                 "the hyperparameters settled, or the last sweep lowers the "
                                 "objective by less than tol (relative; window epochs "
                                 "instead when given); init: 'random' (the paper's), "
                                 "'clump', 'variance', 'greedy' or indices, prefit: fit the "
                                 "hyperparameters on a random set before a greedy init; "
                                 "swaps_per_epoch: min(60, m) (the paper's), an integer or "
                                 "'sweep'; max_epochs, max_time: optional caps; max_iter is "
                                 "an alias of max_epochs.")
    return fit_cholqr_method


register_method("cholqr-vfe", _cholqr("vfe"),
                "sparse GP on a training subset, CholQR swaps + L-BFGS on the VFE bound: "
                "rows held in memory, any kernel (molecules, sequences): the inducing "
                "points are training rows")
register_method("cholqr-dtc", _cholqr("dtc"),
                "sparse GP on a training subset, CholQR swaps + L-BFGS on the DTC NLML: "
                "as cholqr-vfe with the DTC likelihood instead of the VFE bound")
