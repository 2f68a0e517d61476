"""Hyperparameters of the exact GP on every row when it is solved by CG: L-BFGS on the
stochastic gradients of the exact marginal likelihood (BBMM, Gardner, Pleiss, Bindel,
Weinberger & Wilson 2018) that the model estimates
(:class:`~gpscale.models.exact_cg_gradient.StochasticGradient`: the NLML needs solves with C and
a trace, estimated with probes from the preconditioner).

The steps (:func:`refine_on_rows`) are L-BFGS's with a line search on the gradient
alone, started from the hyperparameters of an exact fit on a row sample. The probes are
drawn once (common random numbers), so each step's gradient is that of one fixed
surrogate, the solves are warm-started from the step before, and the preconditioner's
factor is kept while its σ² follows the noise: a step costs one Woodbury
refactorisation (r³/3), one batched CG and one contraction pass. Once CG slows down (θ
has moved away from where the factor was found) the factor and the probes are found
again and L-BFGS starts its memory anew.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from ..linalg.cholesky import CholeskyError
from ..models.exact_cg_gradient import SolveCut, StochasticGradient
from ..params import FLOOR_MARGIN, inv_softplus, positive_params
from .lbfgs import OUT_OF_TIME
from .result import FitResult, theta_of
from .warning_types import ConvergenceWarning

__all__ = ["refine_on_rows", "PROBES"]

#: probes of the trace estimate (they ride in the CG's passes with y − m)
PROBES = 32
#: the largest move of one coordinate (:class:`LogCoordinates`: log v, a factor of
#: e = 2.7) in one L-BFGS step, and the line search's most gradient evaluations per step
MAX_STEP, MAX_LINE_EVALS = 1.0, 4
#: the first trial move of a step without curvature pairs (a factor of e^0.1 = 1.1)
FIRST_STEP = 0.1
#: the preconditioner is found again once a solve needs more than REFRESH_AFTER times
#: the iterations of the first solve with it, plus REFRESH_SLACK
REFRESH_AFTER, REFRESH_SLACK = 3, 10


def refine_on_rows(model: Any, steps: int, probes: int = PROBES, seed: int = 0,
                   min_step: float = 0.01, callback: Any = None,
                   time_limit: float | None = None, grace: float = 0.0) -> FitResult:
    """At most ``steps`` evaluations of the stochastic NLML gradient on all of the
    model's rows (module docstring), moving its hyperparameters from where they are.

    L-BFGS directions with a line search on the directional derivative alone
    (:func:`_lbfgs`: the gradient is all the probes give, no NLML value) in the
    coordinates of :class:`LogCoordinates`; stops once a step moves none of them by more
    than ``min_step``. ``probes``: t. The model's α is left at the last evaluation's
    solution (a warm start), not at the final θ.
    ``callback(evaluation, info)`` after every evaluation. ``model``: an
    :class:`~gpscale.models.ExactGP` with the CG solver. ``time_limit`` (seconds): no
    evaluation starts that would end past it, judged by the last one's time, and one
    whose CG is still running ``grace`` seconds past it is abandoned (near a small noise
    one step can need hundreds of iterations; the grace lets a step that was planned to
    end near the limit finish); θ is then the last accepted step's and the result's
    reason says so.

    Not Adam (BBMM's and Wang et al.'s optimiser): it moves each raw parameter by about
    its learning rate per step, so from a sample fit that ended with the noise at its
    floor (where the softplus scale is the log scale) to a noise 100x larger it needs
    ~50 steps at 0.1; every step here is a full pass of CG and contractions."""
    t0 = time.perf_counter()
    params = [p for p in model.parameters() if p.requires_grad]
    history: list[dict[str, Any]] = []
    if steps <= 0 or not params:
        return FitResult("exact-refine", theta_of(model), float("nan"), history, True,
                         "no steps", 0.0, 0)
    coords = LogCoordinates(model, params)
    estimate = StochasticGradient(model, probes, seed)
    first = 0  # CG iterations of the first solve with the current preconditioner
    finite = coords.values()  # the last θ whose gradient was finite

    def past_limit() -> bool:  # CG's stop inside an evaluation
        return time_limit is not None and time.perf_counter() - t0 >= time_limit + grace

    def gradient(x: torch.Tensor) -> torch.Tensor:
        nonlocal first, finite
        coords.assign(x)
        try:
            grads, info = estimate(stop=past_limit if time_limit is not None else None)
        except SolveCut:
            raise _OutOfTime from None
        g = coords.gradient(grads)
        if not bool(torch.isfinite(g).all()):
            raise _Diverged
        finite = x.clone()
        first = first or max(info["iterations"], 1)
        info = {"iter": len(history) + 1, "phase": "refine", "grad_norm": float(g.norm()),
                "time_s": time.perf_counter() - t0, **info}
        history.append(info)
        if callback is not None:
            callback(len(history), info)
        return g

    def stale() -> bool:
        """After a step: refactor the preconditioner once CG needs REFRESH_AFTER times
        the iterations of the first solve with this one (θ has moved away from where L
        was found); the probes change with it, so L-BFGS starts its memory anew."""
        nonlocal first
        if history[-1]["iterations"] <= REFRESH_AFTER * first + REFRESH_SLACK:
            return False
        estimate.refresh()
        first = 0
        history[-1]["precond_refreshed"] = True
        return True

    def out_of_time() -> bool:  # the next evaluation would end past the limit, judged
        last = history[-1]["seconds"] if history else 0.0  # by the last one's time
        return time_limit is not None and time.perf_counter() - t0 + last >= time_limit

    try:
        x, converged = _lbfgs(gradient, coords.values(), steps, min_step, stale, out_of_time)
        cut = len(history) < steps and out_of_time()  # not when every step was taken
        reason = f"steps below {min_step:g}" if converged else \
            f"{OUT_OF_TIME} of {time_limit:g} s" if cut else f"{steps} gradient evaluations"
        estimate.keep_weights()
    except (_Diverged, CholeskyError):  # a non-finite gradient: keep the last finite θ
        x, converged, reason = finite, False, "diverged"
        warnings.warn(f"the refinement of θ on every row diverged after {len(history)} "
                      "gradient evaluations; θ is the last point with a finite gradient. "
                      "Pass refine=0 (θ from the sample) or a larger noise_floor",
                      ConvergenceWarning, stacklevel=3)
    coords.assign(x)
    fit = history[-1]["data_fit"] if history else float("nan")
    return FitResult("exact-refine", theta_of(model), fit, history,
                     converged, reason, time.perf_counter() - t0, len(history))


class _Diverged(ArithmeticError):
    """The stochastic gradient came back NaN or infinite."""


class _OutOfTime(Exception):
    """An evaluation was abandoned at the time limit."""


class LogCoordinates:
    """The coordinates the refinement moves: log v for every positive parameter
    v = floor + softplus(raw) (:class:`~gpscale.params.Positive`), the raw value for the
    others (a constant mean).

    On the raw scale a noise near its floor is nearly frozen: ∂v/∂raw = sigmoid(raw) is
    about v − floor there, so a sample fit that ended at the floor (pumadyn32nm: σ² at
    1.04x its floor, v − floor ≈ 4e-6) gives a raw gradient far below the others' and
    L-BFGS never moves it. On the log scale every positive parameter moves by relative
    amounts. A value that a step puts below its floor is held just above it."""

    def __init__(self, model: Any, params: list[torch.Tensor]) -> None:
        owner = {id(getattr(sub, desc.raw_name)): (sub, desc)
                 for _, sub, desc in positive_params(model)}
        self.params = params
        self.positive = [owner.get(id(p)) for p in params]

    def values(self) -> torch.Tensor:
        out = []
        for p, pos in zip(self.params, self.positive):
            v = p.detach() if pos is None else getattr(pos[0], pos[1].name).detach()
            out.append((v if pos is None else v.log()).reshape(-1))
        return torch.cat(out).to(torch.float64)

    def assign(self, x: torch.Tensor) -> None:
        i = 0
        with torch.no_grad():
            for p, pos in zip(self.params, self.positive):
                part = x[i:i + p.numel()].reshape(p.shape).to(p)
                i += p.numel()
                if pos is not None:
                    floor = pos[1].floor_of(pos[0])
                    excess = (part.exp() - floor).clamp_min(floor * FLOOR_MARGIN)
                    part = inv_softplus(excess)
                p.copy_(part)

    def gradient(self, grads: dict[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """∂L/∂x from the gradients in the raw parameters: × v / sigmoid(raw)."""
        out = []
        for p, pos in zip(self.params, self.positive):
            g = grads.get(p, torch.zeros_like(p)).detach()
            if pos is not None:
                v = getattr(pos[0], pos[1].name).detach()
                g = g / torch.sigmoid(p.detach()) * v
            out.append(g.reshape(-1))
        return torch.cat(out).to(torch.float64)


def _lbfgs(gradient, x: torch.Tensor, budget: int, min_step: float, stale=None,
           out_of_time=None, memory: int = 10) -> tuple[torch.Tensor, bool]:
    """L-BFGS with a line search on φ'(a) = g(x + a d)·d only: accept a once
    |φ'(a)| ≤ ½|φ'(0)| (the strong Wolfe curvature test without the decrease test,
    which needs values); otherwise extrapolate (φ' < 0) or take the secant root inside
    the bracket (φ' > 0). A search that runs out of evaluations ends at the furthest
    point where φ' was still negative; one that found none (every trial overshot)
    keeps x and shortens the next step. No step moves a coordinate by more than
    ``cap`` (at first :data:`MAX_STEP`). ``stale()``, asked after every step, says that
    the gradient itself has changed (new probes): the memory is dropped and the
    gradient at x evaluated again. ``out_of_time()``, asked before every evaluation, ends
    the search at the last accepted point, as does an evaluation abandoned at the limit
    (:class:`_OutOfTime`)."""
    try:
        return _lbfgs_steps(gradient, x, budget, min_step, stale, out_of_time, memory)
    except _OutOfTime as stopped:
        return stopped.args[0], False


def _lbfgs_steps(gradient, x, budget, min_step, stale, out_of_time, memory):
    """:func:`_lbfgs`'s iterations; an abandoned evaluation raises :class:`_OutOfTime`
    carrying the last accepted point."""
    late = out_of_time or (lambda: False)

    def evaluate(point: torch.Tensor) -> torch.Tensor:
        try:
            return gradient(point)
        except _OutOfTime:
            raise _OutOfTime(x) from None  # x: the last accepted point, as it is now

    S: list[torch.Tensor] = []
    Y: list[torch.Tensor] = []
    g = evaluate(x)
    used, cap = 1, MAX_STEP
    while used < budget and not late():
        d = -_two_loop(g, S, Y)
        if float(g @ d) >= 0:  # not a descent direction: forget the curvature pairs
            S, Y, d = [], [], -g
        scale = cap / max(float(d.abs().max()), 1e-300)
        # without curvature pairs d is the gradient itself: try a move of FIRST_STEP
        # (the start is a fit on a sample, usually close) and let the search extrapolate
        a = min(1.0, scale) if S else min(FIRST_STEP, cap) / max(float(d.abs().max()), 1e-300)
        d0 = float(g @ d)
        lo, dlo, g_lo = 0.0, d0, g
        hi, dhi = None, 0.0
        found = None
        for _ in range(MAX_LINE_EVALS):
            if used >= budget or late():
                break
            g_a = evaluate(x + a * d)
            used += 1
            da = float(g_a @ d)
            if abs(da) <= 0.5 * abs(d0):
                found = (a, g_a)
                break
            if da > 0:
                hi, dhi = a, da
            else:
                lo, dlo, g_lo = a, da, g_a
            if hi is None:  # still descending: extrapolate, at most 4x and within the cap
                root = a * -d0 / (dlo - d0) if dlo > d0 else 4.0 * a  # secant from 0
                a = min(4.0 * a, scale, root)
                if a <= lo:
                    break
            else:  # the secant root of φ' between lo and hi, kept off the ends
                a = lo - dlo * (hi - lo) / (dhi - dlo)
                a = min(max(a, lo + 0.1 * (hi - lo)), hi - 0.1 * (hi - lo))
        if found is None and lo > 0:
            found = (lo, g_lo)
        if found is None:  # every trial overshot: stay, forget the curvature, go shorter
            S, Y, cap = [], [], cap / 4
            continue
        a, g_new = found
        s, yv = a * d, g_new - g
        if float(s @ yv) > 1e-10 * float(yv @ yv):
            S.append(s)
            Y.append(yv)
            if len(S) > memory:
                S.pop(0)
                Y.pop(0)
        x, g = x + s, g_new
        if float(s.abs().max()) <= min_step:
            return x, True
        if stale is not None and used < budget and not late() and stale():
            S, Y = [], []
            g = evaluate(x)
            used += 1
    return x, False


def _two_loop(g: torch.Tensor, S: list[torch.Tensor], Y: list[torch.Tensor]) -> torch.Tensor:
    """H g for the L-BFGS inverse Hessian approximation from the pairs (s, y)."""
    q = g.clone()
    rho = [1.0 / float(s @ y) for s, y in zip(S, Y)]
    alphas = []
    for s, y, r in zip(reversed(S), reversed(Y), reversed(rho)):
        a = r * float(s @ q)
        alphas.append(a)
        q -= a * y
    if S:
        q *= float(S[-1] @ Y[-1]) / float(Y[-1] @ Y[-1])
    for (s, y, r), a in zip(zip(S, Y, rho), reversed(alphas)):
        b = r * float(y @ q)
        q += (a - b) * s
    return q
