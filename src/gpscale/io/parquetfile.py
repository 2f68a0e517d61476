"""Parquet files, read with ``pyarrow.parquet``: one partition per row group.

A row group is the unit a Parquet reader decodes, so it is the natural piece to ship to
a worker; its number of rows, the file's schema and its column types come from the
file's footer without reading any data. Pages are streamed through a small buffer, so
memory while reading is bounded by the buffers and one chunk, not by the row group.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from .batch import Batch, Columns, Origin, Partition, arrow_batch, numeric_type, rechunk, text_error
from .fingerprint import Fingerprint

__all__ = ["ParquetInfo", "ParquetPartition", "read_info", "first_values"]

#: bytes read at a time from a column chunk (pages are streamed, not the whole chunk)
_BUFFER = 1 << 20


@dataclass(frozen=True)
class ParquetInfo:
    """A file's column names and types, the number of rows of each row group, and its
    fingerprint (:class:`~gpscale.io.fingerprint.Fingerprint`) when it was read."""

    names: tuple[str, ...]
    types: dict[str, pa.DataType]
    group_rows: tuple[int, ...]
    stamp: Fingerprint | None = None
    #: a few values of the text columns (to tell dates among strings)
    sample: dict[str, list] = field(default_factory=dict)


def read_info(path: str) -> ParquetInfo:
    """Schema, row-group sizes and fingerprint from the footer of ``path``."""
    try:
        before = Fingerprint.of(path)  # taken first: a later change shows up as a difference
        f = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"could not read {path!r} as a Parquet file ({err})") from None
    schema = f.schema_arrow
    meta = f.metadata
    names = tuple(schema.names)
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        raise ValueError(f"{path!r}: column names must be unique (duplicated: {dupes})")
    return ParquetInfo(names, {n: schema.field(n).type for n in names},
                       tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups)),
                       Fingerprint(before.size, before.mtime_ns, int(meta.num_rows)))


def first_values(path: str, names: Sequence[str], n: int = 64) -> dict[str, list]:
    """The first ``n`` values of each text column among ``names`` (others: none)."""
    f = pq.ParquetFile(path)
    text = [c for c in names if pa.types.is_string(f.schema_arrow.field(c).type)
            or pa.types.is_large_string(f.schema_arrow.field(c).type)]
    if not text or f.metadata.num_rows == 0:
        return {}
    rb = next(f.iter_batches(batch_size=n, columns=text))
    return {c: rb.column(c).to_pylist() for c in text}


def example_values(path: str, names: list[str]) -> dict[str, tuple[int, object]]:
    """The first non-null value (row, value) of each column in ``names``."""
    out: dict[str, tuple[int, object]] = {}
    done = 0
    for rb in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=names):
        for c in names:
            if c in out:
                continue
            col = rb.column(c)
            if col.null_count < len(col):
                i = next(i for i, v in enumerate(col.is_valid().to_pylist()) if v)
                out[c] = (done + i, col[i].as_py())
        done += rb.num_rows
        if len(out) == len(names):
            break
    return out


def check_types(path: str, info: ParquetInfo, cols: Columns) -> None:
    """ValueError naming the columns of ``cols`` that are not numeric."""
    bad = [c for c in cols.numeric if not numeric_type(info.types[c])]
    if bad:
        found = example_values(path, bad)
        found = {c: found.get(c, (0, None)) for c in bad}
        raise text_error(Origin(repr(path)), cols, found,
                         {c: str(info.types[c]) for c in bad})


@dataclass(eq=False, repr=False)
class ParquetPartition(Partition):
    """Row group ``group`` of ``path``; ``offset`` rows of the file come before it.
    ``stamp``: the file's fingerprint when the source was opened; every read checks the
    file against it before and after (:class:`~gpscale.io.fingerprint.SourceChangedError`)."""

    path: str
    group: int
    offset: int
    rows: int
    cols: Columns
    stamp: Fingerprint | None = None

    @property
    def origin(self) -> Origin:
        return Origin(repr(self.path), self.offset, "row")

    @property
    def num_rows(self) -> int:
        return self.rows

    def batches(self, rows: int) -> Iterator[Batch]:
        yield from rechunk(self._converted(rows), rows)

    def _converted(self, rows: int) -> Iterator[Batch]:
        done = 0
        for rb in self.tables(rows):
            yield arrow_batch(rb, self.cols, self.origin.shifted(done))
            done += rb.num_rows

    def tables(self, rows: int = 65_536) -> Iterator[pa.RecordBatch]:
        """The row group's columns of ``cols`` as Arrow record batches of their own types."""
        try:
            # unbuffered whole column chunks would cost the row group's size in memory
            f = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=_BUFFER)
            if self.stamp is not None:
                self.stamp.check(self.path, int(f.metadata.num_rows))
            yield from f.iter_batches(batch_size=rows, row_groups=[self.group],
                                      columns=list(self.cols.all))
        except (pa.ArrowInvalid, OSError) as err:
            if self.stamp is not None:
                self.stamp.check(self.path)  # a file rewritten under the reader
            raise ValueError(f"could not read row group {self.group} of {self.path!r} "
                             f"({err})") from None
        if self.stamp is not None:
            self.stamp.check(self.path)  # replaced while this pass read it
