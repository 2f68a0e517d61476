"""Reductions over row partitions as pure functions: no dask here, so the same code runs
in this process and inside a task on a worker (:mod:`gpscale.parallel.cluster`).

A partition is any picklable object with ``num_rows`` and ``chunks(rows)`` yielding
(X, y) pairs (numpy arrays or tensors): the partitions of a :mod:`gpscale.io` source,
or :class:`gpscale.io.rows.TensorPartition` for rows held in memory. Optionally
``delayed``: a dask ``Delayed`` computing the rows where they live, as an (X, y) pair,
or as anything a ``to_xy(value) -> (X, y)`` attribute converts (give it as a plain or
static function: it travels to the worker with the task).

Partition results are added pairwise-in-groups along one fixed tree, in partition
order: groups of :data:`FAN_IN` consecutive results, level by level. A cluster forms
it with one task per group; :func:`stream_sum` forms it here while the results stream
in (O(FAN_IN · log k) held), so both give the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

#: partition results added per task (and per node of the in-process tree)
FAN_IN = 8


def add_results(a: Sequence[Any], b: Sequence[Any]) -> Any:
    """Two partition results added term by term: a NamedTuple stays one, else a list."""
    total = [x + y for x, y in zip(a, b)]
    return type(a)(*total) if hasattr(type(a), "_fields") else total


def sum_results(items: Sequence[Any]) -> Any:
    """Left-to-right sum of partition results (one node of the tree)."""
    total = items[0]
    for item in items[1:]:
        total = add_results(total, item)
    return total


def stream_sum(results: Iterable[Any]) -> Any:
    """The tree sum of ``results`` (groups of FAN_IN consecutive results, level by
    level, the last group of a level possibly short), holding < FAN_IN per level."""
    levels: list[list[Any]] = []
    for item in results:
        i = 0
        while True:
            if i == len(levels):
                levels.append([])
            levels[i].append(item)
            if len(levels[i]) < FAN_IN:
                break
            item, levels[i] = sum_results(levels[i]), []
            i += 1
    carry = None
    for i, level in enumerate(levels):
        group = level + ([carry] if carry is not None else [])
        carry = sum_results(group) if group else None
        if i == len(levels) - 1:
            return carry
    raise AssertionError("unreachable: no partitions")  # pragma: no cover


def check_partitions(partitions: Iterable[Any]) -> list[Any]:
    """``partitions`` as a non-empty list of objects with ``chunks(rows)``; ValueError
    naming the first that is not one."""
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
        raise ValueError("partitions must be a sequence of partitions (objects with "
                         f"chunks(rows)), got {type(partitions).__name__}")
    partitions = list(partitions)
    if not partitions:
        raise ValueError("partitions is empty; give at least one partition of rows")
    for i, part in enumerate(partitions):
        if not callable(getattr(part, "chunks", None)):
            raise ValueError(f"partitions[{i}] ({type(part).__name__}) has no chunks(rows) "
                             "method; use a gpscale.io source's partitions")
    return partitions


class ValueRows:
    """The computed value of a partition's ``delayed``, as a partition (on the worker)."""

    def __init__(self, value: Any, to_xy: Callable[[Any], tuple] | None) -> None:
        xy = to_xy(value) if to_xy is not None else value
        if not (isinstance(xy, (tuple, list)) and len(xy) == 2):
            raise ValueError("a partition's delayed must compute an (X, y) pair, or the "
                             "partition must have to_xy(value) -> (X, y); got "
                             f"{type(xy).__name__}")
        self.X, self.y = np.asarray(xy[0]), np.asarray(xy[1])
        self.num_rows = len(self.X)

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for s in range(0, self.num_rows, rows):
            yield self.X[s : s + rows], self.y[s : s + rows]


def as_partition(value: Any, to_xy: Callable[[Any], tuple] | None) -> Any:
    """A computed ``delayed``: already a partition (``gpscale.io`` makes them so), or rows."""
    return value if hasattr(value, "chunks") else ValueRows(value, to_xy)
