"""The θ-step of Algorithm 1 as the paper takes it (``direction="coordinate"``, the ``paper``
preset's): eq. (12) one coordinate of θ at a time (§5.3, "Coordinate descent ... is adopted
when θ has more than one element"), each with its step μ₁ by line minimisation (§3.1) or
Armijo's rule, z and λ held.

For coordinate i, in the paper's units of θ_i (a lengthscale, a period, σ², not their
unconstrained raw numbers):

    θ_i ← θ_i − μ₁ ∂L_ρ/∂θ_i (θ, z^η, λ^η),    μ₁ = argmin_{μ ≥ 0} L_ρ(θ − μ ∂_i L_ρ e_i, z^η, λ^η)

so θ_i moves to the first local minimiser of L_ρ along its descent direction
(:func:`~gpscale.train.admm.linesearch.line_minimise`), kept above the parameter's floor
and within a factor ``line_max_ratio`` of its value (ours: where L_ρ falls towards an
asymptote, as θ_i → ∞, the half-line has no minimiser and the search would run off).
The gradient is eq. (17–18) (:meth:`HoldoutLagrangian.grad`), taken afresh at each
coordinate. A line minimiser along one coordinate does not depend on how θ_i is
parametrised; Armijo's steps do, and are taken in θ_i's own units as (12) writes them.
"""

from __future__ import annotations

import math

import torch

from ...params import inv_softplus, positive_params
from .lagrangian import HoldoutLagrangian
from .linesearch import line_minimise
from .theta import DescentMemory

__all__ = ["CoordinateThetaStep", "coordinates"]

#: first trial step of a coordinate never tried before, relative to |θ_i|
_FIRST_STEP = 0.05
#: smallest first trial step, relative to |θ_i| (a step remembered as tiny is not reused)
_MIN_STEP = 1e-3


def coordinates(L: HoldoutLagrangian) -> list[float | None]:
    """Per element of the raw vector θ (``L.theta()``'s order): the floor of the positive
    hyperparameter it stores (value = floor + softplus(raw)), or None for an
    unconstrained one (value = raw)."""
    owner = {id(getattr(sub, d.raw_name)): d.floor_of(sub)
             for _, sub, d in positive_params(L.model)}
    return [owner.get(id(p)) for p in L.params for _ in range(p.numel())]


def _value(raw: float, floor: float | None) -> float:
    return raw if floor is None else floor + float(torch.nn.functional.softplus(
        torch.tensor(raw, dtype=torch.float64)))


def _raw(value: float, floor: float | None) -> float:
    return value if floor is None else float(inv_softplus(
        torch.tensor(value - floor, dtype=torch.float64)))


class CoordinateThetaStep:
    """(11a) by eq. (12) and §5.3: ``theta_steps`` sweeps over the coordinates of θ, each
    a line minimisation (``line_search="minimize"``) or Armijo step (``"armijo"``) in
    θ_i's own units. ``steps`` keeps each coordinate's last step length, the next
    search's first trial."""

    def __init__(self, lagrangian: HoldoutLagrangian, memory: DescentMemory) -> None:
        self.L, self.memory = lagrangian, memory
        self.floors = coordinates(lagrangian)
        self.steps: dict[int, float] = {}
        self.mus: dict[int, float] = {}  # Armijo: each coordinate's last accepted μ

    def step(self) -> tuple[int, float]:
        """One θ-step; returns (coordinates moved, ‖∇_θ L_ρ‖ at the start, raw space)."""
        L, o = self.L, self.L.opts
        moved, grad_norm = 0, math.nan
        for _ in range(o.theta_steps):
            for i, floor in enumerate(self.floors):
                f, e, r = L.lrho()
                g = L.grad(e, r)
                if math.isnan(grad_norm):
                    grad_norm = float(g.norm())
                moved += self.coordinate(i, floor, f, g)
        return moved, grad_norm

    def coordinate(self, i: int, floor: float | None, f0: float, g: torch.Tensor) -> bool:
        """Move θ_i along −∂L_ρ/∂θ_i (eq. 12); returns whether it moved."""
        L, o = self.L, self.L.opts
        theta0 = L.theta()
        raw0 = float(theta0[i])
        v0 = _value(raw0, floor)
        # ∂L/∂θ_i in θ_i's units: dθ_i/draw = sigmoid(raw) for value = floor + softplus(raw)
        g_i = float(g[i]) if floor is None else float(g[i]) / float(
            torch.sigmoid(torch.tensor(raw0, dtype=torch.float64)))
        if not math.isfinite(g_i) or g_i == 0.0:
            return False
        sign = -1.0 if g_i > 0 else 1.0
        t_max = math.inf
        if floor is not None:  # θ_i stays in [θ_i / ratio, θ_i · ratio] and above its floor
            ratio = o.line_max_ratio
            t_max = v0 - max(floor, v0 / ratio) if sign < 0 else v0 * (ratio - 1.0)
        scale = max(abs(v0), 1e-12)

        def phi(t: float) -> float:
            vec = theta0.clone()
            vec[i] = _raw(v0 + sign * t, floor)
            L.set_theta(vec)
            return L.lrho()[0]

        if o.line_search == "minimize":
            h = max(self.steps.get(i, _FIRST_STEP * scale), _MIN_STEP * scale)
            t, _, _ = line_minimise(phi, f0, h, t_max, o.line_tol * scale, o.line_max_evals)
        else:
            t = self.armijo(phi, f0, abs(g_i), t_max, i)
        vec = theta0.clone()
        if t > 0:
            vec[i] = _raw(v0 + sign * t, floor)
            self.steps[i] = t
        L.set_theta(vec)
        return t > 0

    def armijo(self, phi, f0: float, slope: float, t_max: float, i: int) -> float:
        """Armijo's rule on θ_i ← θ_i − μ ∂_i L (slope = |∂_i L|): μ from 4x the last
        accepted one (first: 1), halved (``armijo_shrink``) until L falls by
        ``armijo_c`` μ ∂_i L²; returns the step length t = μ |∂_i L| (0: none)."""
        o = self.L.opts
        mu = 4.0 * self.mus.get(i, 0.25)
        for _ in range(o.max_backtracks):
            t = mu * slope
            if t < t_max and phi(t) <= f0 - o.armijo_c * mu * slope * slope:
                self.mus[i] = mu
                return t
            mu *= o.armijo_shrink
        return 0.0
