"""Which files a path, glob, directory or list of them names, and each file's format
(from its extension)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

__all__ = ["FORMATS", "file_format", "find_files"]

#: extension -> format
FORMATS = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet", ".pq": "parquet"}
_KNOWN = ", ".join(FORMATS)


def file_format(path: str) -> str | None:
    """``csv``, ``parquet`` or None, from the (case-insensitive) extension of ``path``."""
    low = path.lower()
    for ext in sorted(FORMATS, key=len, reverse=True):
        if low.endswith(ext):
            return FORMATS[ext]
    return None


def _checked(path: str) -> str:
    if file_format(path) is None:
        ext = os.path.splitext(path)[1] or "(none)"
        raise ValueError(f"{path!r} has an unknown extension {ext}; gpscale reads CSV and "
                         f"Parquet files named {_KNOWN}: rename or convert the file")
    return path


def _in_directory(folder: str) -> list[str]:
    """The data files directly in ``folder`` (not in sub-folders), sorted; names that
    start with ``.`` or ``_`` (``_SUCCESS``, ``_metadata``, checksums) are skipped."""
    names = sorted(os.listdir(folder))
    files = [os.path.join(folder, f) for f in names
             if not f.startswith((".", "_")) and file_format(f) is not None
             and os.path.isfile(os.path.join(folder, f))]
    if not files:
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        raise FileNotFoundError(
            f"directory {folder!r} holds no data files ({_KNOWN}); it holds: "
            f"{shown or 'nothing'}. Name the files, or use a glob such as "
            f"{os.path.join(folder, '**', '*.parquet')!r} for sub-folders")
    return files


def find_files(data: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """The data files named by ``data``, in order (each glob and directory sorted),
    without repeats. FileNotFoundError when something matches nothing, ValueError for an
    unknown extension."""
    items = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    if not items:
        raise ValueError("no data files given (an empty list)")
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        s = os.fspath(item)
        if any(ch in s for ch in "*?["):
            matches = [m for m in sorted(glob.glob(s, recursive=True)) if os.path.isfile(m)]
            if not matches:
                raise FileNotFoundError(f"no files match {s!r}; check the pattern and the "
                                        f"current directory ({os.getcwd()!r})")
            files = [_checked(m) for m in matches]
        elif os.path.isdir(s):
            files = _in_directory(s)
        elif os.path.isfile(s):
            files = [_checked(s)]
        else:
            raise FileNotFoundError(f"data file {s!r} not found")
        for f in files:
            if f not in seen:
                seen.add(f)
                out.append(f)
    return out
