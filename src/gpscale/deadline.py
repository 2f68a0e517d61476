"""A fit's time allowance: the moment by which it must end, read by every stage that can
stop early (an L-BFGS search between iterations, the refinement between gradient
evaluations, CG between iterations), so that a time the tool printed is kept."""

from __future__ import annotations

import math
import time

__all__ = ["Deadline"]


class Deadline:
    """The end of a time allowance of ``seconds`` from now (on ``time.perf_counter``).

    :meth:`sooner` gives a stage its own, earlier end (never a later one than this), so
    the stages of a fit share one allowance."""

    def __init__(self, seconds: float, *, _end: float | None = None) -> None:
        seconds = float(seconds)
        if math.isnan(seconds) or seconds < 0:
            raise ValueError(f"a time allowance must be >= 0 seconds, got {seconds!r}")
        self.end = time.perf_counter() + seconds if _end is None else _end

    def left(self) -> float:
        """Seconds until the end (0 once it has passed)."""
        return max(0.0, self.end - time.perf_counter())

    def passed(self) -> bool:
        """Whether the end has come."""
        return time.perf_counter() >= self.end

    def sooner(self, seconds: float) -> Deadline:
        """A deadline ``seconds`` from now, or this one where that is earlier."""
        return Deadline(0.0, _end=min(self.end, time.perf_counter() + max(0.0, seconds)))

    @staticmethod
    def of(limit: float | Deadline | None) -> Deadline | None:
        """The deadline of a method's ``time_limit``: ``limit`` itself when it is one (the
        fit's own allowance, handed down as one object), one ``limit`` seconds from now
        for a number, None (no allowance) for None."""
        if limit is None or isinstance(limit, Deadline):
            return limit
        return Deadline(limit)

    @staticmethod
    def check(limit: float | Deadline | None) -> None:
        """A ValueError unless ``limit`` is None, a Deadline or a number of seconds
        >= 0 (a method's options check their ``time_limit`` with it)."""
        if limit is not None and not isinstance(limit, Deadline):
            Deadline(limit)

    def __repr__(self) -> str:
        return f"Deadline({self.left():.3g} s left)"
