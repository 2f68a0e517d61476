"""``svgp``: the stochastic variational GP (Hensman et al. 2013, 2015), minibatch ELBO —
the inducing-point baseline of the unbiased-stochastic paper. Registered with
``reads="minibatches"``: from a source it reads shuffled minibatches without loading the rows
(``buffer_rows``: the shuffle buffer; see :mod:`gpscale.train.batches`)."""

from __future__ import annotations

import math

import torch

from ..io.rows import Rows, as_rows
from ..kernels import Kernel
from ..models import SVGP
from ..train import FitResult
from ..train.minibatch import check_batch_size
from ..train.svgp import fit_svgp
from ..validation import as_dtype
from .registry import register


@register("svgp", "stochastic variational GP (Hensman et al. 2015), minibatch ELBO: the "
          "usual large-n baseline; minibatches streamed from files",
          reads="minibatches")
def fit_svgp_method(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
                    num_inducing: int | None = None, batch_size: int | None = None,
                    epochs: float | None = None, lr: float | None = None,
                    lr_schedule: str = "constant", optimizer: str = "adam", seed: int = 0,
                    noise: float = 0.1, progress: bool = False,
                    device: torch.device | str | None = None,
                    buffer_rows: int | None = None,
                    dtype: torch.dtype | str = torch.float64) -> tuple[SVGP, FitResult]:
    """``method="svgp"``: batch_size defaults to min(256, n), num_inducing to the batch
    size (as in the paper), epochs to max(20, enough for 1000 steps)."""
    rows = as_rows(X, y)
    n = rows.n
    batch_size = min(256, n) if batch_size is None else batch_size
    batch_size = check_batch_size(batch_size, n)
    num_inducing = batch_size if num_inducing is None else num_inducing
    if epochs is None:
        epochs = max(20, math.ceil(1000 / math.ceil(n / batch_size)))
    return fit_svgp(rows, None, kernel, num_inducing, batch_size, epochs, optimizer=optimizer,
                    lr=lr, lr_schedule=lr_schedule, noise=noise, seed=seed, progress=progress,
                    dtype=as_dtype(dtype), device=device, buffer_rows=buffer_rows)
