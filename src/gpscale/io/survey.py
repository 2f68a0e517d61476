"""The pass that learns a table's encoding (:class:`~gpscale.io.encoding.TableEncoding`):
per column, the rows with a value, their sum and minimum (numbers and dates) or the
count of each level (categories), and the rows whose target is missing.

Each partition is surveyed on its own (:func:`partition_survey`, on a cluster's workers
when there is one: :func:`gpscale.parallel.cluster.map_partitions`) and the results are
merged here, so the levels do not depend on how the rows are split. The columns that
cannot be used are refused here, before any method is chosen: a column with no value,
a categorical column with about one level per row (an id, or free text), and a number
column that looks like an integer id (:func:`integer_id`): whole numbers, almost all
distinct, that either run monotonically with the row order (a row counter, ids handed
out in turn) or are spread evenly over their range (hashed or shuffled ids). Such a
column fits as a smooth input the GP can only overfit; a real quantity that happens to
look like it (a time index) is kept when the user names it in ``columns=``, or when it
is the only input.
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
           "MAX_LEVELS", "ID_SHARE", "ID_DISTINCT", "ID_ROWS", "integer_id",
           "MissingTargetWarning"]

#: a categorical column with more levels than this is refused (an id or free text): one
#: 0/1 column per level would make X wider than a GP can use
MAX_LEVELS = 1000
#: ... and so is one whose levels outnumber this share of the rows ...
ID_SHARE = 0.5
#: ... unless it has at most this many levels (small tables, e.g. in tests)
SMALL_LEVELS = 20
#: a number column of whole numbers is an id when at least this share of its values are
#: distinct ...
ID_DISTINCT = 0.95
#: ... among more than this many rows with a value (fewer say too little) ...
ID_ROWS = 50
#: distinct values kept per column to count them (:class:`DistinctSample`): exact up to
#: this many, beyond it a hash-chosen sample of them (about 1 % error in the count)
DISTINCT_KEEP = 8192


def _hash(v: np.ndarray) -> np.ndarray:
    """splitmix64 of int64 values: which distinct values the sample keeps, the same in
    every partition."""
    z = v.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass
class DistinctSample:
    """The distinct values of a column whose hash has its top ``level`` bits zero (all of
    them at level 0): a uniform sample of the distinct values, about 1 in 2**level, so
    ``len(values) * 2**level`` estimates their number. Merging two gives the sample of
    the union whatever the split of the rows (distinct sampling, Gibbons 2001)."""

    values: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    level: int = 0

    def _at(self, values: np.ndarray, level: int) -> np.ndarray:
        if level == 0:
            return values
        return values[(_hash(values) >> np.uint64(64 - level)) == 0]

    def add(self, values: np.ndarray, level: int = 0) -> DistinctSample:
        level = max(self.level, level)
        kept = np.union1d(self._at(self.values, level), self._at(values, level))
        while len(kept) > DISTINCT_KEEP:
            level += 1
            kept = self._at(kept, level)
        return DistinctSample(kept, level)

    def merge(self, other: DistinctSample) -> DistinctSample:
        return self.add(other.values, other.level)

    def __eq__(self, other: object) -> bool:  # (the dataclass's would compare arrays)
        return (isinstance(other, DistinctSample) and self.level == other.level
                and np.array_equal(self.values, other.values))

    @property
    def count(self) -> int:
        """The number of distinct values (exact at level 0)."""
        return len(self.values) << self.level


@dataclass
class Order:
    """Whether a column's values (missing ones skipped) never fall (``up``) or never rise
    (``down``) in row order, and its ``first`` and ``last`` value, for merging pieces
    read in order."""

    up: bool = True
    down: bool = True
    first: float | None = None  # (None: no values yet)
    last: float | None = None

    @classmethod
    def of(cls, v: np.ndarray) -> Order:
        if not len(v):
            return cls()
        step = np.diff(v)
        return cls(bool((step >= 0).all()), bool((step <= 0).all()), float(v[0]),
                   float(v[-1]))

    def merge(self, other: Order) -> Order:
        if self.first is None or self.last is None:
            return other
        if other.first is None:
            return self
        return Order(self.up and other.up and self.last <= other.first,
                     self.down and other.down and self.last >= other.first,
                     self.first, other.last)


def integer_id(name: str, s: ColumnStats) -> str:
    """Why a number column looks like an integer id (see the module docstring), in a few
    words; empty when it does not."""
    if not s.whole or s.valid <= ID_ROWS or s.distinct.count < ID_DISTINCT * s.valid:
        return ""
    many = f"{min(s.distinct.count, s.valid)} distinct whole numbers in {s.valid} rows"
    if s.order.up or s.order.down:
        return (f"{name!r} ({many}, {'rising' if s.order.up else 'falling'} with the row "
                "order, like a row counter)")
    u = np.sort(s.distinct.values).astype(np.float64)
    if len(u) > ID_ROWS // 2 and u[-1] > u[0]:
        # Kolmogorov-Smirnov distance to the uniform on [min, max]: ids drawn or hashed
        # are uniform there; measured quantities (counts, money) are skewed
        at = (u - u[0]) / (u[-1] - u[0])
        rank = np.arange(1, len(u) + 1) / len(u)
        ks = max(float(np.max(rank - at)), float(np.max(at - (rank - 1 / len(u)))))
        if ks <= 1.63 / np.sqrt(len(u)):  # a uniform sample stays below it 99 % of times
            return f"{name!r} ({many}, spread evenly over their range, like hashed ids)"
    return ""


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
    #: numbers: whether every value is a whole number, a sample of the distinct ones and
    #: their order (to tell integer ids, :func:`integer_id`)
    whole: bool = True
    distinct: DistinctSample = field(default_factory=DistinctSample)
    order: Order = field(default_factory=Order)

    def merge(self, other: ColumnStats) -> ColumnStats:
        """These rows, then ``other``'s (in row order)."""
        levels = self.levels + other.levels
        if len(levels) > MAX_LEVELS + 1:
            levels = Counter(dict(levels.most_common(MAX_LEVELS + 1)))
        whole = self.whole and other.whole
        return ColumnStats(self.valid + other.valid, self.total + other.total,
                           min(self.low, other.low), levels, self.missing + other.missing,
                           whole, self.distinct.merge(other.distinct) if whole
                           else DistinctSample(), self.order.merge(other.order))

    def add_numbers(self, ok: np.ndarray) -> None:
        """Count a piece's values (none missing) towards telling an integer id."""
        if not self.whole or not len(ok):
            return
        if not (np.all(ok == np.round(ok)) and np.abs(ok).max() < 2.0 ** 62):
            self.whole, self.distinct = False, DistinctSample()
            return
        self.distinct = self.distinct.add(np.unique(ok.astype(np.int64)))
        self.order = self.order.merge(Order.of(ok))


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
                if c.kind == "number":
                    s.add_numbers(ok)
    return stats


def survey(partitions: Sequence[Any], kinds: TableEncoding, target: str | None,
           client: Any = None) -> list[TableStats]:
    """Each partition's :class:`TableStats`, in partition order (merge them with
    :meth:`TableStats.merge`)."""
    return map_partitions(client, partition_survey, list(partitions), kinds, target)


def learn_encoding(kinds: TableEncoding, stats: TableStats, where: str,
                   chosen: Sequence[str] = ()) -> TableEncoding:
    """The encoding the surveyed rows give; ValueError naming the columns that cannot be
    used (and how to leave them out); a warning counting the rows without a target.
    ``chosen``: the inputs the user named (``columns=``), kept even when they look like
    integer ids."""
    kept = stats.rows - stats.no_target
    if stats.rows and kept == 0:
        raise ValueError(f"every row of {where} has a missing target; check the target "
                         "column")
    codes, empty, ids, numbered = [], [], [], []
    alone = len(kinds.codes) == 1  # leaving it out would leave no input: a series
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
        if c.kind == "number" and not alone and c.name not in chosen:
            why = integer_id(c.name, s)
            if why:
                numbered.append((c.name, why))
        origin = s.low if c.kind == "date" else 0.0
        codes.append(replace(c, mean=s.total / s.valid - origin, missing=s.missing > 0,
                             origin=origin))
    bad = empty + [i.split(" (")[0].strip("'") for i in ids] + [n for n, _ in numbered]
    if bad:
        why = ([f"no values (every row missing): {empty}"] if empty else []) + (
            [f"about one value per row, so they look like ids or free text, not "
             f"categories: {', '.join(ids)}"] if ids else []) + (
            [f"whole numbers, almost all distinct, that look like ids, not measurements: "
             f"{', '.join(w for _, w in numbered)}"] if numbered else [])
        keep = (" If one is a real input (a time index, say), keep it by naming the "
                "inputs with --columns (columns=[...] in Python)" if numbered else "")
        raise ValueError(f"column(s) of {where} that cannot be inputs: {'; '.join(why)}. "
                         f"Leave them out with --exclude {','.join(bad)} "
                         f"(exclude={bad} in Python).{keep}")
    if stats.no_target:
        warnings.warn(f"{stats.no_target} of {stats.rows} rows of {where} have a missing "
                      "target and are left out of training", MissingTargetWarning,
                      stacklevel=2)
    return kinds.with_codes(codes, stats.no_target)
