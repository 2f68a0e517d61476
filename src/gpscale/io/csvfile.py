"""CSV files, read by pyarrow's streaming reader (``pyarrow.csv.open_csv``) with column
projection: one partition per file.

Memory is bounded by the reader's block size (several blocks in flight) plus one chunk
(two while it is assembled), never by the file. Numbers may be surrounded by spaces;
header names are stripped of spaces. Empty cells and the usual markers (NA, N/A, null,
None, NaN, ...) are missing values. A file's number of rows is not stored anywhere, so
:attr:`CsvPartition.num_rows` costs one pass (then it is cached). When pyarrow refuses a
file, the file is read again (as text, on that error path only) to name the column, the
value and the line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pv

from .batch import Batch, Columns, Origin, Partition, arrow_batch, rechunk, text_error
from .csvlines import is_gzip, lines_of_rows, text_rows
from .fingerprint import Fingerprint

__all__ = ["CsvHeader", "CsvPartition", "read_header", "lines_of_rows", "not_utf8"]

NULL_VALUES = [*pv.ConvertOptions().null_values, "None", "none", "NONE", "na", "Null"]
#: reader block sizes (bytes): a larger block costs memory (pyarrow keeps several in
#: flight) and does not read faster; the first block of a file is probed with a smaller one
_BLOCK, _PROBE_BLOCK, _MAX_BLOCK = 1 << 20, 1 << 18, 256 << 20
#: on the error path, rows beyond this are reported as data rows, not scanned for lines


@dataclass(frozen=True)
class CsvHeader:
    """Column names (stripped of spaces), the names as written, and whether the file has
    at least one data row."""

    names: tuple[str, ...]
    raw: tuple[str, ...]
    has_rows: bool
    block: int = 0  # a block size (bytes) that held the first rows
    stamp: Fingerprint | None = None  # the file when its header was read
    #: each column's type as pyarrow infers it from the first block, and a few values
    types: dict[str, pa.DataType] = field(default_factory=dict)
    sample: dict[str, list] = field(default_factory=dict)


def read_header(path: str) -> CsvHeader:
    """The header of a CSV file (reads its first block only), and its fingerprint."""
    stamp = Fingerprint.of(path)
    block, multiline = _PROBE_BLOCK, False
    while True:
        try:
            reader = pv.open_csv(_input(path),
                                 read_options=pv.ReadOptions(block_size=block,
                                                             use_threads=False),
                                 parse_options=pv.ParseOptions(newlines_in_values=multiline),
                                 convert_options=pv.ConvertOptions(null_values=NULL_VALUES))
            raw = tuple(reader.schema.names)
            try:
                first = reader.read_next_batch()
            except StopIteration:
                first = None
            has_rows = first is not None and first.num_rows > 0
            break
        except pa.ArrowInvalid as err:
            if "newlines_in_values" in str(err) and not multiline:
                multiline = True
            elif "straddl" in str(err) and block < _MAX_BLOCK:  # a row longer than a block
                block *= 4
            else:
                raise _diagnose(path, err) from None
        except UnicodeDecodeError as err:
            raise ValueError(f"could not read {path!r} as a CSV file (not UTF-8 text: {err})"
                             ) from None
    names = tuple(h.strip() for h in raw)
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes or "" in names:
        raise ValueError(f"{path!r}: column names must be unique and non-empty "
                         f"(duplicated: {dupes}{', and an empty name' if '' in names else ''})")
    types = {n: t for n, t in zip(names, reader.schema.types)}
    sample = {n: first.column(i).slice(0, 64).to_pylist() if first is not None else []
              for i, n in enumerate(names)}
    return CsvHeader(names, raw, has_rows, block, stamp, types, sample)


def _input(path: str) -> str | pa.NativeFile:
    """What pyarrow's CSV reader opens: the path (pyarrow decompresses ``.gz`` and other
    compressed names by their extension), or a gzip stream for gzip data under a name
    such as ``.csv`` (told by its first bytes), which the reader would otherwise parse
    as text."""
    if is_gzip(path) and not path.lower().endswith(".gz"):
        return pa.input_stream(path, compression="gzip")
    return path


@dataclass(eq=False, repr=False)
class CsvPartition(Partition):
    """One CSV file: ``raw`` maps each column name in ``cols`` to the name as written;
    ``block``: the reader's block size in bytes (it must hold the longest row);
    ``stamp``: the file's fingerprint when the source was opened, checked before and after
    every read (:class:`~gpscale.io.fingerprint.SourceChangedError`)."""

    path: str
    cols: Columns
    raw: dict[str, str]
    block: int = _BLOCK
    stamp: Fingerprint | None = None
    _rows: int | None = None
    #: number columns the file writes as true/false (read as booleans, then 0/1, as a
    #: Parquet boolean column is)
    booleans: tuple[str, ...] = ()

    @property
    def origin(self) -> Origin:
        return Origin(repr(self.path), 0, "line", self.path)

    @property
    def num_rows(self) -> int:
        if self._rows is None:
            first = self.raw[self.cols.all[0]]
            convert = pv.ConvertOptions(include_columns=[first],
                                        column_types={first: pa.string()})
            self._rows = sum(b.num_rows for b in self._stream(convert))
        return self._rows

    def known_rows(self) -> int | None:
        return self._rows

    def batches(self, rows: int) -> Iterator[Batch]:
        yield from rechunk(self._converted(rows), rows)

    def _converted(self, rows: int) -> Iterator[Batch]:
        done = 0
        for rb in self.tables():
            yield arrow_batch(rb, self.cols, self.origin.shifted(done))
            done += rb.num_rows

    def tables(self, rows: int = 0) -> Iterator[pa.RecordBatch]:
        """The file's columns of ``cols`` as Arrow record batches (of the reader's block
        size, whatever ``rows``), as read: numbers as
        float64, the other columns as strings (missing values null)."""
        shown = {r: c for c, r in self.raw.items()}
        done = 0
        for rb in self._stream(self._convert(text=False)):
            yield rb.rename_columns([shown[n] for n in rb.schema.names])
            done += rb.num_rows
        if self.cols.encoding is None or self.cols.encoding.dropped == 0:
            self._rows = done  # (rows whose target is missing are not counted)

    def _convert(self, text: bool) -> pv.ConvertOptions:
        numeric = {self.raw[c]: pa.string() if text else
                   pa.bool_() if c in self.booleans else pa.float64()
                   for c in self.cols.numeric}
        other = {self.raw[k]: pa.string() for k in self.cols.all if k not in self.cols.numeric}
        return pv.ConvertOptions(include_columns=[self.raw[c] for c in self.cols.all],
                                 column_types={**numeric, **other}, null_values=NULL_VALUES,
                                 strings_can_be_null=text or self.cols.encoding is not None)

    def _stream(self, convert: pv.ConvertOptions) -> Iterator[pa.RecordBatch]:
        """Record batches. A quoted field spanning lines, or a row longer than the block,
        restarts the read after the rows already given, with the slower parser that
        allows newlines in values, or a larger block."""
        block, done, multiline = self.block, 0, False
        self._check_unchanged()
        while True:
            try:
                reader = pv.open_csv(
                    _input(self.path), convert_options=convert,
                    read_options=pv.ReadOptions(block_size=block, skip_rows_after_names=done),
                    parse_options=pv.ParseOptions(newlines_in_values=multiline))
                for rb in reader:
                    done += rb.num_rows
                    yield rb
                self._check_unchanged()  # replaced while this pass read it
                return
            except pa.ArrowInvalid as err:
                self._check_unchanged()  # a file rewritten under the reader
                if "newlines_in_values" in str(err) and not multiline:
                    multiline = True
                elif "straddl" in str(err) and block < _MAX_BLOCK:
                    block *= 4
                else:
                    raise _diagnose(self.path, err, self) from None

    def _check_unchanged(self) -> None:
        if self.stamp is not None:
            self.stamp.check(self.path)

    def _first_text(self) -> dict[str, tuple[int, object]]:
        """Per numeric column, the first cell pyarrow cannot read as a number (within the
        first block that has any): {name: (row, value)}."""
        done = 0
        for rb in self._stream(self._convert(text=True)):
            found = {}
            for c in self.cols.numeric:
                col = rb.column(self.raw[c])
                i = _first_unparsable(col)
                if i is not None:
                    found[c] = (done + i, col[i].as_py())
            if found:
                return found
            done += rb.num_rows
        return {}


def _first_unparsable(col: pa.Array) -> int | None:
    """Index of the first string of ``col`` that does not parse as a float (bisection
    over pyarrow casts; nulls are fine)."""
    col = pc.utf8_trim_whitespace(col)

    def parses(a: pa.Array) -> bool:
        try:
            pc.cast(a, pa.float64())
            return True
        except pa.ArrowInvalid:
            return False

    if parses(col):
        return None
    lo, hi = 0, len(col)  # the first bad index is in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if parses(col.slice(lo, mid - lo)):
            lo = mid
        else:
            hi = mid
    return lo


def _diagnose(path: str, err: Exception, part: CsvPartition | None = None) -> ValueError:
    """A message naming what is wrong where, for pyarrow's error ``err`` on ``path``."""
    msg = str(err)
    if "Empty CSV file" in msg:
        return ValueError(f"{path!r} is empty; expected a header row of column names")
    if re.search(r"Expected \d+ columns, got \d+", msg):
        bad = _ragged_row(path)
        if bad is not None:
            line, got, width = bad
            return ValueError(f"{path!r} line {line}: {got} fields, but the header has "
                              f"{width}")
    if "invalid UTF8" in msg:
        return ValueError(not_utf8(path))
    if "conversion error" in msg and part is not None:
        found = part._first_text()
        if found:
            return text_error(part.origin, part.cols, found)
    return ValueError(f"could not read {path!r} as a CSV file ({msg})")


def not_utf8(path: str, column: str | None = None, example: object = None) -> str:
    """What to do with a CSV file whose text is not UTF-8."""
    shown = ""
    if isinstance(example, bytes):
        shown = f" (e.g. {example!r}, {example.decode('latin-1')!r} in Latin-1)"
    where = f"column {column!r} of {path!r}" if column else repr(path)
    return (f"{where} holds text that is not UTF-8{shown}: the file is in another encoding, "
            f"Latin-1 or Windows-1252 perhaps. Convert it to UTF-8, e.g. iconv -f latin1 -t "
            f"utf-8 old.csv > new.csv, or pandas.read_csv(path, encoding='latin-1')"
            f".to_csv(new_path, index=False)")


# -- the error path: the file read again as text, row by row --------------------------------
def _ragged_row(path: str) -> tuple[int, int, int] | None:
    """(line, fields, header fields) of the first row whose length differs."""
    width = None
    try:
        for line, r in text_rows(path, header=True):
            if width is None:
                width = len(r)
            elif len(r) != width:
                return line, len(r), width
    except csv.Error:  # e.g. a field longer than the csv module accepts
        pass
    return None
