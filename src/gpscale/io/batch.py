"""What a partition yields and how columns become checked float64 arrays.

A :class:`Partition` is a self-contained, picklable piece of a source (a row group of a
Parquet file, a CSV file, a slice of arrays, a dask block) that reads its own rows as
:class:`Batch` objects. This module also holds the conversions every partition shares:
Arrow columns → a C-contiguous float64 matrix, the NaN/inf check, re-chunking to a fixed
number of rows, and the wording of the errors (which name the data, the column and the
row, and say what to do).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .csvlines import lines_of_rows

__all__ = ["Batch", "Columns", "Origin", "Partition", "rechunk", "float_column"]


@dataclass(frozen=True)
class Columns:
    """The columns a partition reads: inputs, target (None for prediction inputs) and
    ``keep`` (carried along unconverted, e.g. ids to copy into predictions). ``named``
    is False for plain arrays, whose "names" are labels such as ``X[:, 2]``. ``encoding``
    (a :class:`gpscale.io.encoding.TableEncoding`): how the input columns of a table
    become X, None when they are numbers read as they are."""

    features: tuple[str, ...]
    target: str | None = None
    keep: tuple[str, ...] = ()
    named: bool = True
    encoding: Any = None

    @property
    def numeric(self) -> tuple[str, ...]:
        """The columns read as numbers: the inputs of kind ``number`` and the target."""
        inputs = self.features if self.encoding is None else tuple(
            c.name for c in self.encoding.codes if c.kind == "number")
        return inputs + (() if self.target is None else (self.target,))

    @property
    def width(self) -> int:
        """The number of columns of X."""
        return len(self.features) if self.encoding is None else self.encoding.num_features

    @property
    def all(self) -> tuple[str, ...]:
        read = self.features + (() if self.target is None else (self.target,))
        return read + tuple(k for k in self.keep if k not in read)

    def label(self, name: str) -> str:
        return repr(name) if self.named else name


@dataclass(frozen=True)
class Origin:
    """Where a partition's rows come from, for messages. ``name``: e.g. ``'data/a.csv'``
    (quoted) or ``the input arrays``; ``offset``: rows of that origin before the
    partition's first row; ``unit``: ``row`` (1-based data row, header not counted),
    ``line`` (a CSV line, found by scanning ``path`` on the error path), ``index`` or
    ``position`` (0-based)."""

    name: str
    offset: int = 0
    unit: str = "row"
    path: str | None = None

    def shifted(self, rows: int) -> Origin:
        return Origin(self.name, self.offset + rows, self.unit, self.path)

    def at(self, rows: Sequence[int]) -> list[str]:
        """Phrases locating the partition's rows ``rows`` (0-based), e.g. ``on line 7``."""
        absolute = [self.offset + int(r) for r in rows]
        if self.unit in ("index", "position"):
            return [f"at {self.unit} {r}" for r in absolute]
        lines: dict[int, int] = {}
        if self.unit == "line" and self.path is not None:
            lines = lines_of_rows(self.path, {r + 1 for r in absolute})
        data = "data row" if self.unit == "line" else "row"
        return [f"on line {lines[r + 1]}" if r + 1 in lines else f"in {data} {r + 1}"
                for r in absolute]


@dataclass(frozen=True)
class Batch:
    """Rows of a partition: X (m, d) float64 C-contiguous, y (m,) float64 or None, and
    the ``keep`` columns as Arrow arrays of their own types."""

    X: np.ndarray
    y: np.ndarray | None = None
    keep: dict[str, pa.Array] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def slice(self, start: int, stop: int | None = None) -> Batch:
        stop = len(self) if stop is None else stop
        return Batch(self.X[start:stop], None if self.y is None else self.y[start:stop],
                     {k: v.slice(start, stop - start) for k, v in self.keep.items()})

    @staticmethod
    def concat(parts: Sequence[Batch]) -> Batch:
        if len(parts) == 1:
            return parts[0]
        y = None if parts[0].y is None else np.concatenate([p.y for p in parts])
        keep = {k: pa.concat_arrays([_flat(p.keep[k]) for p in parts]) for k in parts[0].keep}
        return Batch(np.concatenate([p.X for p in parts]), y, keep)


class Partition(ABC):
    """A piece of a source that can be shipped (pickled) to another process and read
    there. ``num_rows`` may cost a pass for CSV and dask data frames (then cached)."""

    origin: Origin

    @property
    @abstractmethod
    def num_rows(self) -> int: ...

    def known_rows(self) -> int | None:
        """:attr:`num_rows` when it is known without reading data, else None."""
        return self.num_rows

    @abstractmethod
    def batches(self, rows: int) -> Iterator[Batch]:
        """Batches of ``rows`` rows (the last one shorter), in order."""

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """``(X, y)`` pairs of :meth:`batches` (y None without a target)."""
        for b in self.batches(rows):
            yield b.X, b.y

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.origin.name}, from {self.origin.unit} " \
               f"{self.origin.offset})"


def rechunk(batches: Iterable[Batch], rows: int) -> Iterator[Batch]:
    """Regroup ``batches`` into batches of exactly ``rows`` rows (the last shorter)."""
    if rows < 1:
        raise ValueError(f"rows must be a positive number of rows per chunk, got {rows}")
    pending: list[Batch] = []
    count = 0
    for b in batches:
        if len(b) == 0:
            continue
        pending.append(b)
        count += len(b)
        if count < rows:
            continue
        whole = Batch.concat(pending)
        start = 0
        while count - start >= rows:
            yield whole.slice(start, start + rows)
            start += rows
        pending = [whole.slice(start)] if start < count else []
        count -= start
    if count:
        yield Batch.concat(pending)


# -- conversions and checks -----------------------------------------------------------------
def numeric_type(t: pa.DataType) -> bool:
    """Arrow types converted to float64: integers, floats, decimals, booleans, all-null."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_boolean(t) or pa.types.is_null(t))


def _flat(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def float_column(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The column as a new float64 array, nulls as NaN, read from its Arrow buffers
    (``Array.to_numpy`` and ``fill_null`` would import pandas, which nothing else in a
    fit from a CSV file needs)."""
    col = _flat(col)
    if col.type != pa.float64():
        col = pc.cast(col, pa.float64(), safe=False)
    validity, values = col.buffers()[:2]
    n, start = len(col), col.offset
    if values is None:  # no values buffer (cannot happen for float64; kept safe)
        return col.to_numpy(zero_copy_only=False)
    out = np.frombuffer(values, dtype=np.float64, count=n, offset=start * 8).copy()
    if col.null_count and validity is not None:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        out[~bits[start : start + n].astype(bool)] = np.nan
    return out


def arrow_batch(table: pa.RecordBatch | pa.Table, cols: Columns, origin: Origin) -> Batch:
    """The columns ``cols`` of ``table`` as a checked :class:`Batch` (through
    ``cols.encoding`` when the table needs one)."""
    if cols.encoding is not None:
        return cols.encoding.batch(table, cols, origin)
    X = np.empty((table.num_rows, len(cols.features)))
    for j, name in enumerate(cols.features):
        X[:, j] = float_column(table.column(name))
    y = None if cols.target is None else float_column(table.column(cols.target))
    check_finite(X, y, cols, origin)
    return Batch(X, y, {k: _flat(table.column(k)) for k in cols.keep})


def check_finite(X: np.ndarray, y: np.ndarray | None, cols: Columns, origin: Origin) -> None:
    """ValueError naming every column of X (and y) with a NaN or inf, and its first row."""
    first: dict[str, int] = {}
    ok = np.isfinite(X)
    if not ok.all():
        for j in np.flatnonzero(~ok.all(axis=0)):
            first[cols.features[j]] = int(np.argmin(ok[:, j]))
    if y is not None and cols.target is not None:
        oky = np.isfinite(y)
        if not oky.all():
            first[cols.target] = int(np.argmin(oky))
    if first:
        raise missing_error(origin, cols, first)


def missing_error(origin: Origin, cols: Columns, first: dict[str, int]) -> ValueError:
    places = origin.at(list(first.values()))
    where = "; ".join(f"{cols.label(c)} (first {p})" for c, p in zip(first, places))
    return ValueError(f"missing or non-finite values (NaN/inf) in {origin.name}: {where}. "
                      "Drop or impute those rows")


def text_error(origin: Origin, cols: Columns, found: dict[str, tuple[int, object]],
               types: dict[str, str] | None = None) -> ValueError:
    """Non-numeric columns: ``found`` maps a column to (row, example value)."""
    places = origin.at([r for r, _ in found.values()])
    types = types or {}
    parts = []
    for (c, (_, v)), p in zip(found.items(), places):
        what = [f"type {types[c]}"] if c in types else []
        shown = repr(v) if isinstance(v, str) else str(v)
        what += [f"e.g. {shown} {p}"] if v is not None else []
        parts.append(f"{cols.label(c)} ({', '.join(what)})")
    where = "; ".join(parts)
    return ValueError(f"non-numeric column(s) in {origin.name}: {where}. Inputs and the "
                      f"target must be numbers: encode these columns as numbers, or leave "
                      f"them out. {_leave_out([c for c in found if c != cols.target])}")


def _leave_out(names: list[str]) -> str:
    """How to leave columns out, or read them as categories, at each door."""
    if not names:
        return "Check the target column, or name another one"
    listed = ", ".join(repr(c) for c in names)
    return (f"Leave them out with --exclude {','.join(names)} on the command line "
            f"(exclude=[{listed}] in gpscale.fit and gpscale.io.open_source), or read them "
            f"as categories with --categorical {','.join(names)} (categorical=[{listed}]). "
            "A SMILES or sequence column can be the inputs: --smiles / --sequence COLUMN "
            "(gpscale.io.open_strings in Python)")
