"""dask collections: a ``dask.array`` pair (X, y) or a ``dask.dataframe``; one partition
per dask block (row chunk) or dask data-frame partition.

A :class:`DaskPartition` holds a ``Delayed`` that evaluates to an in-memory partition
(:class:`~gpscale.io.memory.ArrayPartition` or
:class:`~gpscale.io.memory.FramePartition`) of that block. ``chunks()`` computes it with
dask's current scheduler and reads it here; a distributed layer instead passes
``partition.delayed`` to a task, which calls ``.chunks(rows)`` on the value where the
block lives. Values are checked (types, NaN/inf) when read, on whichever machine that
is. dask itself is called through :mod:`gpscale.parallel.cluster`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..parallel.cluster import compute_together, dask_array, delayed_call
from .batch import Batch, Columns, Origin, Partition, text_error
from .memory import ArrayPartition, FramePartition, as_float_array, is_numeric

__all__ = ["DaskPartition", "array_partitions", "count_rows", "frame_partitions", "is_dask"]


def is_dask(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "dask"


@dataclass(eq=False, repr=False)
class DaskPartition(Partition):
    """Block ``index`` of a dask collection: ``delayed`` evaluates to an in-memory
    partition; ``rows`` is its length when dask knows it, else ``length`` (a Delayed)
    is computed on first use of :attr:`num_rows`."""

    delayed: Any
    index: int
    origin: Origin
    rows: int | None = None
    length: Any = None

    @property
    def num_rows(self) -> int:
        if self.rows is None:
            self.rows = int(self.length.compute())
        return self.rows

    def known_rows(self) -> int | None:
        return self.rows

    def materialise(self) -> Partition:
        """The block, computed by dask's current scheduler, as an in-memory partition."""
        return self.delayed.compute()

    def batches(self, rows: int) -> Iterator[Batch]:
        part = self.materialise()
        self.rows = part.num_rows
        yield from part.batches(rows)

    def tables(self, rows: int = 65_536) -> Iterator[Any]:
        """The block's columns as Arrow tables (a data-frame block)."""
        yield from self.materialise().tables(rows)


def count_rows(parts: list[Partition]) -> None:
    """Compute the unknown lengths of the dask partitions among ``parts`` together."""
    lazy = [p for p in parts if isinstance(p, DaskPartition) and p.rows is None]
    if lazy:
        for p, n in zip(lazy, compute_together([p.length for p in lazy])):
            p.rows = int(n)


def _array_block(X: Any, y: Any, cols: Columns, origin: Origin) -> ArrayPartition:
    X = as_float_array(X, "X")
    y = None if y is None else as_float_array(y, "y").reshape(-1)
    return ArrayPartition(X, y, cols, origin)


def _frame_block(frame: Any, cols: Columns, origin: Origin) -> FramePartition:
    return FramePartition(frame, cols, origin)


def array_partitions(X: Any, y: Any, cols: Columns) -> list[DaskPartition]:
    """One partition per row block of X (columns in one block; y aligned to X's rows)."""
    X = X.rechunk({1: -1})
    if y is not None:
        y = (y if is_dask(y) else dask_array(y)).reshape(-1)
        if y.chunks[0] != X.chunks[0]:
            try:
                y = y.rechunk((X.chunks[0],))
            except ValueError as err:
                raise ValueError(f"cannot align y's row blocks {y.chunks[0]} with X's "
                                 f"{X.chunks[0]} ({err}); call compute_chunk_sizes() on "
                                 "both, or give them the same blocks") from None
    xs = X.to_delayed()[:, 0]
    ys = [None] * len(xs) if y is None else list(y.to_delayed())
    parts, offset = [], 0
    for i, (xb, yb) in enumerate(zip(xs, ys)):
        size = X.chunks[0][i]
        known = size == size  # nan when dask does not know the block's length
        origin = (Origin("the dask arrays", offset, "index") if offset is not None
                  else Origin(f"dask block {i}", 0, "position"))
        parts.append(DaskPartition(delayed_call(_array_block, xb, yb, cols, origin), i, origin,
                                   int(size) if known else None,
                                   None if known else delayed_call(len, xb)))
        offset = offset + int(size) if (known and offset is not None) else None
    return parts


def check_dask_frame(ddf: Any, cols: Columns) -> None:
    """Non-numeric columns from the collection's metadata (an example from its head)."""
    bad = [c for c in cols.numeric
           if not is_numeric(ddf.dtypes[c]) and ddf.dtypes[c].name != "object"]
    if bad:
        import numpy as np

        head = ddf[bad].partitions[0].compute()
        found = {}
        for c in bad:
            valid = np.flatnonzero(head[c].notna().to_numpy())
            found[c] = (int(valid[0]), head[c].iloc[valid[0]]) if len(valid) else (0, None)
        raise text_error(Origin("dask partition 0", 0, "position"), cols, found,
                         {c: str(ddf.dtypes[c]) for c in bad})


def frame_partitions(ddf: Any, cols: Columns) -> list[DaskPartition]:
    """One partition per partition of a dask DataFrame (projected to ``cols``)."""
    check_dask_frame(ddf, cols)
    parts = []
    for i, d in enumerate(ddf[list(cols.all)].to_delayed()):
        origin = Origin(f"dask partition {i}", 0, "position")
        parts.append(DaskPartition(delayed_call(_frame_block, d, cols, origin), i, origin,
                                   None, delayed_call(len, d)))
    return parts
