"""CholQR (Cao, Brubaker, Fleet & Hertzmann 2013): ``cholqr-vfe`` and ``cholqr-dtc``, a
sparse GP on m training points chosen by swaps jointly with the hyperparameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..models import SparseGP
from ..train import FitResult
from ..train.cholqr import check_options, fit_cholqr
from ..validation import as_dtype, check_optional_int
from .options import takes_options
from .registry import register_method


@dataclass
class CholQROptions:
    """The options of ``cholqr-vfe`` / ``cholqr-dtc`` (the fit functions' docstring and
    :func:`gpscale.train.cholqr.fit_cholqr` say what each does), checked."""

    m: int | None = None
    noise: float = 0.1
    init: str | list[int] | None = None
    seed: int = 0
    max_epochs: int | None = None
    max_time: float | None = None
    z: int = 16
    tol: float = 1e-4
    window: int | None = None
    swaps_per_epoch: int | str | None = None
    prefit: bool = False
    info_pivots: str = "random"
    z_max: int = 128
    aa_step: int | None = None
    progress: bool = False
    device: torch.device | str | None = None
    max_iter: int | None = None
    dtype: torch.dtype | str = torch.float64

    def __post_init__(self) -> None:
        self.dtype = as_dtype(self.dtype)
        self.max_iter = check_optional_int("max_iter", self.max_iter, 1)
        # m against the rows is checked by the fit, which knows them
        check_options(1 if self.m is None else self.m, None, z=self.z, refresh_every=1,
                      max_epochs=self.max_epochs, seed=self.seed, window=self.window,
                      max_time=self.max_time, swaps_per_epoch=self.swaps_per_epoch,
                      prefit=self.prefit, init=self.init, info_pivots=self.info_pivots,
                      z_max=self.z_max, aa_step=self.aa_step)


def _cholqr(objective: str):
    @takes_options(CholQROptions)
    def fit_cholqr_method(X: torch.Tensor, y: torch.Tensor, kernel, **options: Any
                          ) -> tuple[SparseGP, FitResult]:
        o = CholQROptions(**options)
        m = min(X.shape[0], 128) if o.m is None else o.m
        max_epochs = o.max_epochs if o.max_iter is None else o.max_iter  # the CLI's --max-iter
        return fit_cholqr(X, y, kernel, m, objective=objective, noise=o.noise, init=o.init,
                          seed=o.seed, max_epochs=max_epochs, max_time=o.max_time, z=o.z,
                          tol=o.tol, window=o.window, swaps_per_epoch=o.swaps_per_epoch,
                          prefit=o.prefit, info_pivots=o.info_pivots, z_max=o.z_max,
                          aa_step=o.aa_step,
                          progress=o.progress, dtype=o.dtype,
                          device=o.device)

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
                                 "'sweep'; info_pivots: 'random' (the paper's), 'oi' "
                                 "(greedy residual pivots, as CSI) or 'aa' (z random pivots "
                                 "grown by aa_step (default z) per rejected swap up to "
                                 "z_max, ours); "
                                 "max_epochs, max_time: optional caps; max_iter is "
                                 "an alias of max_epochs.")
    return fit_cholqr_method


register_method("cholqr-vfe", _cholqr("vfe"),
                "sparse GP on a training subset, CholQR swaps + L-BFGS on the VFE bound: "
                "rows held in memory, any kernel (molecules, sequences): the inducing "
                "points are training rows")
register_method("cholqr-dtc", _cholqr("dtc"),
                "sparse GP on a training subset, CholQR swaps + L-BFGS on the DTC NLML: "
                "as cholqr-vfe with the DTC likelihood instead of the VFE bound")
