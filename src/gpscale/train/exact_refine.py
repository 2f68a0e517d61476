"""Hyperparameters of the iterative exact GP on every row: stochastic gradients of the
exact marginal likelihood (BBMM, Gardner, Pleiss, Bindel, Weinberger & Wilson 2018).

The NLML of y − m ~ N(0, C), C = K + σ²I, and its gradient

    L(θ) = ½ rᵀC⁻¹r + ½ log|C| + (n/2) log 2π,    r = y − m,
    ∂L/∂θ = −½ αᵀ(∂C/∂θ)α + ½ tr(C⁻¹ ∂C/∂θ),      α = C⁻¹r,

need only solves with C and one contraction with ∂K. The trace is estimated with
probes drawn from the preconditioner, z ~ N(0, P), P = L Lᵀ + σ²I (BBMM §4):
E[(C⁻¹z)ᵀ ∂C (P⁻¹z)] = tr(C⁻¹ ∂C P⁻¹ E[zzᵀ]) = tr(C⁻¹ ∂C), unbiased for any SPD P, and
of low variance where P ≈ C. α and the t solves u_i = C⁻¹z_i come from one batched
preconditioned CG (every right-hand side in the same passes over K,
:class:`~gpscale.linalg.operator.KernelOperator`); the gradient is then one pass of
kernel contractions (:meth:`KernelOperator.contraction`: float32 tiles for an RBF,
:meth:`Kernel.vjp` on row blocks otherwise) with the rank-(t+1) cotangent

    G = ½ (−ααᵀ + (1/t) Σ_i u_i w_iᵀ),  w_i = P⁻¹z_i,

so no n × n matrix is formed. The noise's gradient is ½(−αᵀα + (1/t) Σ u_iᵀw_i), the
constant mean's −Σα. Rows merged from copies (:mod:`gpscale.models.copies`) have
C = K + σ² diag(1/c), so the noise's gradient weighs each row by 1/c and adds the
derivative of the copies' own term, ((n − g)/σ² − S/σ⁴)/2; the probes come from
P = S⁻¹(L Lᵀ + σ²I)S⁻¹, S = diag(√c), as the CG's preconditioner.

The steps (:func:`refine_on_rows`) are L-BFGS's with a line search on the gradient
alone, started from the hyperparameters of an exact fit on a row sample. The
probes are drawn once, z_i = L e_i + σ e'_i with e, e' fixed (common random numbers):
each step's gradient is then that of one fixed surrogate, the solves are warm-started
from the step before, and L (randomly pivoted Cholesky at the starting θ) is kept while
P's σ² follows the noise, so a step costs one Woodbury refactorisation (r³/3), one
batched CG and one contraction pass. Once CG slows down (θ has moved away from where L
was found) L and the probes are found again and L-BFGS starts its memory anew.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from ..linalg.cg import cg
from ..linalg.lowrank import factor_gram, low_rank_inverse
from ..params import FLOOR_MARGIN, inv_softplus, positive_params
from .result import FitResult, theta_of

__all__ = ["ProbeDraws", "mll_gradient", "refine_on_rows", "PROBES"]

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


class ProbeDraws:
    """Fixed standard normal draws (e, e') that make probes z = L e + σ e' ~ N(0, P)
    for P = L Lᵀ + σ²I at any σ² (common random numbers across steps); with ``scale``
    S, z = S⁻¹(L e + σ e') ~ N(0, S⁻¹(L Lᵀ + σ²I)S⁻¹)."""

    def __init__(self, n: int, rank: int, t: int, seed: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        gen = torch.Generator().manual_seed(int(seed))
        self.low = torch.randn(rank, t, generator=gen, dtype=torch.float64).to(dtype=dtype,
                                                                               device=device)
        self.diag = torch.randn(n, t, generator=gen, dtype=torch.float64).to(dtype=dtype,
                                                                             device=device)

    @property
    def t(self) -> int:
        return self.diag.shape[1]

    def probes(self, L: torch.Tensor | None, noise: float,
               scale: torch.Tensor | None = None) -> torch.Tensor:
        Z = self.diag * math.sqrt(noise)
        Z = Z if L is None else Z.add_(L @ self.low)  # L: a tensor or a factor object
        return Z if scale is None else Z.div_(scale[:, None].to(Z))


def mll_gradient(model: Any, L: torch.Tensor | None, draws: ProbeDraws,
                 gram: torch.Tensor | None = None, start: torch.Tensor | None = None
                 ) -> tuple[dict[torch.Tensor, torch.Tensor], torch.Tensor, dict[str, Any]]:
    """The stochastic NLML gradient of an :class:`~gpscale.models.IterativeExactGP` at
    its current hyperparameters (module docstring), by parameter (raw, as the model
    trains them).

    ``L``: the preconditioner's low-rank factor (None: P = σ²I), ``gram`` = LᵀL if at
    hand; ``draws``: the probes' fixed draws; ``start``: the previous solution [α, U]
    (n x (1 + t)) to warm-start CG from. Returns (gradients, the solution [α, U], info:
    CG iterations and residual, the data-fit term ½ rᵀα, seconds)."""
    t0 = time.perf_counter()
    noise = model.noise.detach()
    copies, scale = model.copies, model.copy_scale()
    with torch.no_grad():
        op = model.operator(model.solve_dtype)
        precond = None if L is None else low_rank_inverse(L, noise, gram=gram, scale=scale)
        Z = draws.probes(L, float(noise), scale)
        W = Z / op.noise_column() if precond is None else precond(Z)
        r = model.y - model.mean_constant.detach()
        B = torch.cat([r[:, None], Z], 1)
        sol, info = cg(op.matmul, B, precond, start, model.tol, model.max_iter)
        alpha, U = sol[:, 0], sol[:, 1:]
        t = draws.t
        left = torch.cat([-alpha[:, None], U / t], 1).mul_(0.5)   # G = left @ rightᵀ
        right = torch.cat([alpha[:, None], W], 1)
    t_solve = time.perf_counter() - t0
    params = [p for p in model.kernel.parameters() if p.requires_grad]
    grads = dict(zip(params, op.contraction(left, right)))
    with torch.no_grad():
        if copies is None:
            g_noise = 0.5 * (-(alpha @ alpha) + (U * W).sum() / t)
        else:  # ∂C/∂σ² = diag(1/c), and the copies' term (n − g)/2 log σ² + S/(2σ²)
            w = 1.0 / copies.counts
            g_noise = 0.5 * (-(alpha * w) @ alpha + (U * W * w[:, None]).sum() / t
                             + copies.extra / noise - copies.spread.sum() / noise**2)
        grads[model.raw_noise] = type(model).noise.raw_grad(model, g_noise)
        if model.mean_constant.requires_grad:
            grads[model.mean_constant] = -alpha.sum().reshape(model.mean_constant.shape)
    return grads, sol, {"iterations": info.iterations,
                        "residual": float(info.rel_residual.max()),
                        "converged": info.converged, "data_fit": float(0.5 * (r @ alpha)),
                        "solve_s": t_solve, "seconds": time.perf_counter() - t0}


def refine_on_rows(model: Any, steps: int, probes: int = PROBES, seed: int = 0,
                   min_step: float = 0.01, callback: Any = None) -> FitResult:
    """At most ``steps`` evaluations of the stochastic NLML gradient on all of the
    model's rows (module docstring), moving its hyperparameters from where they are.

    L-BFGS directions with a line search on the directional derivative alone
    (:func:`_lbfgs`: the gradient is all the probes give, no NLML value) in the
    coordinates of :class:`LogCoordinates`; stops once a step moves none of them by more
    than ``min_step``. ``probes``: t. The model's α is left at the last evaluation's
    solution (a warm start), not at the final θ.
    ``callback(evaluation, info)`` after every evaluation.

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
    state: dict[str, Any] = {"start": None, "first": None}

    def precondition() -> None:
        """L (and LᵀL, the probes' draws) at the current hyperparameters."""
        with torch.no_grad():
            L = model.precond_factor(model.operator(model.solve_dtype))
        state.update(L=L, gram=None if L is None else factor_gram(L), first=None,
                     draws=ProbeDraws(model.n, 0 if L is None else L.shape[1], probes,
                                      seed, model.X.dtype, model.X.device))

    def gradient(x: torch.Tensor) -> torch.Tensor:
        coords.assign(x)
        grads, state["start"], info = mll_gradient(model, state["L"], state["draws"],
                                                   state["gram"], state["start"])
        g = coords.gradient(grads)
        state["first"] = state["first"] or max(info["iterations"], 1)
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
        if history[-1]["iterations"] <= REFRESH_AFTER * state["first"] + REFRESH_SLACK:
            return False
        precondition()
        history[-1]["precond_refreshed"] = True
        return True

    precondition()
    x, converged = _lbfgs(gradient, coords.values(), steps, min_step, stale)
    coords.assign(x)
    with torch.no_grad():
        model.alpha = state["start"][:, 0].clone()
    reason = (f"steps below {min_step:g}" if converged else f"{steps} gradient evaluations")
    return FitResult("exact-refine", theta_of(model), history[-1]["data_fit"], history,
                     converged, reason, time.perf_counter() - t0, len(history))


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
           memory: int = 10) -> tuple[torch.Tensor, bool]:
    """L-BFGS with a line search on φ'(a) = g(x + a d)·d only: accept a once
    |φ'(a)| ≤ ½|φ'(0)| (the strong Wolfe curvature test without the decrease test,
    which needs values); otherwise extrapolate (φ' < 0) or take the secant root inside
    the bracket (φ' > 0). A search that runs out of evaluations ends at the furthest
    point where φ' was still negative; one that found none (every trial overshot)
    keeps x and shortens the next step. No step moves a coordinate by more than
    ``cap`` (at first :data:`MAX_STEP`). ``stale()``, asked after every step, says that
    the gradient itself has changed (new probes): the memory is dropped and the
    gradient at x evaluated again."""
    S: list[torch.Tensor] = []
    Y: list[torch.Tensor] = []
    g = gradient(x)
    used, cap = 1, MAX_STEP
    while used < budget:
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
            if used >= budget:
                break
            g_a = gradient(x + a * d)
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
        if stale is not None and used < budget and stale():
            S, Y = [], []
            g = gradient(x)
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
