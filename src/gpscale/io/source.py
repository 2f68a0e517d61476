"""``open_source``: files, arrays, data frames or dask collections → one :class:`Source`
of ``(X, y)`` row chunks in a fixed order.

Columns. For files and data frames, the inputs are every column other than the target,
``exclude`` and ``keep``, unless ``columns`` names them. With a target (training rows),
the inputs may be numbers, categories, dates and have missing values: one pass learns
how they become X (:mod:`gpscale.io.encoding`), before anything else reads the rows, and
refuses the columns that cannot be inputs (ids, columns with no value). ``keep`` columns (e.g. ids)
are carried along unconverted in :meth:`Source.batches`, for copying into prediction
outputs. With ``target=None`` (prediction inputs) chunks yield ``(X, None)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from ..sizes import CHUNK_BYTES
from .batch import Batch, Columns, Origin, Partition, check_finite
from .csvfile import CsvPartition, read_header
from .daskdata import array_partitions, count_rows, frame_partitions, is_dask
from .dates import date_features as date_features_of
from .encoding import TableEncoding
from .memory import ArrayPartition, FramePartition, as_float_array, check_frame_types
from .parquetfile import ParquetPartition, check_types, first_values, read_info
from .paths import file_format, find_files
from .tables import check_categorical, file_kinds, frame_kinds, learn_columns

__all__ = ["CHUNK_BYTES", "Source", "open_source"]



class Source:
    """Rows of (X, y) from one or more partitions, always in the same order.

    ``chunks(rows)`` yields float64 ``X`` (m, d) C-contiguous and ``y`` (m,) (None
    without a target) with m = ``rows`` except at the end of each partition (chunks never
    span partitions). ``partitions()`` are picklable pieces to read elsewhere.
    """

    def __init__(self, parts: Sequence[Partition], cols: Columns, description: str,
                 feature_names: list[str] | None, target_name: str | None,
                 arrays: tuple[np.ndarray, np.ndarray | None] | None = None):
        self._parts = list(parts)
        self.columns = cols
        self.description = description
        self.feature_names = feature_names
        self.target_name = target_name
        self._arrays = arrays
        self._n: int | None = None
        #: how the inputs were made from a string column (:mod:`gpscale.io.inputs`) or a
        #: table's columns (:mod:`gpscale.io.encoding`), or None when they are the
        #: numeric columns themselves
        self.inputs: Any = cols.encoding

    @property
    def num_features(self) -> int:
        return self.columns.width

    @property
    def encoding(self) -> TableEncoding | None:
        """How the input columns become X (None: they are numbers, used as they are)."""
        return self.columns.encoding

    @property
    def has_target(self) -> bool:
        return self.columns.target is not None

    @property
    def keep_names(self) -> list[str]:
        return list(self.columns.keep)

    def partitions(self) -> list[Partition]:
        return list(self._parts)

    def default_rows(self) -> int:
        """Rows per chunk for about :data:`CHUNK_BYTES` of float64 X and y."""
        return max(1, CHUNK_BYTES // (8 * (self.num_features + 1)))

    def batches(self, rows: int | None = None) -> Iterator[Batch]:
        """:class:`Batch` objects (X, y and the ``keep`` columns) of every partition."""
        rows = self.default_rows() if rows is None else int(rows)
        if rows < 1:
            raise ValueError(f"rows must be a positive number of rows per chunk, got {rows}")
        total = 0
        for p in self._parts:
            for b in p.batches(rows):
                total += len(b)
                yield b
        if total == 0:
            raise ValueError(f"{self.description} has no data rows")
        self._n = total

    def chunks(self, rows: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """``(X, y)`` pairs of :meth:`batches`."""
        for b in self.batches(rows):
            yield b.X, b.y

    def num_rows(self) -> int:
        """Number of rows (for CSV files and dask data frames this costs a pass)."""
        if self._n is None:
            count_rows(self._parts)  # dask lengths in one computation
            self._n = sum(p.num_rows for p in self._parts)
        return self._n

    def memory_bytes(self) -> int:
        """Bytes that :meth:`to_arrays` holds: 8·n·(d + 1) (d without a target)."""
        return 8 * self.num_rows() * (self.num_features + int(self.has_target))

    def read_all(self) -> Batch:
        """Every row in one :class:`Batch` (arrays given in memory are not copied)."""
        if self._arrays is not None:
            X, y = self._arrays
            return Batch(np.ascontiguousarray(X), None if y is None else np.ascontiguousarray(y))
        known = [p.known_rows() for p in self._parts]
        if any(k is None for k in known) or self.encoding is not None:
            parts = list(self.batches())
            return Batch.concat(parts)
        n = sum(known)
        X = np.empty((n, self.num_features))
        y = np.empty(n) if self.has_target else None
        keep: dict[str, list[pa.Array]] = {k: [] for k in self.columns.keep}
        i = 0
        for b in self.batches(min(self.default_rows(), 1 << 16)):  # small: X holds them all
            X[i:i + len(b)] = b.X
            if y is not None:
                y[i:i + len(b)] = b.y
            for k, v in b.keep.items():
                keep[k].append(v)
            i += len(b)
        return Batch(X, y, {k: pa.concat_arrays(v) for k, v in keep.items()})

    def to_arrays(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(X, y) with every row; see :meth:`memory_bytes` for what that holds."""
        b = self.read_all()
        return b.X, b.y

    def __repr__(self) -> str:
        target = f", target {self.target_name!r}" if self.target_name else ""
        return (f"Source({self.description}: {self.num_features} inputs{target}, "
                f"{len(self._parts)} partition(s))")


# -- opening --------------------------------------------------------------------------------
def open_source(data: Any, target: str | None = None, columns: Sequence[str] | None = None,
                exclude: Sequence[str] = (), keep: Sequence[str] = (), *,
                categorical: Sequence[str] = (), date_features: str | Sequence[str] = "days",
                encoding: TableEncoding | None = None, partition_rows: int | None = None,
                client: Any = None) -> Source:
    """A :class:`Source` over ``data``:

    - a path, glob, directory (its ``.csv``/``.csv.gz``/``.parquet``/``.pq`` files, not
      sub-folders), or a list of them: one partition per CSV file and per Parquet row
      group;
    - an ``(X, y)`` pair (or X alone) of numpy arrays, torch tensors or pandas objects,
      in partitions of ``partition_rows`` rows (default: about 64 MiB);
    - a pandas DataFrame (columns chosen by ``target``, ``columns``, ``exclude``);
    - a ``dask.array`` pair ``(X, y)`` or a ``dask.dataframe``: one partition per block.

    ``keep`` names columns (of files and data frames) carried along unconverted.
    ``categorical`` names integer-coded input columns to read as categories (text,
    pandas ``category`` and Arrow dictionary columns are). ``date_features``: ``"days"``
    (the default: a date column is its time in days), or ``"yearly"``, ``"weekly"`` or
    both (e.g. ``"yearly,weekly"``): every date column adds their sin / cos columns too
    (:mod:`gpscale.io.dates`). ``encoding``: a trained
    model's (:class:`~gpscale.io.encoding.TableEncoding`), to read prediction inputs the
    way it read its training rows. ``client``: a ``distributed.Client`` whose workers
    run the survey pass of files and dask data frames (:mod:`gpscale.io.survey`; a
    pandas frame in memory is surveyed here, where it is).
    """
    cycles = date_features_of(date_features)
    if cycles and (encoding is not None or target is None):
        raise ValueError("date_features= is for training rows (with target=); a trained "
                         "model's encoding already says how its date columns are read")
    spec = (target, columns, exclude, keep, categorical, cycles, encoding)
    if _is_paths(data):
        return _files(find_files(data), *spec, client)
    if is_dask(data) and hasattr(data, "columns"):
        return _dask_frame(data, *spec, client)
    if type(data).__module__.split(".")[0] == "pandas" and hasattr(data, "columns"):
        return _frame(data, *spec, partition_rows)
    if not (isinstance(data, tuple) and len(data) == 2):
        if hasattr(data, "shape") and not hasattr(data, "columns"):
            data = (data, None)  # inputs only
        else:
            raise ValueError(
                "data must be a path, glob, directory or list of CSV / Parquet files, an "
                "(X, y) pair of arrays, a pandas DataFrame or a dask collection; got "
                f"{type(data).__name__}")
    if target is not None or columns is not None or exclude or keep or categorical:
        raise ValueError("target=, columns=, exclude=, keep= and categorical= name columns "
                         "of files and data frames; for arrays pass (X, y), or (X, None) "
                         "for inputs only")
    return _arrays(*data, partition_rows)


def _is_paths(data: Any) -> bool:
    if isinstance(data, (str, os.PathLike)):
        return True
    return (isinstance(data, (list, tuple)) and len(data) > 0
            and all(isinstance(d, (str, os.PathLike)) for d in data))


def _names(columns: Any, what: str) -> list[str]:
    names = list(columns)
    if not all(isinstance(c, str) for c in names):
        raise ValueError(f"the {what}'s column names must be strings; for unnamed columns "
                         "pass an (X, y) pair of arrays")
    dupes = sorted({c for c in names if names.count(c) > 1})
    if dupes:
        raise ValueError(f"the {what}'s column names must be unique (duplicated: {dupes})")
    return names


def _select(available: list[str], where: str, target: str | None,
            features: Sequence[str] | None, exclude: Sequence[str],
            keep: Sequence[str]) -> Columns:
    """(``features``: the ``columns=`` a user named.)"""
    """Which columns are inputs, target and kept; ValueError for names not there."""
    have = set(available)
    # a name holding a comma is quoted, as --columns / --exclude take it
    listing = ", ".join(f'"{c}"' if "," in c else c for c in available) + _delimiter(available)
    if target is not None and target not in have:
        raise ValueError(f"target column {target!r} is not in {where}; available columns: "
                         f"{listing}")
    lists = {}
    for kind, names in (("columns", features), ("exclude", exclude), ("keep", keep)):
        if names is None:
            continue
        names = [names] if isinstance(names, str) else list(names)
        missing = [n for n in names if n not in have]
        if missing:
            split = [c for c in available if "," in c and set(c.split(",")) & set(missing)]
            quote = (f". A name that holds a comma goes in double quotes: --{kind} "
                     f"'\"{split[0]}\"' ({kind}=[{split[0]!r}] in Python)" if split else "")
            raise ValueError(f"{kind}: column(s) {missing} not in {where}; available "
                             f"columns: {listing}{quote}")
        lists[kind] = names
    if features is not None:
        inputs = [c for c in lists["columns"] if c not in lists.get("exclude", ())]
        if target in inputs:
            raise ValueError(f"the target {target!r} is also listed in columns; an input "
                             "cannot be the target")
        dupes = sorted({c for c in inputs if inputs.count(c) > 1})
        if dupes:
            raise ValueError(f"columns lists {dupes} more than once")
    else:
        drop = {target, *lists.get("exclude", ()), *lists.get("keep", ())}
        inputs = [c for c in available if c not in drop]
    if not inputs and not (features is not None and lists.get("keep")):
        # (columns=[] with keep= reads kept columns only, e.g. one string column)
        besides = f" besides the target {target!r}" if target is not None else ""
        after = " once exclude= and keep= are removed" if exclude or keep else ""
        raise ValueError(f"{where} has no input columns{besides}{after}")
    return Columns(tuple(inputs), target, tuple(lists.get("keep", ())))


def _delimiter(available: list[str]) -> str:
    """A hint when a file's one column name holds another delimiter (the file was read
    as comma-separated, and is not)."""
    if len(available) != 1:
        return ""
    for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars")):
        if sep in available[0]:
            return (f". The header looks separated by {name}, not commas: gpscale reads "
                    f"comma-separated files; convert it, e.g. pandas.read_csv(path, "
                    f"sep={sep!r}).to_csv(new_path, index=False)")
    return ""


def _chosen(cols: Columns, features: Sequence[str] | None) -> tuple[str, ...]:
    """The inputs the user named with ``columns=`` (none when they were not named)."""
    return () if features is None else cols.features


def _files(files: list[str], target, features, exclude, keep, categorical, cycles,
           encoding, client) -> Source:
    headers: list[Any] = []
    for f in files:
        headers.append(read_header(f) if file_format(f) == "csv" else read_info(f))
    ref = headers[0].names
    for f, h in zip(files[1:], headers[1:]):
        if set(h.names) != set(ref):
            diff = [f"{what} {sorted(s)}" for what, s in
                    (("missing", set(ref) - set(h.names)), ("extra", set(h.names) - set(ref)))
                    if s]
            raise ValueError(f"the columns of {f!r} differ from those of {files[0]!r}: "
                             f"{'; '.join(diff)}. All files of one source must have the "
                             "same columns")
    where = repr(files[0]) if len(files) == 1 else f"{files[0]!r} (first of {len(files)} files)"
    cols = _select(list(ref), where, target, features, exclude, keep)
    any_rows = any(h.has_rows if file_format(f) == "csv" else sum(h.group_rows) > 0
                   for f, h in zip(files, headers))
    if not any_rows:
        if len(files) == 1:
            raise ValueError(f"{files[0]!r} has a header but no data rows")
        raise ValueError(f"none of the {len(files)} files ({files[0]!r}, ...) has data rows")

    def build(cols: Columns, kept: list[int] | None = None) -> list[Partition]:
        parts: list[Partition] = []
        for f, h in zip(files, headers):
            if file_format(f) == "csv":
                bools = tuple(c for c in cols.numeric
                              if pa.types.is_boolean(h.types.get(c, pa.null())))
                parts.append(CsvPartition(f, cols, dict(zip(h.names, h.raw)),
                                          max(4 * h.block, 1 << 20), stamp=h.stamp,
                                          booleans=bools))
                continue
            check_types(f, h, cols)
            offset = 0
            for g, rows in enumerate(h.group_rows):
                if rows:
                    parts.append(ParquetPartition(f, g, offset, rows, cols, h.stamp))
                offset += rows
        if kept is not None:  # the rows each keeps once those without a target are left out
            for p, k in zip(parts, kept):
                if isinstance(p, CsvPartition):
                    p._rows = k
                else:
                    p.rows = k
        return parts

    desc = repr(files[0]) if len(files) == 1 else f"{len(files)} files ({files[0]!r}, ...)"
    if encoding is not None:
        cols = replace(cols, encoding=encoding)
    elif target is not None and cols.features:
        names = check_categorical(categorical, cols, where)
        info = [h if file_format(f) == "csv" else replace(h, sample=first_values(f, cols.features))
                for f, h in zip(files[:1], headers[:1])] + list(headers[1:])
        cols, kept, n = learn_columns(cols, file_kinds(info, cols, names, files), build, desc,
                                      client, cycles, _chosen(cols, features))
        source = Source(build(cols, kept), cols, desc, list(cols.features), target)
        source._n = n
        return source
    return Source(build(cols), cols, desc, list(cols.features), target)


def _frame(df: Any, target, features, exclude, keep, categorical, cycles, encoding,
           partition_rows) -> Source:
    cols = _select(_names(df.columns, "DataFrame"), "the DataFrame", target, features,
                   exclude, keep)
    origin = Origin("the DataFrame", 0, "position")
    frame = df[list(cols.all)]
    if len(frame) == 0:
        raise ValueError("the DataFrame has no rows")

    def build(cols: Columns) -> list[Partition]:
        check_frame_types(frame, cols, origin)
        step = partition_rows or max(1, CHUNK_BYTES // (8 * (cols.width + 1)))
        return [FramePartition(frame.iloc[a:a + step], cols, origin.shifted(a))
                for a in range(0, len(frame), step)]

    if encoding is not None:
        cols = replace(cols, encoding=encoding)
    elif target is not None and cols.features:
        names = check_categorical(categorical, cols, "the DataFrame")
        kinds = frame_kinds(frame.dtypes, lambda c: _head(frame[c]), cols, names)
        cols, _, n = learn_columns(cols, kinds, build, "the DataFrame", cycles=cycles,
                                   chosen=_chosen(cols, features))
        if n < len(frame):  # rows whose target is missing are left out (and counted)
            frame = frame[frame[target].notna().to_numpy()]
    return Source(build(cols), cols, "the DataFrame", list(cols.features), target)


def _dask_frame(ddf: Any, target, features, exclude, keep, categorical, cycles, encoding,
                client) -> Source:
    where = "the dask DataFrame"
    cols = _select(_names(ddf.columns, "dask DataFrame"), where, target, features, exclude,
                   keep)
    if encoding is not None:
        cols = replace(cols, encoding=encoding)
    elif target is not None and cols.features:
        names = check_categorical(categorical, cols, where)
        head = ddf[list(cols.features)].partitions[0].compute()
        kinds = frame_kinds(ddf.dtypes, lambda c: _head(head[c]), cols, names)
        cols, _, n = learn_columns(cols, kinds, lambda c: frame_partitions(ddf, c), where,
                                   client, cycles, _chosen(cols, features))
        if cols.encoding is not None and cols.encoding.dropped:
            ddf = ddf[ddf[target].notna()]
    return Source(frame_partitions(ddf, cols), cols, where, list(cols.features), target)


def _head(column: Any) -> list:
    """Some values of a data-frame column (to tell dates among strings)."""
    return column.dropna().head(64).tolist()


def _arrays(X: Any, y: Any, partition_rows: int | None) -> Source:
    names = list(X.columns) if hasattr(X, "columns") else None
    names = names if names and all(isinstance(c, str) for c in names) else None
    yname = getattr(y, "name", None) if hasattr(y, "to_numpy") else None
    yname = yname if isinstance(yname, str) else None
    if is_dask(X):
        return _dask_arrays(X, y)
    Xa = as_float_array(X, "X")
    if Xa.ndim != 2:
        hint = " Reshape it with X.reshape(-1, 1) for a single feature." if Xa.ndim == 1 else ""
        raise ValueError(f"X must be 2-D (n, d); got shape {Xa.shape}.{hint}")
    if Xa.shape[0] == 0 or Xa.shape[1] == 0:
        raise ValueError(f"X is empty (shape {Xa.shape}); give at least one row and column")
    ya = None
    if y is not None:
        ya = as_float_array(y, "y")
        ya = ya[:, 0] if ya.ndim == 2 and ya.shape[1] == 1 else ya
        if ya.ndim != 1:
            raise ValueError(f"y must be 1-D (n,); got shape {ya.shape}")
        if len(ya) != len(Xa):
            raise ValueError(f"X has {len(Xa)} rows but y has {len(ya)} values; they must "
                             "match")
    labels = names or [f"X[:, {j}]" for j in range(Xa.shape[1])]
    target = None if ya is None else (yname or "y")
    cols = Columns(tuple(labels), target, (), named=names is not None)
    origin = Origin("the input arrays", 0, "index")
    check_finite(Xa, ya, cols, origin)
    step = partition_rows or max(1, CHUNK_BYTES // (8 * (Xa.shape[1] + 1)))
    parts = [ArrayPartition(Xa[a:a + step], None if ya is None else ya[a:a + step], cols,
                            origin.shifted(a), checked=True)
             for a in range(0, len(Xa), step)]
    return Source(parts, cols, "the input arrays", names, yname, arrays=(Xa, ya))


def _dask_arrays(X: Any, y: Any) -> Source:
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d); got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must be numeric; the dask array has dtype {X.dtype}")
    nx, ny = X.shape[0], None if y is None else y.shape[0]
    if ny is not None and nx == nx and ny == ny and nx != ny:  # (nan: unknown lengths)
        raise ValueError(f"X has {nx} rows but y has {ny} values; they must match")
    labels = tuple(f"X[:, {j}]" for j in range(X.shape[1]))
    cols = Columns(labels, None if y is None else "y", (), named=False)
    return Source(array_partitions(X, y, cols), cols, "the dask arrays", None, None)
