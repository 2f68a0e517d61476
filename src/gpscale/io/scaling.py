"""The scaler of the training rows, and the rows it scales: rows held in memory are
checked and standardised here (:func:`scaled_in_memory`); rows left in their
partitions get the scaler of one moments pass (:func:`rows_scaler`), on the cluster's
workers when there is one. Columns a kernel reads as given (``Kernel.raw_columns``) and
a table's 0/1 columns (one-hot levels, missing-value indicators:
:meth:`gpscale.io.encoding.TableEncoding.raw_columns`) keep their values; without
standardisation the data's own units are checked to fit float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..parallel.cluster import map_partitions
from ..parallel.reduce import check_partitions
from ..preprocessing import Moments, Standardizer, chunk_moments
from ..validation import check_xy, mark_checked

if TYPE_CHECKING:
    from .batch import Partition
    from .given import TrainingData

#: rows per chunk of the standardisation pass (it holds one (rows, d) block at a time)
MOMENT_ROWS = 65_536
#: with standardize=False, |values| above this are refused: squared distances and yᵀy of
#: such values overflow float64 (its largest finite square root is about 1.3e154)
OWN_UNITS_MAX = 1e150
#: what to do when the data's own units fail a fit
OWN_UNITS_ADVICE = ("let gpscale standardise the data (drop standardize=False, or "
                    "--no-standardize on the command line) or rescale the columns yourself")


def scaled_in_memory(data: TrainingData, standardize: bool,
                     raw_columns: Callable[[int], Sequence[int]]
                     ) -> tuple[Standardizer, torch.Tensor, torch.Tensor]:
    """Every row of ``data`` in memory, checked: (the scaler, X and y standardised as
    float64 tensors). ``raw_columns(d)``: the columns that keep their values."""
    pair = data.pair if data.pair is not None else data.source.to_arrays()
    raw_columns = with_codes(raw_columns, None if data.pair is not None else data.source)
    Xt, yt = check_xy(*pair)
    if Xt.shape[0] < 2:
        raise ValueError(f"got 1 sample (X has shape {tuple(Xt.shape)}); a GP needs at "
                         "least 2 samples to learn hyperparameters")
    Xn, yn = Xt.cpu().numpy(), yt.cpu().numpy()
    if not standardize:
        check_own_units(Xn, yn)
    scaler = (Standardizer.fit(Xn, yn).keep_columns(raw_columns(Xn.shape[1]))
              if standardize else Standardizer.identity(Xn.shape[1]))
    # finite as the checked rows are (Standardizer scales by powers of two, never overflows)
    Xs = mark_checked(torch.as_tensor(scaler.transform_x(Xn), dtype=torch.float64))
    ys = mark_checked(torch.as_tensor(scaler.transform_y(yn), dtype=torch.float64))
    return scaler, Xs, ys


def rows_scaler(partitions: Sequence[Partition], d: int, standardize: bool,
                raw_columns: Callable[[int], Sequence[int]], client: Any = None
                ) -> Standardizer:
    """The scaler of the rows in ``partitions`` (d columns): :func:`source_scaler`'s
    with the ``raw_columns(d)`` kept, or the identity without ``standardize``."""
    return (source_scaler(partitions, client).keep_columns(raw_columns(d))
            if standardize else Standardizer.identity(d))


def with_codes(raw_columns: Callable[[int], Sequence[int]], source: Any
               ) -> Callable[[int], Sequence[int]]:
    """``raw_columns`` and the 0/1 columns of ``source``'s table encoding, if it has one."""
    encoding = getattr(source, "encoding", None)
    if encoding is None:
        return raw_columns
    codes = encoding.raw_columns()
    return lambda d: sorted({*raw_columns(d), *codes})


def partition_moments(partition: Partition, rows: int = MOMENT_ROWS) -> tuple[Any, Any]:
    """:class:`~gpscale.preprocessing.Moments` of X's columns and of y over one partition."""
    return chunk_moments(partition.chunks(rows))


def source_scaler(partitions: Sequence[Partition], client: Any = None,
                  rows: int = MOMENT_ROWS) -> Standardizer:
    """The :class:`~gpscale.preprocessing.Standardizer` of all the partitions' rows from
    one pass: per-partition moments (on the workers when ``client`` is given), merged
    here in partition order."""
    partitions = check_partitions(partitions)
    parts = map_partitions(client, partition_moments, partitions, rows)
    mx = Moments.combine(p[0] for p in parts)
    my = None if parts[0][1] is None else Moments.combine(p[1] for p in parts)
    return Standardizer.from_moments(mx, my)


def check_own_units(X: np.ndarray, y: np.ndarray) -> None:
    """ValueError when data to be used in its own units is too large for float64 GPs."""
    for name, a in (("X", X), ("y", y)):
        top = float(np.max(np.abs(a))) if a.size else 0.0
        if top > OWN_UNITS_MAX:
            raise ValueError(f"with standardize=False the GP works in the data's own units, "
                             f"and {name} reaches |value| = {top:.3g} (> {OWN_UNITS_MAX:g}), "
                             f"where its squares overflow: {OWN_UNITS_ADVICE}")
