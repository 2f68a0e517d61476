""":class:`Rows`: training rows as every method receives them, wherever they are.

One type for all data: rows already in memory (standardised tensors, on any device) are
one :class:`TensorPartition`; rows in files or dask collections are that source's
partitions, read chunk by chunk with the scaler applied, in this process or as tasks on
a dask ``client``'s workers (:mod:`gpscale.parallel.cluster`). A method asks for the view it
needs — the rows held in memory (:attr:`Rows.held`), a uniform sample
(:meth:`Rows.sample`), or passes over the partitions (``partitions``, ``scaler``,
``client``) — and never looks at what the data were given as.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..validation import check_xy
from .sample import sample_rows

__all__ = ["Rows", "TensorPartition", "as_rows"]


@dataclass(frozen=True, eq=False)
class TensorPartition:
    """Rows held in memory as tensors (X (n, d), y (n,)), already checked and scaled:
    chunks are views, on the tensors' device and in their dtype."""

    X: torch.Tensor
    y: torch.Tensor

    @property
    def num_rows(self) -> int:
        return int(self.X.shape[0])

    def known_rows(self) -> int:
        return self.num_rows

    def chunks(self, rows: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for s in range(0, self.num_rows, rows):
            yield self.X[s : s + rows], self.y[s : s + rows]


@dataclass(frozen=True, eq=False)
class Rows:
    """Training rows: ``partitions`` (each with ``chunks(rows)`` and ``num_rows``) of
    ``num_features`` input columns, ``scaler`` applied to each raw chunk (None: the
    chunks are used as they are), passes run on ``client``'s workers when given, ``rows``
    rows per chunk (None: from a byte budget)."""

    partitions: tuple[Any, ...]
    num_features: int  #: d, the number of input columns
    scaler: Any = None
    client: Any = None
    rows: int | None = None

    @classmethod
    def in_memory(cls, X: Any, y: Any) -> Rows:
        """Rows of X (n, d) and y (n,) held in memory, used as given (checked: finite,
        matching lengths; tensors keep their device and dtype)."""
        if isinstance(X, torch.Tensor) and isinstance(y, torch.Tensor) \
                and X.dtype == y.dtype and X.dtype.is_floating_point:
            Xt, yt = check_xy(X, y, X.dtype, X.device)
        else:
            Xt, yt = check_xy(X, y)
        return cls((TensorPartition(Xt, yt),), int(Xt.shape[1]))

    @property
    def held(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(X, y) when every row is one tensor pair in this process, else None."""
        part = self.partitions[0] if len(self.partitions) == 1 else None
        if isinstance(part, TensorPartition) and self.scaler is None:
            return part.X, part.y
        return None

    @property
    def n(self) -> int:
        """Number of rows (a pass over CSV partitions the first time it is asked)."""
        return sum(int(p.num_rows) for p in self.partitions)

    def sample(self, m: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """About ``m`` rows drawn uniformly (all of them when there are at most m), scaled
        like the rows they come from: a random permutation's first m of rows held in
        memory, per-partition draws (on the cluster when there is one) otherwise."""
        held = self.held
        if held is not None:
            X, y = held
            gen = torch.Generator().manual_seed(int(seed))
            idx = torch.randperm(X.shape[0], generator=gen)[:m].to(X.device)
            return X[idx], y[idx]
        Xr, yr = sample_rows(self.partitions, m, seed=seed, client=self.client)
        Xr, yr = self._scaled(Xr, yr)
        return torch.as_tensor(Xr, dtype=torch.float64), torch.as_tensor(yr, dtype=torch.float64)

    def _scaled(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.scaler is None:
            return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        return self.scaler.transform_x(X), self.scaler.transform_y(y)


def as_rows(X: Any, y: Any = None) -> Rows:
    """``X`` when it is :class:`Rows` already (then y must be None: the targets come with
    the rows), else :meth:`Rows.in_memory` of (X, y): what a method's fit function does
    with the data it is given, so that it can be called on tensors directly too."""
    if isinstance(X, Rows):
        if y is not None:
            raise ValueError("with X = Rows the targets come with the rows; y must be None")
        return X
    return Rows.in_memory(X, y)
