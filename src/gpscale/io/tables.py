"""Opening a table for training: each input column's kind from its type (a file's
schema, a data frame's dtypes), then the survey pass that learns the encoding
(:mod:`gpscale.io.survey`), before any method is chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from .batch import Columns, Partition
from .csvfile import CsvHeader, not_utf8
from .encoding import ColumnCode, TableEncoding, column_kind
from .survey import learn_encoding, survey

__all__ = ["file_kinds", "frame_kinds", "learn_columns", "check_categorical"]


def check_categorical(categorical: Sequence[str], cols: Columns, where: str) -> list[str]:
    """``categorical`` as a list of input columns; ValueError for a name that is not one."""
    names = [categorical] if isinstance(categorical, str) else list(categorical)
    bad = [c for c in names if c not in cols.features]
    if bad:
        raise ValueError(f"categorical: column(s) {bad} are not inputs of {where}; the "
                         f"inputs are {list(cols.features)}")
    return names


def file_kinds(headers: Sequence[Any], cols: Columns, categorical: Sequence[str],
               paths: Sequence[str] = ()) -> TableEncoding:
    """The kinds of the input columns of files, from the first file's schema (CSV: the
    types pyarrow infers from its first block, and a few values); a column with no
    value there takes its kind from the first of the other ``headers`` (``paths``) that
    has one, so that the files after it are not read as numbers."""
    codes = []
    for c in cols.features:
        i = next((i for i, h in enumerate(headers) if not pa.types.is_null(h.types[c])), 0)
        h, t = headers[i], headers[i].types[c]
        sample = getattr(h, "sample", {}).get(c, ())
        if isinstance(h, CsvHeader) and pa.types.is_binary(t):  # pyarrow's invalid UTF-8
            path = paths[i] if i < len(paths) else "the file"
            raise ValueError(not_utf8(path, c, next((v for v in sample if v), None)))
        codes.append(ColumnCode(c, column_kind(c, t, sample, c in categorical)))
    return TableEncoding(tuple(codes), learned=False)


def frame_kinds(dtypes: Any, sample: Callable[[str], list], cols: Columns,
                categorical: Sequence[str]) -> TableEncoding:
    """The kinds of the input columns of a pandas or dask data frame, from its dtypes;
    ``sample(column)``: some of a text column's values (to tell dates)."""
    codes = []
    for c in cols.features:
        dt = dtypes[c]
        kind = dt.kind if hasattr(dt, "kind") else "O"
        if dt.name == "category":
            t: pa.DataType = pa.dictionary(pa.int32(), pa.string())
        elif kind in "biuf":
            t = pa.float64()
        elif kind == "M":
            t = pa.timestamp("ns")
        elif kind in "OU" or dt.name.startswith("str"):
            t = pa.string()
        else:
            t = pa.null() if dt.name == "null" else pa.binary()
        strings = sample(c) if t == pa.string() else []
        codes.append(ColumnCode(c, column_kind(c, t, strings, c in categorical)))
    return TableEncoding(tuple(codes), learned=False)


def learn_columns(cols: Columns, kinds: TableEncoding, build: Callable[[Columns], list],
                  where: str, client: Any = None, cycles: Sequence[str] = (),
                  chosen: Sequence[str] = ()) -> tuple[Columns, list[int], int]:
    """The columns with their learned encoding (None when the inputs are plain numbers),
    the rows each partition keeps (its rows whose target is there) and their total;
    ``cycles``: the periodic components of every date column (:mod:`gpscale.io.dates`),
    a ValueError when there is none; ``chosen``: the inputs the user named
    (:func:`gpscale.io.survey.learn_encoding`)."""
    if cycles:
        if not any(c.kind == "date" for c in kinds.codes):
            raise ValueError(f"date_features: {list(cycles)} asked for, but no input column "
                             f"of {where} holds dates (ISO text, date or timestamp values); "
                             f"the inputs are {list(cols.features)}")
        kinds = replace(kinds, codes=tuple(replace(c, periodic=tuple(cycles))
                                           if c.kind == "date" else c for c in kinds.codes))
    parts: list[Partition] = build(replace(cols, encoding=kinds))
    per = survey(parts, kinds, cols.target, client)
    merged = per[0]
    for p in per[1:]:
        merged = merged.merge(p)
    enc = learn_encoding(kinds, merged, where, chosen)
    kept = [p.rows - p.no_target for p in per]
    return replace(cols, encoding=None if enc.identity() else enc), kept, sum(kept)
