"""Tables as they come: how each input column of a table becomes columns of X.

Every input column has a kind, told from its type before any row is read
(:func:`column_kind`):

- ``number``: integers, floats, booleans. Missing values (null or NaN) in training are
  filled with the training mean, which standardises to 0, and a 0/1 column
  ``NAME (missing)`` says which rows were filled;
- ``category``: strings (trimmed), pandas ``category`` and Arrow dictionary columns, and
  integer columns named in ``categorical=``. Each level of the rows with a target is a
  0/1 column ``NAME=LEVEL`` (one-hot, left unstandardised); a missing value is a level
  of its own, the last column ``NAME (missing)``, distinct from any level's value (a
  level may be the text "(missing)");
- ``date``: Arrow date / timestamp types, pandas ``datetime64`` and text whose sampled
  values are mostly ISO dates (:mod:`.text_kind`, which also refuses dates and numbers
  written in forms gpscale does not read): days since the first training date, then as a
  number, followed by the sin / cos pairs of the periodic components asked for
  (``date_features=``, :mod:`.dates`); a missing date in training is the training mean
  date in all of them, marked like a number's.

What training never saw is not filled at prediction: a missing value in a column that
had none in training, and a level never seen in training (or a missing category where
training had none), are gaps, NaN in X, with a warning; the predictor integrates over
what they could be (:mod:`.gaps`), so their intervals are wide where the model does not
know.

The levels, means and first date are learned by one pass over the rows
(:mod:`gpscale.io.survey`); a :class:`TableEncoding` holds them, is saved with the model
(``Predictor.inputs``) and encodes new rows the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch import Batch, Columns, Origin, check_finite, float_column, numeric_type
from .dates import days, periodic, periodic_names
from .text_kind import text_kind

__all__ = ["ColumnCode", "TableEncoding", "column_kind", "KINDS", "MISSING_LEVEL",
           "UnseenLevelWarning"]

KINDS = ("number", "category", "date")
#: the level that older model files (without an encoding ``version``) listed last for a
#: categorical column's missing values
MISSING_LEVEL = "(missing)"
#: the saved encoding's version: 2 keeps a category's missing level out of its levels,
#: 3 adds a date column's periodic components
VERSION = 3
#: string values checked before a string column is taken for dates
DATE_SAMPLE = 64


class UnseenLevelWarning(UserWarning):
    """Prediction inputs hold a category level, or a missing value, of a kind the model
    never saw in training; those rows are predicted over what the value could be
    (:mod:`gpscale.io.gaps`)."""


def column_kind(name: str, t: pa.DataType, sample: Sequence[Any] = (),
                categorical: bool = False) -> str:
    """The kind of a column of Arrow type ``t``; ``sample``: some of its values (strings
    are dates when every sampled one is ISO); ``categorical``: the user named it."""
    if pa.types.is_dictionary(t):
        return "category"
    if categorical:
        if numeric_type(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
            return "category"
        raise ValueError(f"column {name!r} (type {t}) cannot be categorical: only integer "
                         "codes and strings can")
    if numeric_type(t):
        return "number"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "date"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        values = [v.strip() for v in sample if isinstance(v, str) and v.strip()]
        return text_kind(name, values[:DATE_SAMPLE])
    raise ValueError(f"column {name!r} has type {t}, which gpscale cannot use as an input "
                     f"(numbers, strings, categories and dates are); leave it out with "
                     f"--exclude {name} (exclude=[{name!r}] in Python)")


@dataclass(frozen=True)
class ColumnCode:
    """One input column: its ``kind``; a number or date column's training ``mean`` (for
    dates in days since ``origin``) and whether it had ``missing`` values (then an
    indicator column ends its block: for a category, the missing level's one-hot column
    after those of its ``levels``, sorted); a date column's ``origin``, the first training
    date in days since 1970-01-01, and its ``periodic`` components (names of
    :data:`~gpscale.io.dates.PERIODS`: a sin and a cos column each, after the days)."""

    name: str
    kind: str
    mean: float = 0.0
    missing: bool = False
    levels: tuple[str, ...] = ()
    origin: float = 0.0
    periodic: tuple[str, ...] = ()

    @property
    def width(self) -> int:
        return len(self.names)

    @property
    def names(self) -> list[str]:
        given = ([f"{self.name}={level}" for level in self.levels]
                 if self.kind == "category" else
                 [self.name, *periodic_names(self.name, self.periodic)])
        return given + ([f"{self.name} (missing)"] if self.missing else [])

    @property
    def raw(self) -> list[int]:
        """Offsets of this column's 0/1 columns (left unstandardised)."""
        return (list(range(self.width)) if self.kind == "category"
                else [self.width - 1] * self.missing)

    def describe(self) -> str:
        if self.kind == "category":
            return (f"{self.name!r}: category, {len(self.levels)} levels one-hot"
                    + (f" and missing values a level of their own, "
                       f"{self.name + ' (missing)'!r}" if self.missing else ""))
        cycles = "".join(f", {p} sin/cos" for p in self.periodic)
        what = (f"date, days since {day_text(self.origin)}{cycles}" if self.kind == "date"
                else "number")
        fill = (f"; missing values filled with the training mean {self.mean:.6g} and "
                f"marked in {self.name + ' (missing)'!r}" if self.missing else "")
        return f"{self.name!r}: {what}{fill}"


def day_text(days: float) -> str:
    """A day count since 1970-01-01 as an ISO date (a time of day when it has one)."""
    return str(np.datetime64(int(round(days * 86_400)), "s")).replace("T00:00:00", "")


@dataclass(frozen=True)
class TableEncoding:
    """How a table's input columns become X (``codes``, in the order of X's blocks);
    ``dropped``: training rows left out because their target was missing."""

    codes: tuple[ColumnCode, ...]
    dropped: int = 0
    learned: bool = field(default=True, compare=False)

    @property
    def kind(self) -> str:
        return "table"

    @property
    def columns(self) -> list[str]:
        return [c.name for c in self.codes]

    @property
    def num_features(self) -> int:
        return sum(c.width for c in self.codes)

    @property
    def names(self) -> list[str]:
        """The names of X's columns (e.g. ``city=Austin``, ``budget (missing)``)."""
        return [n for c in self.codes for n in c.names]

    def raw_columns(self) -> list[int]:
        """X's 0/1 columns (one-hot levels, missing-value indicators): kept as they are
        by the scaler."""
        out, start = [], 0
        for c in self.codes:
            out += [start + j for j in c.raw]
            start += c.width
        return out

    def gap_columns(self) -> list[int]:
        """X's 0/1 columns marking a number or date missing in training (each such
        column's last), for :class:`gpscale.kernels.GapVariance`."""
        out, start = [], 0
        for c in self.codes:
            if c.kind != "category" and c.missing:
                out.append(start + c.width - 1)
            start += c.width
        return out

    def gap_blocks(self) -> list[tuple[list[int], int]]:
        """For each number or date column with gaps in training: (the columns of X
        holding its value, its 0/1 column), for :func:`gpscale.io.gaps.fill_gaps`."""
        out, start = [], 0
        for c in self.codes:
            if c.kind != "category" and c.missing:
                out.append((list(range(start, start + c.width - 1)), start + c.width - 1))
            start += c.width
        return out

    def category_blocks(self) -> list[list[int]]:
        """The columns of X holding each categorical column's one-hot block (for
        :func:`gpscale.kernels.mixed_kernel`)."""
        out, start = [], 0
        for c in self.codes:
            if c.kind == "category":
                out.append(list(range(start, start + c.width)))
            start += c.width
        return out

    def code(self, name: str) -> ColumnCode:
        return next(c for c in self.codes if c.name == name)

    def identity(self) -> bool:
        """Whether X is the columns themselves (every one a number without missing
        values, no row left out): then no encoding is needed."""
        return self.dropped == 0 and all(c.kind == "number" and not c.missing
                                         for c in self.codes)

    def describe(self) -> str:
        kinds = [c.kind for c in self.codes]
        counts = ", ".join(f"{kinds.count(k)} {k}" for k in KINDS if k in kinds)
        filled = sum(c.missing for c in self.codes if c.kind != "category")
        return (f"encoded from {len(self.codes)} table columns: {counts}"
                + (f"; {filled} with missing values filled" if filled else "")
                + (f"; {self.dropped} training row(s) left out, their target missing"
                   if self.dropped else ""))

    def lines(self) -> list[str]:
        """What was done to each column, one line each (the summary, ``gpscale info``;
        the rows left out are said by :meth:`describe`)."""
        return [c.describe() for c in self.codes]

    # -- encoding -------------------------------------------------------------------
    def batch(self, table: pa.RecordBatch | pa.Table, cols: Columns, origin: Origin) -> Batch:
        """The rows of ``table`` as a checked :class:`Batch` of encoded inputs; rows
        whose target is missing are left out. Values of a kind training never saw are
        NaN (module docstring); training rows have none, as the survey saw them all."""
        keep_rows = None
        y = None
        if cols.target is not None:
            y = float_column(table.column(cols.target))
            ok = ~np.isnan(y)
            if not ok.all():
                keep_rows = np.flatnonzero(ok)
                y = y[keep_rows]
        blocks = [self._encode(c, table.column(c.name), origin) for c in self.codes]
        X = np.concatenate(blocks, axis=1) if blocks else np.empty((table.num_rows, 0))
        keep = {k: _flat(table.column(k)) for k in cols.keep}
        if keep_rows is not None:
            X = np.ascontiguousarray(X[keep_rows])
            taken = pa.array(keep_rows)
            keep = {k: v.take(taken) for k, v in keep.items()}
        check_finite(np.nan_to_num(X, nan=0.0, posinf=np.inf, neginf=-np.inf), y,
                     Columns(tuple(self.names), cols.target), origin)  # NaN: a gap
        return Batch(np.ascontiguousarray(X), y, keep)

    def _encode(self, code: ColumnCode, col: Any, origin: Origin) -> np.ndarray:
        col = _flat(col)
        if code.kind == "category":
            return self._one_hot(code, col)
        v = days(col, code.name, origin) - code.origin if code.kind == "date" \
            else float_column(col)
        gap = np.isnan(v)
        if gap.any():
            if code.missing:
                v = np.where(gap, code.mean, v)
            else:  # left NaN in every column of the block: a gap
                warnings.warn(f"column {code.name!r} has {int(gap.sum())} missing value(s), "
                              f"which it had none of in training: those rows are predicted "
                              f"over the values of training rows like them (wider "
                              f"intervals)", UnseenLevelWarning, stacklevel=4)
        blocks = [v[:, None], periodic(v + code.origin, code.periodic)]
        return np.concatenate(blocks + [gap[:, None].astype(np.float64)] * code.missing,
                              axis=1)

    def _one_hot(self, code: ColumnCode, col: Any) -> np.ndarray:
        strings = as_strings(col)
        out = np.zeros((len(strings), code.width))
        index = pc.index_in(strings, value_set=pa.array(list(code.levels), pa.string()))
        idx = pc.fill_null(index, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        null = strings.is_null().to_numpy(zero_copy_only=False)
        if code.missing:
            idx[null] = len(code.levels)
        rows = np.flatnonzero(idx >= 0)
        out[rows, idx[rows]] = 1.0
        unseen = (idx < 0)
        if unseen.any():
            out[unseen] = np.nan  # a gap: the predictor mixes over the training levels
            found = sorted({str(s) for s in strings.filter(pa.array(unseen & ~null))
                            .to_pylist()})
            what = ([f"levels {found[:5]}{' ...' if len(found) > 5 else ''}"] if found
                    else []) + (["missing values"] if (unseen & null).any() else [])
            warnings.warn(f"column {code.name!r}: {' and '.join(what)} not seen in "
                          f"training ({int(unseen.sum())} row(s)): those rows are "
                          "predicted over the levels of training rows like them (wider "
                          "intervals)", UnseenLevelWarning, stacklevel=4)
        return out

    # -- saving ---------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"kind": "table", "dropped": self.dropped, "version": VERSION,
                "codes": [{**asdict(c), "levels": list(c.levels),
                           "periodic": list(c.periodic)} for c in self.codes]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TableEncoding:
        if state.get("version", 1) > VERSION:
            raise ValueError(f"the model's table encoding is version {state['version']}; "
                             f"this gpscale reads versions 1 to {VERSION}: upgrade gpscale")
        codes = tuple(ColumnCode(**{**c, "levels": tuple(c["levels"]),
                                    "periodic": tuple(c.get("periodic", ()))})
                      for c in state["codes"])
        if state.get("version", 1) < 2:  # the missing level was listed among the levels
            codes = tuple(replace(c, levels=c.levels[:-1], missing=True)
                          if c.kind == "category" and c.levels[-1:] == (MISSING_LEVEL,)
                          else c for c in codes)
        bad = [c.name for c in codes if c.kind not in KINDS]
        if bad:
            raise ValueError(f"unknown column kind for {bad}")
        return cls(codes, int(state.get("dropped", 0)))

    def with_codes(self, codes: Sequence[ColumnCode], dropped: int) -> TableEncoding:
        return replace(self, codes=tuple(codes), dropped=int(dropped), learned=True)


def _flat(col: Any) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def as_strings(col: Any) -> pa.Array:
    """A categorical column's values as strings (dictionary columns decoded; integer
    codes as their digits), without leading or trailing white space."""
    col = _flat(col)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_floating(col.type):  # integer codes held as floats (pandas with NaN)
        v = float_column(col)
        whole = np.isnan(v) | (v == np.round(v))
        if whole.all():
            col = pc.cast(pa.array(np.where(np.isnan(v), 0, v).astype(np.int64),
                                   mask=np.isnan(v)), pa.string())
    if col.type != pa.string():
        col = pc.cast(col, pa.string())
    return pc.utf8_trim_whitespace(col)  # ' b' is 'b', as numbers and dates are read
