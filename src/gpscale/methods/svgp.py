"""``svgp``: the stochastic variational GP (Hensman et al. 2013, 2015), minibatch ELBO —
the inducing-point baseline of the unbiased-stochastic paper. Registered with
``reads="minibatches"``: from a source it reads shuffled minibatches without loading the rows
(``buffer_rows``: the shuffle buffer; see :mod:`gpscale.train.batches`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..io.rows import Rows, as_rows
from ..kernels import Kernel
from ..models import SVGP
from ..train import FitResult
from ..train.minibatch import DEFAULT_LR, check_batch_size, check_lr_schedule
from ..train.svgp import fit_svgp
from ..validation import as_dtype, check_int, check_optional_int, check_positive
from .options import takes_options
from .registry import register


@dataclass
class SVGPOptions:
    """The options of ``method="svgp"`` (:func:`fit_svgp_method` and
    :func:`gpscale.train.svgp.fit_svgp` say what each does), checked; the sizes that
    default from n (num_inducing, batch_size, epochs) are set by the fit."""

    num_inducing: int | None = None
    batch_size: int | None = None
    epochs: float | None = None
    lr: float | None = None
    lr_schedule: str = "constant"
    optimizer: str = "adam"
    seed: int = 0
    noise: float = 0.1
    progress: bool = False
    device: torch.device | str | None = None
    buffer_rows: int | None = None
    dtype: torch.dtype | str = torch.float64

    def __post_init__(self) -> None:
        # batch_size is checked against n by the fit (check_batch_size)
        self.num_inducing = check_optional_int("num_inducing", self.num_inducing, 1)
        self.buffer_rows = check_optional_int("buffer_rows", self.buffer_rows, 1)
        if self.epochs is not None:
            check_positive("epochs", self.epochs)
        if self.lr is not None:
            check_positive("lr", self.lr)
        check_lr_schedule(self.lr_schedule)
        if str(self.optimizer).lower() not in DEFAULT_LR:
            raise ValueError(f"optimizer={self.optimizer!r} is not one of {sorted(DEFAULT_LR)}")
        self.seed = check_int("seed", self.seed, 0)
        check_positive("noise", self.noise)
        self.dtype = as_dtype(self.dtype)


@register("svgp", "stochastic variational GP (Hensman et al. 2015), minibatch ELBO: the "
          "usual large-n baseline; minibatches streamed from files",
          reads="minibatches")
@takes_options(SVGPOptions)
def fit_svgp_method(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
                    **options: Any) -> tuple[SVGP, FitResult]:
    """``method="svgp"``: batch_size defaults to min(256, n), num_inducing to the batch
    size (as in the paper), epochs to max(20, enough for 1000 steps)."""
    o = SVGPOptions(**options)
    rows = as_rows(X, y)
    n = rows.n
    batch_size = min(256, n) if o.batch_size is None else o.batch_size
    batch_size = check_batch_size(batch_size, n)
    num_inducing = batch_size if o.num_inducing is None else o.num_inducing
    epochs = o.epochs
    if epochs is None:
        epochs = max(20, math.ceil(1000 / math.ceil(n / batch_size)))
    return fit_svgp(rows, None, kernel, num_inducing, batch_size, epochs,
                    optimizer=o.optimizer, lr=o.lr, lr_schedule=o.lr_schedule, noise=o.noise,
                    seed=o.seed, progress=o.progress, dtype=o.dtype, device=o.device,
                    buffer_rows=o.buffer_rows)
