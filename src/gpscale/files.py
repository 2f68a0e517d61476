"""Writing files safely: every output goes to a temporary file beside its destination and
is renamed onto it only when complete, so a failed or interrupted write leaves nothing
half-written and an earlier file at that path untouched."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["atomic_path", "atomic_write", "check_output"]


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


def check_output(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """``path`` as a Path after checking, before any work is done, that writing it will
    neither fail late nor destroy something: its folder exists and takes a new file,
    and it is not a folder, a special file (a device, a FIFO, a socket), a symbolic
    link (whose target would be replaced) or one of ``inputs``. ValueError or
    FileNotFoundError saying what to do otherwise."""
    text = os.fspath(path)
    path = Path(path)
    if text.endswith(os.sep) or path.is_dir():
        raise ValueError(f"{text!r} is a folder; give a file name (e.g. {text.rstrip(os.sep)}"
                         f"{os.sep}model.pt)")
    if path.is_symlink():
        raise ValueError(f"{text!r} is a symbolic link; give the file it points to, or a "
                         "new name, so that nothing is replaced behind the link")
    if path.exists():
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{text!r} is not a regular file (a device, FIFO or socket); "
                             "write to a regular file instead")
        for p in inputs:
            if Path(p).exists() and os.path.samefile(path, p):
                raise ValueError(f"{text!r} is the input file {os.fspath(p)!r}; give another "
                                 "name so the input is not overwritten")
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"output directory {str(parent)!r} does not exist; create it "
                                "first")
    try:  # the one reliable test of "can a new file go here" (permissions, read-only mounts)
        with atomic_path(path) as tmp:
            raise _Probe(tmp)
    except _Probe:
        pass
    except OSError as err:
        raise PermissionError(f"cannot write into {str(parent)!r} ({err.strerror}); choose "
                              "a folder you can write to") from None
    return path


class _Probe(Exception):
    """Raised inside :func:`atomic_path` so that it removes its probe file."""
