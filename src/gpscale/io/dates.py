"""Date columns: ISO text, Arrow date / timestamp values as days, and the periodic
components a date column may add (``date_features=``, ``--date-features``).

A date column is always its time, in days since the first training date (the trend).
``yearly`` adds the pair

    sin(2π·a/365.25), cos(2π·a/365.25),  a = days since 1 January of the date's year,

and ``weekly`` the pair sin(2π·w/7), cos(2π·w/7), w = days since the Monday before
(w = 0 on a Monday at 00:00); a and w keep a date-time's time of day as a fraction. On
the circle a stationary kernel sees 31 December next to 1 January and Sunday next to
Monday, which the day count cannot tell it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch import Origin, float_column

__all__ = ["DATE_FEATURES", "PERIODS", "date_features", "days", "periodic",
           "periodic_names", "ISO_DATE"]

#: the periodic components a date column may add, and their periods in days
PERIODS = {"yearly": 365.25, "weekly": 7.0}
#: the values of ``date_features=``: ``days`` alone (the default) is the time only; the
#: yearly pair helped on seasonal data at random dates, not on a forecast or txhousing
#: (benchmarks/results/date-features/report.md)
DATE_FEATURES = ("days", *PERIODS)
#: an ISO 8601 date or date-time (what Arrow's timestamp cast parses)
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"
                      r"(Z|[+-]\d{2}:?\d{2})?)?$")
_DAY_UNITS = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000,
              "ns": 86_400_000_000_000}
#: 1970-01-01, day 0, was a Thursday: 3 days after a Monday
_EPOCH_WEEKDAY = 3


def date_features(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """``date_features=`` (``"days"``, ``"yearly"``, ``"weekly"``, several of them as a
    list or comma-separated, e.g. ``"yearly,weekly"``) as the periodic components, in
    the order of :data:`PERIODS`; ValueError naming a value that is none of them."""
    if value is None:
        return ()
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [str(n).strip().lower() for n in names]
    bad = [n for n in names if n not in DATE_FEATURES]
    if bad or not names:
        raise ValueError(f"date_features: {bad or value!r} is not one of "
                         f"{list(DATE_FEATURES)}; give one or several, e.g. "
                         "--date-features days,yearly (date_features='days,yearly')")
    return tuple(p for p in PERIODS if p in names)


def periodic_names(name: str, components: Sequence[str]) -> list[str]:
    """The names of a date column's periodic columns, e.g. ``sold (yearly sin)``."""
    return [f"{name} ({p} {f})" for p in components for f in ("sin", "cos")]


def periodic(t: np.ndarray, components: Sequence[str]) -> np.ndarray:
    """The (n, 2·len(components)) sin/cos columns of dates ``t`` in days since
    1970-01-01 (see the module docstring for the phases)."""
    out = np.empty((len(t), 2 * len(components)))
    for j, p in enumerate(components):
        if p == "yearly":
            whole = np.floor(t).astype("datetime64[D]")
            start = whole.astype("datetime64[Y]").astype("datetime64[D]")
            phase = (whole - start).astype(np.float64) + (t - np.floor(t))
        else:
            phase = np.mod(t + _EPOCH_WEEKDAY, 7.0)
        angle = 2 * np.pi * phase / PERIODS[p]
        out[:, 2 * j], out[:, 2 * j + 1] = np.sin(angle), np.cos(angle)
    return out


#: how ISO text is read: without a zone, or (ending 'Z' or '+02:00') as the UTC instant,
#: as a Parquet timestamp with a time zone is stored
_STAMPS = (pa.timestamp("ns"), pa.timestamp("ns", tz="UTC"))


def _cast(col: pa.Array) -> pa.Array:
    """ISO text as timestamps, every value with a zone or every value without one;
    ArrowInvalid otherwise."""
    try:
        return pc.cast(col, _STAMPS[0])
    except pa.ArrowInvalid:
        return pc.cast(col, _STAMPS[1])


def _parses(text: str) -> bool:
    try:
        _cast(pa.array([text]))
    except pa.ArrowInvalid:
        return False
    return True


def days(col: Any, name: str, origin: Origin) -> np.ndarray:
    """A date column as float days since 1970-01-01 (NaN where missing); strings are
    parsed as ISO dates, and one that does not parse is a ValueError naming it."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.utf8_trim_whitespace(col)
        try:
            col = _cast(col)
        except pa.ArrowInvalid:
            values = col.to_pylist()
            bad = next((i for i, s in enumerate(values) if s is not None and not _parses(s)),
                       None)
            if bad is None:  # each parses: some with a zone and some without
                zoned = next(i for i, s in enumerate(values) if s is not None
                             and re.search(r"(Z|[+-]\d{2}:?\d{2})$", s))
                plain = next(i for i, s in enumerate(values) if s is not None
                             and not re.search(r"(Z|[+-]\d{2}:?\d{2})$", s))
                raise ValueError(
                    f"column {name!r} mixes date-times with a time zone "
                    f"({values[zoned]!r} {origin.at([zoned])[0]}) and without one "
                    f"({values[plain]!r} {origin.at([plain])[0]}) in {origin.name}: write "
                    f"them all in UTC ending 'Z', or all without a zone") from None
            raise ValueError(f"column {name!r} holds dates, but {col[bad].as_py()!r} "
                             f"{origin.at([bad])[0]} of {origin.name} is not an ISO date "
                             f"(YYYY-MM-DD[THH:MM:SS][Z or +HH:MM]): fix that value or "
                             f"leave it empty (a missing date), or train without the "
                             f"column (--exclude {name})") from None
    t = col.type
    if pa.types.is_date32(t):
        per_day, ints = 1, pc.cast(col, pa.int32())
    elif pa.types.is_date64(t):
        per_day, ints = _DAY_UNITS["ms"], pc.cast(col, pa.int64())
    elif pa.types.is_timestamp(t):
        per_day, ints = _DAY_UNITS[t.unit], pc.cast(col, pa.int64())
    else:
        return float_column(col)
    return float_column(ints) / per_day
