"""The pass that learns a table's encoding (:class:`~gpscale.io.encoding.TableEncoding`):
per column, the rows with a value, their sum and minimum (numbers and dates) or the
count of each level (categories), and the rows whose target is missing.

Each partition is surveyed on its own (:func:`partition_survey`, on a cluster's workers
when there is one: :func:`gpscale.parallel.cluster.map_partitions`) and the results are
merged here, so the levels do not depend on how the rows are split. The columns that
cannot be used are refused here, before any method is chosen: a column with no value,
and a categorical column with about one level per row (an id, or free text).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from ..parallel.cluster import map_partitions
from .batch import float_column
from .dates import days
from .encoding import ColumnCode, TableEncoding, as_strings

__all__ = ["ColumnStats", "TableStats", "partition_survey", "survey", "learn_encoding",
           "MAX_LEVELS", "ID_SHARE", "MissingTargetWarning"]

#: a categorical column with more levels than this is refused (an id or free text): one
#: 0/1 column per level would make X wider than a GP can use
MAX_LEVELS = 1000
#: ... and so is one whose levels outnumber this share of the rows ...
ID_SHARE = 0.5
#: ... unless it has at most this many levels (small tables, e.g. in tests)
SMALL_LEVELS = 20


class MissingTargetWarning(UserWarning):
    """Training rows whose target is missing were left out."""


@dataclass
class ColumnStats:
    """One column over some rows: ``valid`` rows with a value, their ``total`` and
    ``low`` (numbers, dates in days), or ``levels`` with their counts (categories, at
    most MAX_LEVELS + 1 kept: beyond that the column is refused anyway)."""

    valid: int = 0
    total: float = 0.0
    low: float = np.inf
    levels: Counter = field(default_factory=Counter)
    missing: int = 0

    def merge(self, other: ColumnStats) -> ColumnStats:
        levels = self.levels + other.levels
        if len(levels) > MAX_LEVELS + 1:
            levels = Counter(dict(levels.most_common(MAX_LEVELS + 1)))
        return ColumnStats(self.valid + other.valid, self.total + other.total,
                           min(self.low, other.low), levels, self.missing + other.missing)


@dataclass
class TableStats:
    """Every input column's :class:`ColumnStats`, the rows, and the rows whose target is
    missing."""

    columns: dict[str, ColumnStats]
    rows: int = 0
    no_target: int = 0

    def merge(self, other: TableStats) -> TableStats:
        return TableStats({k: v.merge(other.columns[k]) for k, v in self.columns.items()},
                          self.rows + other.rows, self.no_target + other.no_target)


def partition_survey(partition: Any, kinds: TableEncoding, target: str | None,
                     rows: int = 65_536) -> TableStats:
    """The :class:`TableStats` of one partition (its ``tables(rows)``)."""
    stats = TableStats({c.name: ColumnStats() for c in kinds.codes})
    for table in partition.tables(rows):
        stats.rows += table.num_rows
        if target is not None:  # the encoding is learned from the rows trained on
            unlabelled = np.isnan(float_column(table.column(target)))
            stats.no_target += int(unlabelled.sum())
            if unlabelled.any():
                table = table.filter(pa.array(~unlabelled))
        for c in kinds.codes:
            s, col = stats.columns[c.name], table.column(c.name)
            if c.kind == "category":
                strings = as_strings(col)
                s.missing += strings.null_count
                counts = strings.value_counts()
                for level, n in zip(counts.field("values").to_pylist(),
                                    counts.field("counts").to_pylist()):
                    if level is not None:
                        s.levels[level] += n
                if len(s.levels) > MAX_LEVELS + 1:
                    s.levels = Counter(dict(s.levels.most_common(MAX_LEVELS + 1)))
                continue
            v = days(col, c.name, partition.origin) if c.kind == "date" else float_column(col)
            ok = v[~np.isnan(v)]
            s.valid += len(ok)
            s.missing += len(v) - len(ok)
            if len(ok):
                s.total += float(ok.sum())
                s.low = min(s.low, float(ok.min()))
    return stats


def survey(partitions: Sequence[Any], kinds: TableEncoding, target: str | None,
           client: Any = None) -> list[TableStats]:
    """Each partition's :class:`TableStats`, in partition order (merge them with
    :meth:`TableStats.merge`)."""
    return map_partitions(client, partition_survey, list(partitions), kinds, target)


def learn_encoding(kinds: TableEncoding, stats: TableStats, where: str) -> TableEncoding:
    """The encoding the surveyed rows give; ValueError naming the columns that cannot be
    used (and how to leave them out); a warning counting the rows without a target."""
    kept = stats.rows - stats.no_target
    if stats.rows and kept == 0:
        raise ValueError(f"every row of {where} has a missing target; check the target "
                         "column")
    codes, empty, ids = [], [], []
    for c in kinds.codes:
        s = stats.columns[c.name]
        if c.kind == "category":
            n = len(s.levels)
            if n == 0:
                empty.append(c.name)
            elif n > MAX_LEVELS or (n > ID_SHARE * stats.rows and n > SMALL_LEVELS):
                ids.append(f"{c.name!r} ({'more than ' + str(MAX_LEVELS) if n > MAX_LEVELS else n}"
                           f" distinct values in {stats.rows} rows)")
            codes.append(ColumnCode(c.name, "category", levels=tuple(sorted(s.levels)),
                                    missing=s.missing > 0))
            continue
        if s.valid == 0:
            empty.append(c.name)
            codes.append(c)
            continue
        origin = s.low if c.kind == "date" else 0.0
        codes.append(replace(c, mean=s.total / s.valid - origin, missing=s.missing > 0,
                             origin=origin))
    bad = empty + [i.split(" (")[0].strip("'") for i in ids]
    if bad:
        why = ([f"no values (every row missing): {empty}"] if empty else []) + (
            [f"about one value per row, so they look like ids or free text, not "
             f"categories: {', '.join(ids)}"] if ids else [])
        raise ValueError(f"column(s) of {where} that cannot be inputs: {'; '.join(why)}. "
                         f"Leave them out with --exclude {','.join(bad)} "
                         f"(exclude={bad} in Python)")
    if stats.no_target:
        warnings.warn(f"{stats.no_target} of {stats.rows} rows of {where} have a missing "
                      "target and are left out of training", MissingTargetWarning,
                      stacklevel=2)
    return kinds.with_codes(codes, stats.no_target)
