"""The θ-step of Algorithm 1 as the paper takes it (eq. 11a, 12), and the descent
machinery it shares with the tangent θ-step (:mod:`gpscale.train.admm.tangent`).

The paper minimises L_ρ(θ, z^η, λ^η) over θ (11a) inexactly, by gradient steps

    θ ← θ − μ₁ ∇_θ L_ρ(θ, z^η, λ^η)                                          (12)

with μ₁ "chosen via line minimization or the Armijo's rule". Here: ``theta_steps``
steps with Armijo backtracking (f(θ + μd) ≤ f(θ) + c μ gᵀd), along d = −g
(``direction="gd"``, eq. 12 itself) or along −H g, H an L-BFGS inverse-Hessian estimate
from curvature pairs kept across ADMM iterations (``direction="lbfgs"``).
"""

from __future__ import annotations

import math

import torch

from .lagrangian import HoldoutLagrangian
from .options import ADMMOptions


def usable(g: torch.Tensor) -> bool:
    """Whether a descent step can start from gradient g (finite and non-zero)."""
    return bool(torch.isfinite(g).all()) and float(g @ g) != 0.0


def armijo(f_new: float, f: float, mu: float, slope: float, opts: ADMMOptions) -> bool:
    """Armijo's sufficient decrease f(θ + μd) ≤ f(θ) + c μ gᵀd (and f(θ + μd) finite)."""
    return math.isfinite(f_new) and f_new <= f + opts.armijo_c * mu * slope


class DescentMemory:
    """What the θ-steps carry across ADMM iterations: L-BFGS curvature pairs (s, y) and
    the last accepted steepest-descent step size μ."""

    def __init__(self, opts: ADMMOptions) -> None:
        self.opts = opts
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.gd_mu = math.nan

    def direction(self, g: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """(d, quasi): d = −H g by the L-BFGS two-loop recursion when ``direction`` is
        "lbfgs" and pairs are held (−g where that is no descent direction; quasi is
        True either way), else d = −g and quasi False."""
        if self.opts.direction != "lbfgs" or not self.pairs:
            return -g, False
        q, alphas = g.clone(), []
        for s, y in reversed(self.pairs):
            a = (s @ q) / (y @ s)
            alphas.append(a)
            q = q - a * y
        s, y = self.pairs[-1]
        q = q * ((s @ y) / (y @ y))
        for (s, y), a in zip(self.pairs, reversed(alphas)):
            q = q + s * (a - (y @ q) / (y @ s))
        d = -q
        return (d if float(d @ g) < 0 else -g), True

    def first_step(self, d: torch.Tensor, quasi: bool) -> float:
        """The first μ to try: 1 for L-BFGS steps, else 4x the last accepted μ; never a
        raw-space move longer than ``max_step``."""
        cap = self.opts.max_step / float(d.norm())
        if quasi:
            return min(1.0, cap)
        return cap if not math.isfinite(self.gd_mu) else min(cap, 4.0 * self.gd_mu)

    def remember(self, s: torch.Tensor, y: torch.Tensor, mu: float, quasi: bool) -> None:
        """Keep the pair (s, y) = (θ⁺ − θ, g⁺ − g) when its curvature sᵀy is positive
        (the last ``lbfgs_memory`` pairs), and μ of an accepted steepest-descent step."""
        if float(s @ y) > 1e-12 * float(s.norm() * y.norm()):
            self.pairs.append((s, y))
            del self.pairs[:-self.opts.lbfgs_memory]
        if not quasi:
            self.gd_mu = mu


class PaperThetaStep:
    """(11a) by eq. (12): descent steps on L_ρ(·, z, λ) with z and λ held
    (``coupling="fixed"``, the paper's θ-step).

    The gradient is eq. (17–18) (:meth:`HoldoutLagrangian.grad`). A failed L-BFGS line
    search drops the stale curvature pairs and retries along −g."""

    def __init__(self, lagrangian: HoldoutLagrangian, memory: DescentMemory) -> None:
        self.L, self.memory = lagrangian, memory

    def step(self) -> tuple[int, float]:
        """Up to ``theta_steps`` Armijo steps; returns (accepted steps, ‖∇_θ L_ρ‖ at the
        start)."""
        L, o, memory = self.L, self.L.opts, self.memory
        f, e, r = L.lrho()
        g = L.grad(e, r)
        grad_norm = float(g.norm())
        accepted = 0
        for _ in range(2 * o.theta_steps):  # room for a retry along −g per step
            if accepted == o.theta_steps or not usable(g):
                break
            d, quasi = memory.direction(g)
            slope, mu = float(d @ g), memory.first_step(d, quasi)
            theta0, ops0 = L.theta(), L.ops
            for _ in range(o.max_backtracks):
                L.set_theta(theta0 + mu * d)  # θ + μ₁ d, eq. (12)
                f_new, e_new, r_new = L.lrho()
                if armijo(f_new, f, mu, slope, o):
                    break
                mu *= o.armijo_shrink
            else:
                L.set_theta(theta0)
                L.ops = ops0
                if quasi:  # stale curvature: retry along −g
                    memory.pairs.clear()
                    continue
                break
            g_new = L.grad(e_new, r_new)
            memory.remember(mu * d, g_new - g, mu, quasi)
            f, e, r, g = f_new, e_new, r_new, g_new
            accepted += 1
        return accepted, grad_norm
