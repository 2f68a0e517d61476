"""Line minimisation of a function of one step length, for the paper's θ-step: eq. (12)
with μ₁ "chosen via line minimization" (GPCV-ADMM, §3.1), one coordinate at a time (§5.3).

:func:`line_minimise` returns the first local minimiser of φ(t) on 0 ≤ t < t_max found
by bracketing from t = 0 (a first point below φ(0), then steps growing by the golden
ratio until φ rises) and golden-section search inside the bracket to ``tol``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["line_minimise"]

#: 2 − golden ratio: where golden-section search puts its next point in the larger part
_GOLD = 0.3819660112501051
#: how much a bracket grows per expansion step (the golden ratio)
_GROW = 1.618033988749895


def line_minimise(phi: Callable[[float], float], f0: float, h: float, t_max: float,
                  tol: float, max_evals: int) -> tuple[float, float, int]:
    """(t, φ(t), evaluations): a local minimiser of φ on [0, t_max) along a descent
    direction, φ(0) = f0 given. ``h`` is the first trial step (shrunk by 4 until φ
    falls below f0), ``tol`` the bracket width at which the search ends, ``max_evals``
    the most evaluations of φ. t = 0 when no step down to ``tol`` decreases φ. A
    non-finite φ(t) counts as no decrease."""
    evals = 0

    def f(t: float) -> float:
        nonlocal evals
        evals += 1
        v = phi(t)
        return v if math.isfinite(v) else math.inf

    b = min(h, 0.5 * t_max)
    fb = f(b)
    while not fb < f0:  # a first point below φ(0)
        if b <= tol or evals >= max_evals:
            return 0.0, f0, evals
        b *= 0.25
        fb = f(b)
    a = 0.0
    while True:  # grow until φ rises: a < b < c with φ(b) below both ends
        c = b + _GROW * (b - a)
        if c >= t_max:  # approach the bound (θ_i stays above its floor)
            c = 0.5 * (b + t_max)
        fc = f(c)
        if not fc < fb:
            break
        a, b, fb = b, c, fc
        if evals >= max_evals or t_max - b <= tol:
            return b, fb, evals
    while c - a > tol and evals < max_evals:  # golden section on [a, c] around b
        x = b + _GOLD * (c - b) if c - b > b - a else b - _GOLD * (b - a)
        fx = f(x)
        if fx < fb:
            a, c = (b, c) if x > b else (a, b)
            b, fb = x, fx
        elif x > b:
            c = x
        else:
            a = x
    return b, fb, evals
