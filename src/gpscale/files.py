"""Writing files safely: every output goes to a temporary file beside its destination and
is renamed onto it only when complete, so a failed or interrupted write leaves nothing
half-written and an earlier file at that path untouched."""

from __future__ import annotations

import errno
import os
import secrets
import select
import signal
import stat
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "atomic_write", "atomic_bytes", "check_output", "flush",
           "write_all", "write_error", "Terminated", "sigterm_raises"]


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block
    succeeds, delete it otherwise (so no partial file is ever left at ``path``): on any
    exception, Ctrl-C, and SIGTERM where :func:`sigterm_raises` is in force (the
    command line's case); only SIGKILL or a crash leave the hidden ``.NAME.*.tmp``."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"directory {str(parent)!r} does not exist; create it first")
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; give a file name")
    tmp = parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        # created like any new file (permissions from the umask), exclusively; inside the
        # try, so a SIGTERM that lands the moment the file exists still removes it
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


class Terminated(BaseException):
    """SIGTERM, raised in the main thread inside :func:`sigterm_raises`. A BaseException
    like KeyboardInterrupt, so that ``except Exception`` does not swallow it, but not a
    KeyboardInterrupt: the trainers keep going with their best result on Ctrl-C, and a
    process told to terminate should stop."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` instead of killing the
    process outright, so cleanups run as on Ctrl-C: :func:`atomic_path` removes its
    temporary file (an earlier file at the destination stays), temporary copies are
    deleted, a local cluster is shut down. Does nothing off the main thread or where
    SIGTERM was already handled or ignored by someone else."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum, frame):  # noqa: ARG001
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`atomic_path`."""
    return atomic_bytes(path, data.encode() if isinstance(data, str) else data)


def atomic_bytes(path: str | os.PathLike, data: bytes, what: str = "") -> Path:
    """Write ``data`` to ``path`` through :func:`atomic_path`, every byte on disk
    (``fsync``) before the rename: a disk that fills up, or a file-size limit, is an
    OSError naming ``path`` (``what`` says what it is, e.g. "model file"), and ``path``
    keeps its earlier content. (Writers that stream into the file themselves, such as
    ``torch.save``, report a full disk in their own words, e.g. "unexpected pos".)"""
    where = f"{what or 'file'} {os.fspath(path)!r}"
    with atomic_path(path) as tmp:
        with open(tmp, "wb", buffering=0) as f:  # raw: every short write is seen here
            write_all(f, data, where)
            try:
                os.fsync(f.fileno())
            except OSError as err:
                raise write_error(err, where) from None
    return Path(path)


def write_all(stream: Any, data: bytes, where: str) -> None:
    """Write every byte of ``data`` to the binary ``stream``, or raise OSError.

    A raw stream (``sys.stdout.buffer`` under ``python -u`` / ``PYTHONUNBUFFERED``, an
    unbuffered file) may take fewer bytes than given, as ``write(2)`` does when a disk
    fills up or a pipe is interrupted; the count it returns is honoured, so a short
    write is never mistaken for success. ``where`` names the destination in the error
    (e.g. "standard output")."""
    view = memoryview(data).cast("B")
    while view:
        try:
            n = stream.write(view)
        except OSError as err:
            raise write_error(err, where) from None
        if n is None:  # a non-blocking stream that is full: wait until it takes more
            _wait_writable(stream)
            continue
        if n <= 0:
            raise write_error(OSError(errno.EIO, "it took no bytes"), where)
        view = view[n:]


def flush(stream: Any, where: str) -> None:
    """Flush ``stream``: the last buffered bytes may be the ones that do not fit, and
    that is an OSError saying ``where`` is incomplete, like :func:`write_all`'s."""
    try:
        stream.flush()
    except OSError as err:
        raise write_error(err, where) from None


def _wait_writable(stream: Any) -> None:
    with suppress(AttributeError, OSError, ValueError):
        select.select([], [stream.fileno()], [], 1.0)


def write_error(err: OSError, where: str) -> OSError:
    """``err`` reworded to say where the write failed and that the output is incomplete
    (errno kept); a broken pipe stays itself: the reader went away, not an error."""
    if isinstance(err, BrokenPipeError):
        return err
    reason = os.strerror(err.errno) if err.errno else (err.strerror or str(err))
    hint = (": the disk is full; free some space or write elsewhere"
            if err.errno in (errno.ENOSPC, errno.EDQUOT) else
            ": the file is larger than this process may write (ulimit -f)"
            if err.errno == errno.EFBIG else "")
    new = OSError(f"cannot write to {where} ({reason}){hint}; the output is incomplete")
    new.errno = err.errno
    return new


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
