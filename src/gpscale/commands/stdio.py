"""``-`` on the command line: data read from standard input, results written to standard
output, and the messages and warnings that then go to standard error.

Standard input is copied to a temporary file before anything reads it (its format told
from its first bytes: gzip → ``.csv.gz``, ``PAR1`` → ``.parquet``, a zip → a
``.pt`` model file, otherwise CSV), so
methods that pass over the rows several times work on it, and an output that is the
same file as the input (``gpscale predict --data - --out p.csv < p.csv``) is safe. The
copy is deleted when the command ends; messages name it "standard input".
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..linalg.cholesky import NumericalWarning

__all__ = ["STDIO", "Spool", "spool_stdin", "explain", "cli_warnings"]

#: the name that means standard input or output
STDIO = "-"
_NAME = "standard input"
#: temporary copies of standard input made by this process -> their name in messages
_SPOOLED: dict[str, str] = {}


class Spool:
    """Temporary copies of standard input for one command; :meth:`close` deletes them."""

    def __init__(self) -> None:
        self._dirs: list[str] = []

    def path(self, stream: Any = None) -> str:
        """Copy ``stream`` (default: standard input, as bytes) into a temporary file and
        return its path (``stdin.csv``, ``stdin.csv.gz``, ``stdin.parquet`` or
        ``stdin.pt``)."""
        if self._dirs:
            raise ValueError("standard input can be read once per command; give '-' for "
                             "one argument only")
        stream = stream if stream is not None else sys.stdin.buffer
        if hasattr(stream, "isatty") and stream.isatty():
            print("gpscale: reading CSV from the terminal; end it with Ctrl-D",
                  file=sys.stderr)
        folder = tempfile.mkdtemp(prefix="gpscale-stdin-")
        self._dirs.append(folder)
        head = stream.read(4) or b""
        ext = {b"\x1f\x8b": ".csv.gz", b"PA": ".parquet", b"PK": ".pt"}.get(head[:2], ".csv")
        ext = ".csv" if ext == ".parquet" and head != b"PAR1" else ext
        path = os.path.join(folder, "stdin" + ext)
        with open(path, "wb") as f:
            f.write(head)
            shutil.copyfileobj(stream, f, 1 << 20)
        _SPOOLED[path] = _NAME
        return path

    def close(self) -> None:
        for folder in self._dirs:
            for path in [p for p in _SPOOLED if os.path.dirname(p) == folder]:
                _SPOOLED.pop(path, None)
            shutil.rmtree(folder, ignore_errors=True)
        self._dirs.clear()


@contextmanager
def spool_stdin() -> Iterator[Spool]:
    """A :class:`Spool` whose copies are deleted when the block ends."""
    spool = Spool()
    try:
        yield spool
    finally:
        spool.close()


def explain(message: str) -> str:
    """``message`` with the paths of temporary copies of standard input replaced by
    "standard input" (they mean nothing to the user)."""
    for path, name in _SPOOLED.items():
        message = message.replace(repr(path), name).replace(path, name)
    return message


@contextmanager
def cli_warnings(stream: TextIO | None = None) -> Iterator[None]:
    """Python warnings printed as ``gpscale: warning: ...`` lines on standard error
    (instead of a file name, a line number and a line of source code)."""

    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001
        out = stream if stream is not None else sys.stderr
        text = explain(str(message))
        if issubclass(category, NumericalWarning):
            # once per relative jitter and matrix size: a fit factorises many times
            key = re.sub(r"jitter \S+ ", "jitter ", text, count=1)
            if key in said:
                return
            said.add(key)
        print(f"gpscale: warning: {text}", file=out, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
