"""Writing files safely: every output goes to a temporary file beside its destination and
is renamed onto it only when complete, so a failed or interrupted write leaves nothing
half-written and an earlier file at that path untouched."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["atomic_path", "atomic_write"]


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block
    succeeds, delete it otherwise (so no partial file is ever left at ``path``)."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"directory {str(parent)!r} does not exist; create it first")
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; give a file name")
    tmp = parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    # created like any new file (permissions from the umask), exclusively
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)
