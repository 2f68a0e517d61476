"""``spgp``: Snelson & Ghahramani's (2006) sparse GP with m free pseudo-inputs (FITC),
learned jointly with the hyperparameters and σ² by L-BFGS on the FITC marginal
likelihood.

It is the continuous-inducing competitor of CholQR in Cao et al. (2013), Figs. 4–5.
Rows are held in memory (the O(n m²) likelihood reads every row at each evaluation).
"""

from __future__ import annotations

import torch

from ..deadline import Deadline
from ..kernels import Kernel
from ..models.fitc import FITC
from ..train import FitResult
from ..train.lbfgs import warn_if_out_of_time
from ..train.spgp import fit_spgp, snelson_start
from ..validation import as_dtype, check_int
from .cost import DEFAULT_M
from .registry import register


@register("spgp", "SPGP / FITC (Snelson & Ghahramani 2006) with m free pseudo-inputs and "
          "the hyperparameters by L-BFGS on the FITC marginal likelihood: vector inputs, "
          "rows in memory; m trades time (∝ n m²) for accuracy")
def fit_spgp_method(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, m: int | None = None,
                    noise: float = 0.1, init: str = "random", start: str = "snelson",
                    max_iter: int = 200, tol: float | None = 1e-4, patience: int = 3,
                    learn_z: bool = True, seed: int = 0, progress: bool = False,
                    device: torch.device | str | None = None,
                    dtype: torch.dtype | str = torch.float64,
                    time_limit: float | None = None) -> tuple[FITC, FitResult]:
    """``method="spgp"``: m defaults to min(n / 2, 512) (m = n at Z = X is the exact
    GP); initial pseudo-inputs ``init`` ``"random"`` (m distinct training inputs, SPGP's
    start), ``"kmeans"`` or ``"clump"``.
    ``start``: ``"snelson"`` (SPGP's initial hyperparameters: lengthscales half each
    input's range, signal variance var(y), noise var(y)/4) or ``"given"`` (the kernel's
    and ``noise`` as passed). ``tol``, ``patience``: stop once the NLML moves by less
    than tol nats per point in each of ``patience`` consecutive iterations.
    ``time_limit`` (seconds): the search stops between iterations once it has passed,
    keeping the best parameters so far (and warns)."""
    if start not in ("snelson", "given"):
        raise ValueError(f"start must be 'snelson' or 'given', got {start!r}")
    n = int(X.shape[0])
    m = max(1, min(n // 2, DEFAULT_M)) if m is None else check_int("m", m, 1)
    model, result = fit_spgp(X, y, kernel, m, noise=noise, init=init, seed=seed,
                             max_iter=check_int("max_iter", max_iter, 1), learn_z=learn_z,
                             dtype=as_dtype(dtype), device=device, tol=tol,
                             patience=check_int("patience", patience, 1), progress=progress,
                             prepare=snelson_start if start == "snelson" else None,
                             deadline=Deadline.of(time_limit))
    warn_if_out_of_time(result, "spgp's search", "Z and θ are the best found so far")
    return model, result
