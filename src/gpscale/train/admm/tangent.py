"""The tangent θ-step (``coupling="tangent"``): ours, not in the paper.

The paper's θ-step (eq. 12, :class:`~gpscale.train.admm.theta.PaperThetaStep`) holds
z, so the penalty ρ/2 ‖C(θ) z − y_T‖² pins θ near where z was made (see
:mod:`gpscale.train.admm.core`, "Convergence"). Here z moves with θ instead, along the
curve that holds the residual r₀ = C z − y_T at its value where the θ-step started:

    C(θ + μ d) z(μ) = y_T + r₀,      z(μ) ≈ z + μ dz,   dz = −C⁻¹ J d,

J = ∂(C(θ) z)/∂θ. On that curve λᵀr and ρ/2 ‖r‖² are constant, so the θ-step descends
the hold-out CV loss ‖y_V − K_VT z‖² itself (plus the consensus term of eq. 16, if
any), with the gradient

    ∂‖e‖²/∂θ + Jᵀ λ̂,     λ̂ = 2 C⁻¹ K_VTᵀ e     (the adjoint; e = y_V − K_VT z),

which is eq. (18) with λ + ρ r replaced by λ̂: the CV gradient at a feasible z,
independent of λ and ρ. Each step costs two CG solves (λ̂, warm-started, and dz) and
``curve_cg`` CG iterations per trial point, O(n · n_T) each iteration of them. The z-
and λ-steps of Algorithm 1 are unchanged. Quality and time against exact ML-II on
kin40k: benchmarks/results/admm-quality-n8000 and admm-quality-n16000 (the
:data:`~gpscale.train.admm.TANGENT` preset).
"""

from __future__ import annotations

import torch

from ...linalg import cg
from .lagrangian import HoldoutLagrangian
from .theta import DescentMemory, armijo, usable


class TangentThetaStep:
    """Descent steps on the hold-out CV loss with z kept on the residual-holding curve.

    Each trial θ + μd takes z from the tangent point z + μ dz (:meth:`z_tangent`) onto
    the curve (:meth:`on_curve`); z keeps the accepted trial's value. A failed line
    search ends the θ-step (no retry along −g: near the optimum failures are the noise
    floor of the curve's inexact solves)."""

    def __init__(self, lagrangian: HoldoutLagrangian, memory: DescentMemory) -> None:
        self.L, self.memory = lagrangian, memory
        self.adj = torch.zeros_like(lagrangian.y_T)  # λ̂, the warm start of its solve

    def grad(self, e: torch.Tensor) -> torch.Tensor:
        """∂‖e‖²/∂θ + Jᵀ λ̂ with λ̂ = 2 C⁻¹ K_VTᵀ e (one CG solve, warm-started)."""
        self.adj = self.L.solve_adjoint(e, self.adj)
        return self.L.grad_with(e, self.adj)

    def z_tangent(self, d: torch.Tensor) -> torch.Tensor:
        """dz = −C⁻¹ J d: how z moves along the constraint's tangent when θ moves by d.
        J d = ∂(C(θ) z)/∂θ · d by a forward difference of C z (raw step 1e-6/‖d‖: one
        kernel evaluation; relative error ~1e-6, which the curve's correction in
        :meth:`on_curve` absorbs)."""
        L = self.L
        theta0, ops0 = L.theta(), L.kernel_ops()
        c0, pinv0 = ops0.c(L.z), L.c_inv(ops0)  # everything at θ₀ first
        h = 1e-6 / max(float(d.norm()), 1e-300)
        L.set_theta(theta0 + h * d)
        jd = (L.kernel_ops().c(L.z) - c0) / h
        L.set_theta(theta0)
        L.ops = ops0
        dz, _ = cg(ops0.c, -jd, precond=pinv0, tol=L.opts.cg_tol, max_iter=L.max_cg_iters())
        return dz

    def on_curve(self, z: torch.Tensor, r0: torch.Tensor, pinv0) -> torch.Tensor:
        """z corrected towards C(θ) z = y_T + r0 at the trial θ (the residual held at its
        value r0 where the θ-step started): ``curve_cg`` CG iterations from the tangent
        point ``z``, preconditioned by ``pinv0``, the start's P⁻¹ (``curve_cg`` = 0:
        the tangent point itself)."""
        L = self.L
        if L.opts.curve_cg == 0:
            return z
        out, _ = cg(L.kernel_ops().c, L.y_T + r0, precond=pinv0, x0=z, tol=L.opts.cg_tol,
                    max_iter=L.opts.curve_cg)
        return out

    def step(self) -> tuple[int, float]:
        """Up to ``theta_steps`` Armijo steps along the curve; returns (accepted steps,
        ‖CV gradient‖ at the start)."""
        L, o, memory = self.L, self.L.opts, self.memory
        f, e, r = L.lrho()
        g = self.grad(e)
        grad_norm = float(g.norm())
        accepted = 0
        for _ in range(o.theta_steps):
            if not usable(g):
                break
            d, quasi = memory.direction(g)
            slope, mu = float(d @ g), memory.first_step(d, quasi)
            theta0, ops0, z0 = L.theta(), L.ops, L.z
            pinv0 = L.c_inv(L.kernel_ops())  # P⁻¹ at θ₀
            dz = self.z_tangent(d)
            for _ in range(o.max_backtracks):
                L.set_theta(theta0 + mu * d)
                L.z = self.on_curve(z0 + mu * dz, r, pinv0)
                f_new, e_new, r_new = L.lrho()
                if armijo(f_new, f, mu, slope, o):
                    break
                mu *= o.armijo_shrink
            else:
                L.set_theta(theta0)
                L.ops, L.z = ops0, z0
                break
            g_new = self.grad(e_new)
            memory.remember(mu * d, g_new - g, mu, quasi)
            f, e, r, g = f_new, e_new, r_new, g_new
            accepted += 1
        return accepted, grad_norm
