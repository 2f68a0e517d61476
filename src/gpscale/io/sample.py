"""A uniform random sample of a source's rows in one pass, partition by partition.

Each row is kept independently with probability q = min(1, m / n) (Bernoulli sampling),
where n is the source's row count, so the sample is uniform over the rows and its size
is m on average (binomial). Each partition draws from its own generator, seeded by
(seed, partition index), so the sample does not depend on where or in which order the
partitions are read: on the client, in a process pool, or as dask tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..parallel.cluster import fold_map

__all__ = ["partition_sample", "sample_rows"]


def partition_sample(partition: Any, rate: float, seed: int, index: int,
                     rows: int = 65_536) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``partition`` kept with probability ``rate`` (raw, unscaled)."""
    rng = np.random.default_rng([int(seed), int(index)])
    xs, ys = [], []
    for X, y in partition.chunks(rows):
        keep = rng.random(len(X)) < rate
        xs.append(X[keep])
        ys.append(y[keep])
    if not xs:
        raise ValueError(f"partition {index} has no rows to sample")
    return np.concatenate(xs), np.concatenate(ys)


def _sample_item(item: tuple[int, Any], rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    index, partition = item
    return partition_sample(partition, rate, seed, index)


def sample_rows(partitions: Sequence[Any], m: int, seed: int = 0,
                client: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """About ``m`` rows drawn uniformly from all ``partitions`` (every row when the source
    has at most m), as raw (X, y) arrays; the per-partition draws run as tasks on
    ``client`` when given (only the sampled rows travel back)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"the sample size must be an integer >= 1, got {m!r}")
    n = sum(int(p.num_rows) for p in partitions)
    if n == 0:
        raise ValueError("the source has no rows to sample")
    rate = min(1.0, m / n)
    parts = fold_map(client, _sample_item, list(enumerate(partitions)), rate=rate, seed=seed)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
