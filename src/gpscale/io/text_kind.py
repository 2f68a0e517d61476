"""What a text column holds, told from a sample of its values before any row is encoded:
dates, categories, or values that are neither as written and would silently become
categories (dates in a day/month order, numbers with separators or units).

A column is dates when most of its sampled values are ISO dates; the values that are
not are then named by the encoding pass (:func:`gpscale.io.dates.days`), so one typo is
an error that says where, never a date column turned into one-hot levels. Dates written
day or month first, and numbers written with a unit or thousands separators, are refused
with what to do: reading them as categories gives every value its own level and the
model nothing to interpolate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .dates import ISO_DATE

__all__ = ["text_kind", "TEXT_SHARE"]

#: the share of sampled values that decides what a text column holds
TEXT_SHARE = 0.5
#: numbers with a unit need this many distinct values in the sample: a few codes such as
#: '2wd' / '4wd' are categories
UNIT_DISTINCT = 5

_DAY_MONTH = re.compile(r"^\d{1,2}[/.-]\d{1,2}[/.-](\d{2}|\d{4})([ T]\d{1,2}:\d{2}.*)?$")
_YEAR_SLASH = re.compile(r"^\d{4}[/.]\d{1,2}[/.]\d{1,2}([ T]\d{1,2}:\d{2}.*)?$")
_SEPARATED = re.compile(r"^[+-]?\d{1,3}([, ]\d{3})+(\.\d+)?$")
_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")
_UNIT = re.compile(r"^[$€£]?\s*[+-]?\d+(\.\d+)?\s*(%|[^\W\d_][^\d]{0,11})$"
                   r"|^[$€£]\s*[+-]?\d+(\.\d+)?$")
_ORDINAL = re.compile(r"^\d+(st|nd|rd|th)$", re.IGNORECASE)  # '1st', '2nd': ranks, not units


def _share(pattern: re.Pattern, values: Sequence[str]) -> tuple[float, list[str]]:
    hits = [v for v in values if pattern.match(v)]
    return len(hits) / len(values), hits


def _refuse(name: str, what: str, examples: list[str], fix: str) -> ValueError:
    shown = ", ".join(repr(v) for v in examples[:3])
    return ValueError(
        f"column {name!r} holds {what} (e.g. {shown}), which gpscale would read as "
        f"text, one category per value: {fix}; or, if its values are categories, name it "
        f"with --categorical {name} (categorical=[{name!r}] in Python); or leave it out "
        f"with --exclude {name}")


def text_kind(name: str, values: Sequence[str]) -> str:
    """``"date"`` or ``"category"`` for a text column whose sampled, stripped, non-empty
    ``values`` are given; ValueError for dates or numbers written in a form gpscale does
    not read (see the module docstring)."""
    if not values:
        return "category"
    if _share(ISO_DATE, values)[0] >= TEXT_SHARE:
        return "date"
    share, hits = _share(_DAY_MONTH, values)
    if share >= TEXT_SHARE:
        raise _refuse(name, "dates written day or month first", hits,
                      "gpscale does not guess which comes first; write them as ISO dates "
                      "(YYYY-MM-DD), e.g. pandas.to_datetime(column, dayfirst=True)"
                      ".dt.strftime('%Y-%m-%d')")
    share, hits = _share(_YEAR_SLASH, values)
    if share >= TEXT_SHARE:
        raise _refuse(name, "dates written with slashes or dots", hits,
                      "write them as ISO dates (YYYY-MM-DD)")
    share, hits = _share(_SEPARATED, values)
    if share >= TEXT_SHARE:
        raise _refuse(name, "numbers with thousands separators", hits,
                      "write them as plain numbers (1234.5, not 1,234.5)")
    share, hits = _share(_DECIMAL_COMMA, values)
    if share >= TEXT_SHARE:
        raise _refuse(name, "numbers with a decimal comma", hits,
                      "write them with a decimal point (12.5, not 12,5)")
    hits = [v for v in _share(_UNIT, values)[1] if not _ORDINAL.match(v)]
    if len(hits) >= TEXT_SHARE * len(values) and len(set(hits)) >= UNIT_DISTINCT:
        raise _refuse(name, "numbers written with a unit or currency sign", hits,
                      "write them as plain numbers in one unit, the unit in the column's "
                      "name (weight_kg: 12)")
    return "category"
