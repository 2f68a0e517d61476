"""Line numbers of a CSV file's data rows, read as text (only on the error path, so that a
message can say ``on line 7`` rather than ``in data row 6``)."""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator

__all__ = ["LINE_SCAN_LIMIT", "is_gzip", "lines_of_rows", "text_rows"]

#: rows beyond this are reported as data rows, not scanned for their line
LINE_SCAN_LIMIT = 5_000_000


def is_gzip(path: str) -> bool:
    """Whether ``path`` starts with the gzip magic bytes (whatever its name)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def text_rows(path: str, header: bool = False) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank row (after the header unless ``header``)."""
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rt", newline="", encoding="utf-8-sig", errors="replace") as f:
        reader = csv.reader(f)
        skip = not header
        for r in reader:
            if r and not skip:
                yield reader.line_num, r
            skip = skip and not r


def lines_of_rows(path: str, rows: set[int]) -> dict[int, int]:
    """Line numbers of the given 1-based data rows (those up to ``LINE_SCAN_LIMIT``)."""
    want = {r for r in rows if r <= LINE_SCAN_LIMIT}
    out: dict[int, int] = {}
    if not want:
        return out
    last = max(want)
    try:
        for i, (line, _) in enumerate(text_rows(path), 1):
            if i in want:
                out[i] = line
            if i >= last:
                break
    except csv.Error:  # the rows are then reported as data rows
        pass
    return out
