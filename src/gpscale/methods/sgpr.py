"""``sgpr``: Titsias's (2009) collapsed variational sparse GP with m free, continuous
inducing inputs, learned jointly with the hyperparameters by L-BFGS on the VFE bound.

It is the continuous-inducing rival of CholQR in Cao et al. (2013) and what GPyTorch's
SGPR fits; here it is also the large-n default for vector inputs (see ``method="auto"``).
The gradient's linear algebra is written out (:mod:`gpscale.models.vfe_bound`); on large
n a first search on a random sample of rows brings Z and θ near the optimum for a
fraction of the cost, and the full-data search finishes from there.
"""

from __future__ import annotations

import torch

from ..kernels import Kernel
from ..models import SGPR
from ..train import FitResult
from ..train.sgpr import fit_sgpr
from ..validation import as_dtype, check_int
from .exact import _unit_to_sqrt_d
from .registry import register

#: inducing inputs unless m= is given (capped at n)
DEFAULT_M = 512
#: above this many rows the search starts on a sample of WARM_ROWS rows
WARM_ABOVE, WARM_ROWS = 16_000, 8_000
#: rows k-means sees when it places the initial inducing inputs
KMEANS_ROWS = 20_000


@register("sgpr", "sparse variational GP (Titsias 2009) with m free inducing inputs and "
          "the hyperparameters by L-BFGS on the VFE bound: vector inputs, rows in memory; "
          "m trades time (∝ n m²) for accuracy")
def fit_sgpr_method(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, m: int | None = None,
                    noise: float = 0.1, init: str = "kmeans", max_iter: int = 200,
                    tol: float | None = 1e-4, warm_rows: int | None = None,
                    learn_z: bool = True, seed: int = 0, progress: bool = False,
                    device: torch.device | str | None = None,
                    dtype: torch.dtype | str = torch.float64) -> tuple[SGPR, FitResult]:
    """``method="sgpr"``: m defaults to min(n, 512), initial Z at k-means centres;
    ``warm_rows`` (default 8000 when n > 16 000, else none) is the size of the sample the
    search starts on; ``tol``: stop once the bound moves by less than tol nats per point
    over 3 iterations. Lengthscales at their default start at √d (as for ``exact``)."""
    n = int(X.shape[0])
    m = min(n, DEFAULT_M) if m is None else check_int("m", m, 1)
    if warm_rows is None and n > WARM_ABOVE:
        warm_rows = WARM_ROWS
    return fit_sgpr(X, y, kernel, m, noise=noise, init=init, seed=seed,
                    max_iter=check_int("max_iter", max_iter, 1), learn_z=learn_z,
                    dtype=as_dtype(dtype), device=device, tol=tol,
                    warm_rows=None if warm_rows is None else check_int("warm_rows", warm_rows, 1),
                    kmeans_rows=KMEANS_ROWS, progress=progress, prepare=_unit_to_sqrt_d)
