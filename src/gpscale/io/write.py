"""Streaming column chunks to a CSV or Parquet file (or CSV on stdout).

Files are written through :func:`gpscale.files.atomic_path`: an interrupted or failed
write leaves an earlier file at the destination untouched and no temporary file behind.
Only one chunk is held at a time. CSV numbers are written by pyarrow in their shortest
form that reads back as the same float64.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv
import pyarrow.parquet as pq

from ..files import atomic_path, flush, write_all, write_error
from .paths import file_format

__all__ = ["write_table"]


def write_table(path: str | os.PathLike, chunks: Iterable[Mapping[str, Any]],
                columns: Sequence[str] | None = None) -> int:
    """Write ``chunks`` (each a mapping column name → 1-D numpy / pyarrow array of one
    length) to ``path``: CSV for ``.csv`` / ``.csv.gz``, Parquet (one row group per
    chunk) for ``.parquet`` / ``.pq``, CSV on stdout for ``-``. ``columns``: their order
    (default: the first chunk's). Returns the number of rows written."""
    path = os.fspath(path)
    fmt = "csv" if path == "-" else file_format(path)
    if fmt is None:
        raise ValueError(f"cannot tell the format of {path!r} from its extension; name it "
                         ".csv, .csv.gz, .parquet or .pq (or - for CSV on stdout)")
    tables = _tables(chunks, columns)
    if path == "-":
        return _csv_to_stream(tables)
    with atomic_path(path) as tmp:
        if fmt == "parquet":
            return _parquet(str(tmp), tables, path)
        return _csv_to_file(str(tmp), tables, path, gzip=path.lower().endswith(".gz"))


def _array(v: Any, name: str, i: int) -> pa.Array:
    if isinstance(v, pa.ChunkedArray):
        return v.combine_chunks()
    if isinstance(v, pa.Array):
        return v
    if hasattr(v, "detach"):  # torch
        v = v.detach().cpu().numpy()
    a = np.asarray(v)
    if a.ndim != 1:
        raise ValueError(f"chunk {i}: column {name!r} must be 1-D; got shape {a.shape}")
    return pa.array(a)


def _tables(chunks: Iterable[Mapping[str, Any]], columns: Sequence[str] | None
            ) -> Iterator[pa.Table]:
    names = None if columns is None else list(columns)
    schema = None
    for i, chunk in enumerate(chunks):
        names = list(chunk) if names is None else names
        if set(chunk) != set(names):
            raise ValueError(f"chunk {i} has columns {sorted(chunk)}, but the table has "
                             f"{names}")
        arrays = [_array(chunk[c], c, i) for c in names]
        lengths = {c: len(a) for c, a in zip(names, arrays)}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"chunk {i}: columns of different lengths {lengths}")
        table = pa.Table.from_arrays(arrays, names=names)
        if schema is None:
            schema = table.schema
        elif table.schema != schema:
            try:
                table = table.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise ValueError(f"chunk {i}: column types {table.schema.types} differ from "
                                 f"the first chunk's {schema.types} ({err})") from None
        yield table
    if schema is None:  # no chunks: an empty table (float64 columns)
        if not names:
            raise ValueError("nothing to write: no chunks and no column names")
        yield pa.table({c: pa.array([], pa.float64()) for c in names})


def _csv_bytes(table: pa.Table, header: bool) -> bytes:
    """One chunk as CSV text. Names and text values are quoted only where they must be (a
    comma, quote or line break inside), so ids and labels come out as written. A plain
    header line is written here rather than by pyarrow, whose option to leave names
    unquoted (``quoting_header``) is new in pyarrow 22."""
    names = table.schema.names
    plain = all(not any(ch in n for ch in ',"\r\n') for n in names)
    quote = any(_needs_quotes(col) for col in table.columns)
    buf = io.BytesIO()
    if header and plain:
        buf.write((",".join(names) + "\n").encode())
    pv.write_csv(table, buf, write_options=pv.WriteOptions(
        include_header=header and not plain, quoting_style="needed" if quote else "none"))
    return buf.getvalue()


def _needs_quotes(col: pa.ChunkedArray) -> bool:
    t = col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_dictionary(t)):
        return False
    text = pc.cast(col, pa.large_string()) if not pa.types.is_string(t) else col
    return bool(pc.any(pc.match_substring_regex(text, '[,"\r\n]')).as_py())


def _csv_to_file(tmp: str, tables: Iterator[pa.Table], path: str, gzip: bool) -> int:
    rows = 0
    sink: Any = pa.OSFile(tmp, "wb")
    if gzip:
        sink = pa.CompressedOutputStream(sink, "gzip")
    try:
        for i, t in enumerate(tables):
            data = _csv_bytes(t, i == 0)
            with _writing(path):
                sink.write(data)
            rows += t.num_rows
    finally:
        with _writing(path):
            sink.close()
    return rows


@contextmanager
def _writing(path: str) -> Iterator[None]:
    """A failed write to ``path`` (a full disk) as an OSError that names the file and
    says the output is incomplete: pyarrow's own words name neither."""
    try:
        yield
    except OSError as err:
        raise write_error(err, repr(path)) from None


def _csv_to_stream(tables: Iterator[pa.Table]) -> int:
    """CSV on standard output, every byte of it: under ``python -u`` its binary layer
    is a raw stream that may take part of a chunk (a disk filling up behind ``>``), so
    :func:`~gpscale.files.write_all` loops on short writes and a failure is an OSError,
    never a truncated output reported as written."""
    sys.stdout.flush()  # text already written goes first
    out = getattr(sys.stdout, "buffer", None)
    rows = 0
    for i, t in enumerate(tables):
        data = _csv_bytes(t, i == 0)
        if out is not None:
            write_all(out, data, "standard output")
        else:
            sys.stdout.write(data.decode())
        rows += t.num_rows
    flush(out if out is not None else sys.stdout, "standard output")
    return rows


def _parquet(tmp: str, tables: Iterator[pa.Table], path: str) -> int:
    rows = 0
    writer = None
    try:
        for t in tables:
            with _writing(path):
                if writer is None:
                    writer = pq.ParquetWriter(tmp, t.schema)
                writer.write_table(t)
            rows += t.num_rows
    finally:
        if writer is not None:
            with _writing(path):
                writer.close()
    return rows
