"""``spgp``: Snelson & Ghahramani's (2006) sparse GP with m free pseudo-inputs (FITC),
learned jointly with the hyperparameters and σ² by L-BFGS on the FITC marginal
likelihood.

It is the continuous-inducing competitor of CholQR in Cao et al. (2013), Figs. 4–5.
Rows are held in memory (the O(n m²) likelihood reads every row at each evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..deadline import Deadline
from ..kernels import Kernel
from ..models.fitc import FITC
from ..train import FitResult
from ..train.lbfgs import warn_if_out_of_time
from ..train.spgp import INITS, fit_spgp, snelson_start
from ..validation import as_dtype, check_int, check_optional_int, check_positive
from .cost import DEFAULT_M
from .options import takes_options
from .registry import register


@dataclass
class SPGPOptions:
    """The options of ``method="spgp"`` (:func:`fit_spgp_method` says what each does),
    checked."""

    m: int | None = None
    noise: float = 0.1
    init: str = "random"
    start: str = "snelson"
    max_iter: int = 200
    tol: float | None = 1e-4
    patience: int = 3
    learn_z: bool = True
    seed: int = 0
    progress: bool = False
    device: torch.device | str | None = None
    dtype: torch.dtype | str = torch.float64
    time_limit: float | Deadline | None = None

    def __post_init__(self) -> None:
        if self.start not in ("snelson", "given"):
            raise ValueError(f"start must be 'snelson' or 'given', got {self.start!r}")
        if isinstance(self.init, str) and self.init not in INITS:
            raise ValueError(f"init must be one of {INITS} or an (m, d) tensor of "
                             f"pseudo-inputs, got {self.init!r}")
        self.m = check_optional_int("m", self.m, 1)
        self.noise = check_positive("noise", self.noise)
        self.max_iter = check_int("max_iter", self.max_iter, 1)
        self.patience = check_int("patience", self.patience, 1)
        self.seed = check_int("seed", self.seed, 0)
        self.dtype = as_dtype(self.dtype)
        if self.tol is not None and not self.tol >= 0:
            raise ValueError(f"tol must be a non-negative number or None, got {self.tol!r}")
        Deadline.check(self.time_limit)


@register("spgp", "SPGP / FITC (Snelson & Ghahramani 2006) with m free pseudo-inputs and "
          "the hyperparameters by L-BFGS on the FITC marginal likelihood: vector inputs, "
          "rows in memory; m trades time (∝ n m²) for accuracy")
@takes_options(SPGPOptions)
def fit_spgp_method(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, **options: Any
                    ) -> tuple[FITC, FitResult]:
    """``method="spgp"``: m defaults to min(n / 2, 512) (m = n at Z = X is the exact
    GP); initial pseudo-inputs ``init`` ``"random"`` (m distinct training inputs, SPGP's
    start), ``"kmeans"`` or ``"clump"``.
    ``start``: ``"snelson"`` (SPGP's initial hyperparameters: lengthscales half each
    input's range, signal variance var(y), noise var(y)/4) or ``"given"`` (the kernel's
    and ``noise`` as passed). ``tol``, ``patience``: stop once the NLML moves by less
    than tol nats per point in each of ``patience`` consecutive iterations.
    ``time_limit`` (seconds): the search stops between iterations once it has passed,
    keeping the best parameters so far (and warns)."""
    o = SPGPOptions(**options)
    n = int(X.shape[0])
    m = max(1, min(n // 2, DEFAULT_M)) if o.m is None else o.m
    model, result = fit_spgp(X, y, kernel, m, noise=o.noise, init=o.init, seed=o.seed,
                             max_iter=o.max_iter, learn_z=o.learn_z, dtype=o.dtype,
                             device=o.device, tol=o.tol, patience=o.patience,
                             progress=o.progress,
                             prepare=snelson_start if o.start == "snelson" else None,
                             deadline=Deadline.of(o.time_limit))
    warn_if_out_of_time(result, "spgp's search", "Z and θ are the best found so far")
    return model, result
