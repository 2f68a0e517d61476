"""What GP-GRIEF needs from the rows before training, in one pass over partitions:
each column's range (the uniform grid), its distinct values while there are few of
them, a uniform random sample of rows (the exact-GP initialisation on min(n, 1000)
random points, Evans & Nair 2018 §6, and the quantile grid), n and y's moments.

Each partition's share is a pure function (:func:`partition_summary`) of the partition,
the global index of its first row and the options, so it runs unchanged in this
process or as a dask task (:func:`gpscale.parallel.cluster.fold_map`); the client merges
the per-partition :class:`RowSummary` objects (:meth:`RowSummary.merge`).

The sample is bottom-k sampling: row i (its global index, counted over the
partitions in order) gets the key h(seed, i), the splitmix64 output for that counter
(a bijective 64-bit mixer of the seed and i, so keys are distinct and behave as
independent uniforms), and the sample is the ``size`` rows with the smallest keys.
The k smallest keys of n i.i.d. uniforms index a uniformly random k-subset, and the
first m ≤ k of them (sorted by key) a uniformly random m-subset. The k smallest of
a union are the k smallest of the parts' k smallest, so the merge is exact, and the
sample depends on the rows, the seed and ``size`` only: not on the partitioning, the
chunk size, the merge order or the machine.

Minima, maxima and the distinct-value sets merge exactly too, so the uniform grid
from a pass equals the one :func:`~gpscale.features.grief.grid_1d` places with every
row in memory. The quantile grid cannot be exact from bounded memory (exact
quantiles need every value); :func:`summary_grids` takes it at the nearest-rank
quantiles of the sample (exact when n ≤ ``size``) with the end points replaced by the
exact minimum and maximum. Each interior point is then a quantile of the data at a
level off the target by the sample's empirical-CDF error, O(1/√size) (the
Dvoretzky-Kiefer-Wolfowitz bound: P(sup |F_k − F_n| > ε) ≤ 2 e^{−2kε²}).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ..features.grief import check_grid

__all__ = ["RowSummary", "partition_summary", "summarize_rows", "summary_grids",
           "row_keys", "SUMMARY_ROWS", "QUANTILE_SAMPLE"]

#: rows per chunk of the summary pass (one (rows, d) block held at a time)
SUMMARY_ROWS = 65_536
#: default sample size behind a streamed quantile grid
QUANTILE_SAMPLE = 10_000

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def row_keys(index: np.ndarray, seed: int) -> np.ndarray:
    """uint64 keys of rows with global indices ``index``: output number i + 1 of the
    splitmix64 generator seeded with ``seed`` (Steele, Lea & Flood 2014), a bijection
    of i for a fixed seed."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed % 2**64) + (np.asarray(index, dtype=np.uint64) + np.uint64(1)) * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class RowSummary:
    """One pass's summary of (scaled) rows; merge two with :meth:`merge`.

    ``lo``/``hi``: column minima and maxima; ``distinct[j]``: column j's sorted distinct
    values while there are at most ``max_distinct`` of them, else None; ``X``, ``y``,
    ``index``, ``keys``: the sample (≤ ``size`` rows, ascending key); ``y_n``,
    ``y_sum``, ``y_m2``: y's count, sum and centred sum of squares."""

    n: int
    lo: np.ndarray
    hi: np.ndarray
    distinct: tuple[np.ndarray | None, ...]
    X: np.ndarray
    y: np.ndarray
    index: np.ndarray
    keys: np.ndarray
    y_sum: float
    y_m2: float
    size: int
    max_distinct: int

    @classmethod
    def empty(cls, d: int, size: int, max_distinct: int) -> RowSummary:
        """The summary of no rows."""
        return cls(0, np.full(d, np.inf), np.full(d, -np.inf),
                   tuple(np.empty(0) for _ in range(d)), np.empty((0, d)), np.empty(0),
                   np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64), 0.0, 0.0,
                   int(size), int(max_distinct))

    @property
    def d(self) -> int:
        return self.lo.shape[0]

    @property
    def y_var(self) -> float:
        """Unbiased variance of y over all rows (nan for n < 2)."""
        return self.y_m2 / (self.n - 1) if self.n > 1 else float("nan")

    def sample(self, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A uniform random sample of min(m, n) rows (X, y) (the smallest keys)."""
        m = self.X.shape[0] if m is None else int(m)
        if m > self.size:
            raise ValueError(f"asked for {m} sampled rows; the pass kept {self.size}")
        return self.X[:m], self.y[:m]

    def merge(self, other: RowSummary) -> RowSummary:
        """The summary of the union of two disjoint sets of rows (exact but for the
        y moments, merged by Chan et al.'s formula)."""
        if (other.d, other.size, other.max_distinct) != (self.d, self.size,
                                                         self.max_distinct):
            raise ValueError("cannot merge summaries of different columns or options")
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        distinct = tuple(_union(a, b, self.max_distinct)
                         for a, b in zip(self.distinct, other.distinct))
        X, y, index, keys = _smallest(self.size, (self.X, other.X), (self.y, other.y),
                                      (self.index, other.index), (self.keys, other.keys))
        n = self.n + other.n
        delta = other.y_sum / other.n - self.y_sum / self.n
        m2 = self.y_m2 + other.y_m2 + delta * delta * self.n * other.n / n
        return replace(self, n=n, lo=np.minimum(self.lo, other.lo),
                       hi=np.maximum(self.hi, other.hi), distinct=distinct, X=X, y=y,
                       index=index, keys=keys, y_sum=self.y_sum + other.y_sum, y_m2=m2)


def _union(a: np.ndarray | None, b: np.ndarray | None, limit: int) -> np.ndarray | None:
    if a is None or b is None:
        return None
    u = np.union1d(a, b)
    return u if u.size <= limit else None


def _few(x: np.ndarray, limit: int) -> np.ndarray | None:
    u = np.unique(x)
    return u if u.size <= limit else None


def _smallest(size: int, Xs, ys, indices, keys):
    """The ``size`` rows with the smallest (key, index) among the given ones, sorted."""
    key, index = np.concatenate(keys), np.concatenate(indices)
    order = np.lexsort((index, key))[:size]
    return np.concatenate(Xs)[order], np.concatenate(ys)[order], index[order], key[order]


def partition_summary(item: tuple[Any, int], *, d: int, size: int, max_distinct: int,
                      seed: int, scaler: Any = None, rows: int = SUMMARY_ROWS,
                      to_xy: Any = None) -> RowSummary:
    """The :class:`RowSummary` of one partition, read chunk by chunk: a pure function of
    ``item = (partition, offset)`` (offset: the global index of its first row; the
    partition may also be the computed value of a dask partition's ``delayed``, turned
    into rows with ``to_xy``) and the options, ``scaler`` applied to each chunk."""
    from ..parallel.reduce import as_partition

    part, offset = item
    part = as_partition(part, to_xy)
    total = RowSummary.empty(d, size, max_distinct)
    start = int(offset)
    for X, y in part.chunks(int(rows)):
        if scaler is not None:
            X, y = scaler.transform_x(X), scaler.transform_y(y)
        X = np.asarray(X, dtype=np.float64).reshape(len(y), d)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if len(y) == 0:
            continue
        total = total.merge(_chunk_summary(X, y, start, total, seed))
        start += len(y)
    return total


def _chunk_summary(X: np.ndarray, y: np.ndarray, start: int, sofar: RowSummary,
                   seed: int) -> RowSummary:
    m, d = X.shape
    lo, hi = X.min(0), X.max(0)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all() and np.isfinite(y).all()):
        raise ValueError(f"NaN or inf in the rows from index {start} on; drop or impute "
                         "those rows before training")
    distinct = tuple(None if sofar.distinct[j] is None else _few(X[:, j], sofar.max_distinct)
                     for j in range(d))
    index = np.arange(start, start + m, dtype=np.int64)
    keys = row_keys(index, seed)
    # only the chunk's `size` smallest keys can enter the sample (keys are distinct)
    keep = (np.argpartition(keys, sofar.size - 1)[: sofar.size] if m > sofar.size
            else np.arange(m))
    Xs, ys, idx, ks = _smallest(sofar.size, (X[keep],), (y[keep],), (index[keep],),
                                (keys[keep],))
    y_sum = float(y.sum())
    y_m2 = float(((y - y_sum / m) ** 2).sum())
    return replace(sofar, n=m, lo=lo, hi=hi, distinct=distinct, X=Xs, y=ys, index=idx,
                   keys=ks, y_sum=y_sum, y_m2=y_m2)


def summarize_rows(partitions: Sequence[Any], num_features: int, *, size: int,
                   max_distinct: int, seed: int = 0, scaler: Any = None,
                   client: Any = None, rows: int | None = None) -> RowSummary:
    """:func:`partition_summary` of every partition, in this process (``client`` None)
    or one task per partition on a dask cluster, merged here in partition order.

    A partition with a dask ``delayed`` is computed on the cluster and summarised where
    its value lives. Offsets come from the partitions' ``num_rows``."""
    from ..io.daskdata import count_rows
    from ..parallel import cluster
    from ..parallel.reduce import check_partitions

    parts = check_partitions(partitions)
    for name, value, low in (("size", size, 1), ("max_distinct", max_distinct, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    count_rows(parts)  # dask lengths in one computation
    offsets = np.concatenate([[0], np.cumsum([int(p.num_rows) for p in parts])[:-1]])
    shared = dict(d=int(num_features), size=int(size), max_distinct=int(max_distinct),
                  seed=int(seed), scaler=scaler, rows=int(rows or SUMMARY_ROWS))
    delayed = [getattr(p, "delayed", None) for p in parts]
    if client is None or all(v is None for v in delayed):
        results = cluster.fold_map(client, partition_summary, zip(parts, offsets.tolist()),
                                   **shared)
    else:  # computed where the collection lives; the summary task follows it there
        results = [cluster.submit(client, partition_summary,
                                  (p if v is None else cluster.compute(client, v), int(o)),
                                  to_xy=getattr(p, "to_xy", None), **shared)
                   for p, v, o in zip(parts, delayed, offsets)]
        results = cluster.gather(client, results)
    total = RowSummary.empty(int(num_features), size, max_distinct)
    for r in results:
        total = total.merge(r)
    if total.n == 0:
        raise ValueError("the partitions have no rows")
    return total


def summary_grids(summary: RowSummary, m_bar: int, kind: str = "uniform",
                  dtype: torch.dtype = torch.float64,
                  device: torch.device | str | None = None) -> list[torch.Tensor]:
    """Per-column grids from a pass, by :func:`~gpscale.features.grief.grid_1d`'s
    rules: the distinct values when a column has at most m̄ of them; else "uniform":
    m̄ evenly spaced points over [min, max] (identical to the in-memory grid);
    "quantile": the sample's nearest-rank quantiles at levels 0, 1/(m̄−1), …, 1 with
    the end points set to the exact min and max, repeated values merged (the
    in-memory grid when n ≤ the sample size; otherwise see the module docstring)."""
    check_grid(kind)
    if summary.max_distinct < m_bar:
        raise ValueError(f"the pass tracked up to {summary.max_distinct} distinct values "
                         f"per column; m_bar={m_bar} needs {m_bar}")
    grids = []
    for j in range(summary.d):
        values = summary.distinct[j]
        if values is not None and values.size <= m_bar:
            g = torch.as_tensor(values, dtype=torch.float64)
        elif kind == "uniform":
            g = torch.linspace(float(summary.lo[j]), float(summary.hi[j]), m_bar,
                               dtype=torch.float64)
        else:
            ordered = torch.sort(torch.as_tensor(summary.X[:, j])).values
            ranks = torch.round(torch.linspace(0, ordered.numel() - 1, m_bar,
                                               dtype=torch.float64)).long()
            g = ordered[ranks].clone()
            g[0], g[-1] = float(summary.lo[j]), float(summary.hi[j])
            g = torch.unique(g)
        grids.append(g.to(dtype=dtype, device=device))
    return grids
