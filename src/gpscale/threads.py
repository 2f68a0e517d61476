"""Running one command with a given number of CPU threads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def thread_limit(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` CPU threads in torch and (via threadpoolctl, when installed)
    in the BLAS / OpenMP libraries numpy and scikit-learn use; restored afterwards.
    ``None`` changes nothing."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"--threads must be >= 1, got {threads}")
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
