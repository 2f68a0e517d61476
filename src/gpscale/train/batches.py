"""Minibatches drawn from a data source: how the minibatch trainers (MINIMAX and SCGD,
Shoham & Avron §3.1–3.2; BSGD, §4.2; SVGP, Hensman et al. 2013 §4) read rows that stay
in their files (:class:`~gpscale.io.Rows`).

In memory the trainers index a full random permutation of the n rows per epoch
(:func:`gpscale.train.minibatch.epoch_batches`). A source cannot be indexed at random
cheaply, so :class:`ShuffledStream` approximates that permutation the way streaming
loaders do. One epoch:

1. visits the partitions (Parquet row groups, CSV files, array slices, dask blocks) in a
   random order, a new permutation each epoch;
2. reads each one in chunks of ``rows`` rows and standardises them (the scaler);
3. pours the chunks into a *shuffle buffer*: whenever it holds at least ``buffer_rows``
   rows, it is put in a uniformly random order and minibatches of ``batch_size`` rows
   are taken from it until fewer than ``buffer_rows`` remain, so that each minibatch is a
   uniformly random subset of the rows in the buffer at that moment;
4. after the last partition, shuffles what is left and yields it.

Every row appears exactly once per epoch, in ceil(n / batch_size) minibatches, all of
``batch_size`` rows except the epoch's last (the same count as the in-memory path).
With ``buffer_rows`` >= n the epoch is a uniformly random permutation of all rows (the
in-memory path's distribution, though not its numbers); with a buffer of about one
partition, a minibatch mixes rows of a few consecutive partitions of that epoch's random
order, so rows of one partition stay correlated (the rows of one chunk in memory are
always mixed, whatever the buffer). ``gpscale bench stream-shuffle`` measures what that
costs. Memory: up to ``buffer_rows + rows`` rows of (X, y) in float64.

The partitions are read in the training process (a dask block is computed by dask's
current scheduler and its rows sent here); a file must therefore be readable from here.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from ..rng import as_generator
from ..validation import check_int

__all__ = ["BUFFER_BYTES", "ShuffledStream"]

#: default shuffle-buffer budget: about this many bytes of float64 (X, y) rows
BUFFER_BYTES = 256 << 20
#: upper bound on the rows read per chunk: about this many bytes of float64 (X, y) rows
READ_BYTES = 64 << 20


class ShuffledStream:
    """Epochs of shuffled minibatches of standardised rows from ``partitions``.

    ``partitions``: objects with ``chunks(rows)`` yielding raw float64 ``(X, y)`` numpy
    chunks and ``num_rows`` (:meth:`gpscale.io.Source.partitions`). ``scaler``: applied
    to every chunk (``transform_x`` / ``transform_y``, e.g. a ``Standardizer``), None for
    rows already in training units. ``buffer_rows``: the shuffle buffer (default: about
    :data:`BUFFER_BYTES` of rows, at least ``batch_size``); ``rows``: rows per read
    (default: a quarter of the buffer, at most about :data:`READ_BYTES`). ``seed``: an
    int or a ``torch.Generator`` for :meth:`epoch` calls without a generator of their own.
    """

    def __init__(self, partitions: Sequence[Any], batch_size: int, *, scaler: Any = None,
                 buffer_rows: int | None = None, rows: int | None = None,
                 seed: int | torch.Generator | None = 0, num_features: int | None = None,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        self.partitions = tuple(partitions)
        if not self.partitions:
            raise ValueError("partitions is empty; give at least one partition of rows")
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.scaler = scaler
        self.num_rows = sum(int(p.num_rows) for p in self.partitions)
        width = 8 * ((num_features or 1) + 1)
        default = max(1, BUFFER_BYTES // width)
        buffer_rows = default if buffer_rows is None else check_int("buffer_rows",
                                                                    buffer_rows, 1)
        self.buffer_rows = max(buffer_rows, self.batch_size)
        self.rows = (max(1, min(self.buffer_rows // 4, READ_BYTES // width)) if rows is None
                     else check_int("rows", rows, 1))
        self.generator = as_generator(seed)
        self.dtype, self.device = dtype, torch.device(device or "cpu")

    @classmethod
    def from_rows(cls, rows: Any, batch_size: int, **kwargs: Any) -> ShuffledStream:
        """The stream over a :class:`~gpscale.io.Rows` (its
        partitions and scaler; ``kwargs`` as for the constructor)."""
        kwargs.setdefault("num_features", rows.num_features)
        return cls(rows.partitions, batch_size, scaler=rows.scaler, **kwargs)

    @property
    def batches_per_epoch(self) -> int:
        return -(-self.num_rows // self.batch_size)

    def epoch(self, generator: torch.Generator | None = None
              ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One epoch of ``(X, y)`` minibatches (tensors of the stream's dtype and device);
        random draws from ``generator`` (default: the stream's own)."""
        gen = self.generator if generator is None else generator
        b, cap = self.batch_size, self.buffer_rows
        pool: list[tuple[np.ndarray, np.ndarray]] = []
        held = 0
        order = torch.randperm(len(self.partitions), generator=gen).tolist()
        for k in order:
            for X, y in self._read(self.partitions[k]):
                pool.append((X, y))
                held += len(y)
                if held < cap:
                    continue
                X, y = _shuffled(pool, gen)
                stop = len(y)
                while stop >= cap:
                    yield self._tensors(X[stop - b:stop], y[stop - b:stop])
                    stop -= b
                pool, held = [(X[:stop], y[:stop])], stop
        if held:
            X, y = _shuffled(pool, gen)
            for s in range(0, held, b):
                yield self._tensors(X[s:s + b], y[s:s + b])

    def forever(self, generator: torch.Generator | None = None
                ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Epoch after epoch, without end (for draws independent of the main stream)."""
        return itertools.chain.from_iterable(self.epoch(generator) for _ in itertools.count())

    def chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Every row once, standardised, in partition order (no shuffling): a pass for
        statistics, inducing-point initialisation and the like."""
        for part in self.partitions:
            for X, y in self._read(part):
                yield self._tensors(X, y)

    def _read(self, part: Any) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for X, y in part.chunks(self.rows):
            if y is None:
                raise ValueError(f"{part!r} has no target column; minibatch training needs "
                                 "y (name it with target=)")
            if self.scaler is not None:
                X, y = self.scaler.transform_x(X), self.scaler.transform_y(y)
            if len(y):
                yield np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)

    def _tensors(self, X: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.as_tensor(np.ascontiguousarray(X)).to(self.device, self.dtype),
                torch.as_tensor(np.ascontiguousarray(y)).to(self.device, self.dtype))

    def __repr__(self) -> str:
        return (f"ShuffledStream({len(self.partitions)} partitions, {self.num_rows} rows, "
                f"batch_size={self.batch_size}, buffer_rows={self.buffer_rows})")


def _shuffled(pool: list[tuple[np.ndarray, np.ndarray]], gen: torch.Generator
              ) -> tuple[np.ndarray, np.ndarray]:
    """The pooled rows, concatenated, in a uniformly random order."""
    X = np.concatenate([p[0] for p in pool]) if len(pool) > 1 else pool[0][0]
    y = np.concatenate([p[1] for p in pool]) if len(pool) > 1 else pool[0][1]
    perm = torch.randperm(len(y), generator=gen).numpy()
    return X[perm], y[perm]
