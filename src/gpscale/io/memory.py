"""Data already in memory: numpy arrays, torch tensors, pandas objects. Partitions are
ranges of rows; a partition holds only its own rows (a view, so pickling one copies only
those rows)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..validation import by_name
from .batch import Batch, Columns, Origin, Partition, arrow_batch, check_finite, text_error

__all__ = ["ArrayPartition", "FramePartition", "as_float_array", "check_frame_types",
           "frame_matrix"]


def as_float_array(a: Any, name: str) -> np.ndarray:
    """``a`` as a float64 numpy array, without a copy when it already is one."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # a torch tensor
        a = a.detach().cpu().numpy()
    try:
        if hasattr(a, "to_numpy"):  # pandas
            a = a.to_numpy(dtype=np.float64, na_value=np.nan)
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric; could not convert it ({err}){by_name(a)}"
                         ) from None


@dataclass(eq=False, repr=False)
class ArrayPartition(Partition):
    """Rows of X (m, d) and y (m,) or None; ``checked``: already known to be finite."""

    X: np.ndarray
    y: np.ndarray | None
    cols: Columns
    origin: Origin
    checked: bool = False
    keep: dict[str, pa.Array] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return int(self.X.shape[0])

    def batches(self, rows: int) -> Iterator[Batch]:
        if rows < 1:
            raise ValueError(f"rows must be a positive number of rows per chunk, got {rows}")
        for a in range(0, self.num_rows, rows):
            X = np.ascontiguousarray(self.X[a:a + rows], dtype=np.float64)
            y = None if self.y is None else np.ascontiguousarray(self.y[a:a + rows],
                                                                 dtype=np.float64)
            if not self.checked:
                check_finite(X, y, self.cols, self.origin.shifted(a))
            yield Batch(X, y, {k: v.slice(a, len(X)) for k, v in self.keep.items()})


def is_numeric(dtype: Any) -> bool:
    return dtype.kind in "biuf"


def check_frame_types(frame: Any, cols: Columns, origin: Origin) -> None:
    """ValueError naming the columns of ``cols`` in a pandas frame that cannot be numbers
    (object columns are tried when read)."""
    bad = [c for c in cols.numeric
           if not is_numeric(frame[c].dtype) and frame[c].dtype.name != "object"]
    if bad:
        found = {}
        for c in bad:
            valid = np.flatnonzero(frame[c].notna().to_numpy())
            found[c] = (int(valid[0]), frame[c].iloc[valid[0]]) if len(valid) else (0, None)
        raise text_error(origin, cols, found, {c: str(frame[c].dtype) for c in bad})


def frame_matrix(frame: Any, names: tuple[str, ...], cols: Columns,
                 origin: Origin) -> np.ndarray:
    """The columns ``names`` of a pandas frame as a C-contiguous float64 matrix."""
    try:
        return np.ascontiguousarray(
            frame[list(names)].to_numpy(dtype=np.float64, na_value=np.nan))
    except (TypeError, ValueError):
        import pandas as pd

        found = {}
        for c in names:
            col = frame[c]
            num = pd.to_numeric(col, errors="coerce")
            bad = np.flatnonzero((num.isna() & col.notna()).to_numpy())
            if len(bad):
                found[c] = (int(bad[0]), col.iloc[bad[0]])
        if not found:
            raise
        raise text_error(origin, cols, found) from None


@dataclass(eq=False, repr=False)
class FramePartition(Partition):
    """Rows of a pandas DataFrame holding (at least) the columns of ``cols``."""

    frame: Any
    cols: Columns
    origin: Origin

    @property
    def num_rows(self) -> int:
        return len(self.frame)

    def batches(self, rows: int) -> Iterator[Batch]:
        if rows < 1:
            raise ValueError(f"rows must be a positive number of rows per chunk, got {rows}")
        check_frame_types(self.frame, self.cols, self.origin)
        if self.cols.encoding is not None:
            done = 0
            for t in self.tables(rows):
                yield arrow_batch(t, self.cols, self.origin.shifted(done))
                done += t.num_rows
            return
        for a in range(0, self.num_rows, rows):
            sub = self.frame.iloc[a:a + rows]
            where = self.origin.shifted(a)
            X = frame_matrix(sub, self.cols.features, self.cols, where)
            y = None
            if self.cols.target is not None:
                y = frame_matrix(sub, (self.cols.target,), self.cols, where)[:, 0]
            check_finite(X, y, self.cols, where)
            keep = {k: pa.Array.from_pandas(sub[k]) for k in self.cols.keep}
            yield Batch(X, y, keep)

    def tables(self, rows: int = 65_536) -> Iterator[pa.Table]:
        """The frame's columns of ``cols`` as Arrow tables (NaN and None as nulls,
        ``category`` columns as dictionaries, ``datetime64`` as timestamps)."""
        names = list(self.cols.all)
        for a in range(0, self.num_rows, rows):
            sub = self.frame.iloc[a:a + rows][names]
            try:
                yield pa.Table.from_pandas(sub, preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
                raise mixed_error(sub, self.origin.shifted(a), err) from None


def mixed_error(frame: Any, origin: Origin, err: Exception) -> ValueError:
    """A column of ``frame`` that Arrow cannot hold as one type: named, with two of its
    value types."""
    for c in frame.columns:
        try:
            pa.Array.from_pandas(frame[c])
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            kinds = sorted({type(v).__name__ for v in frame[c].dropna()})
            return ValueError(f"column {c!r} of {origin.name} mixes value types "
                              f"({', '.join(kinds)}): make it one type "
                              f"(df[{c!r}].astype(str) for a category, "
                              f"pd.to_numeric(df[{c!r}], errors='coerce') for a number), or "
                              f"leave it out with exclude=[{c!r}]")
    return ValueError(f"could not read {origin.name} as a table ({err})")
