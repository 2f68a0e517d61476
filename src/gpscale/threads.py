"""Running one command with a given number of CPU threads."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

import torch


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the system has
    one, e.g. under ``taskset`` or a container's CPU set; else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def thread_limit(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` CPU threads in torch and (via threadpoolctl, when installed)
    in the BLAS / OpenMP libraries numpy and scikit-learn use; restored afterwards.
    ``None`` changes nothing. More threads than :func:`available_cores` only compete for
    the same cores (and OpenMP crashes when asked for ~10^5 of them), so ``threads`` is
    capped there, with a warning."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"--threads must be >= 1, got {threads}")
    cores = available_cores()
    if threads > cores:
        warnings.warn(f"--threads {threads} is more than the {cores} CPU core(s) this "
                      f"process may use; using {cores}", UserWarning, stacklevel=3)
        threads = cores
    before = torch.get_num_threads()
    try:
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(threads)
    except ImportError:
        limit = contextlib.nullcontext()
    torch.set_num_threads(threads)
    try:
        with limit:
            yield
    finally:
        torch.set_num_threads(before)
