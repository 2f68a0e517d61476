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
    def of(seconds: float | None) -> Deadline | None:
        """A deadline ``seconds`` from now; None (no allowance) for None."""
        return None if seconds is None else Deadline(seconds)

    def __repr__(self) -> str:
        return f"Deadline({self.left():.3g} s left)"
