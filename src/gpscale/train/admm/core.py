"""Hold-out GPCV-ADMM (Xu, Yin, Zhang, Luo, Cui; Algorithm 1) on one split.

Algorithm 1 alternates, on the augmented Lagrangian L_ρ(θ, z, λ) of eq. (11)
(:mod:`gpscale.train.admm.lagrangian`), from z⁰ = C(θ⁰)⁻¹ y_T (eq. 10) and λ⁰:

    θ^{η+1} = argmin_θ L_ρ(θ, z^η, λ^η)                 (11a), by steps of eq. (12)
    z^{η+1} = argmin_z L_ρ(θ^{η+1}, z, λ^η)             (11b), the quadratic (13), by (14)
    λ^{η+1} = λ^η + ρ′ (C(θ^{η+1}) z^{η+1} − y_T)       (11c)

The θ-step is chosen by :func:`theta_step_class`: the paper's coordinate descent with
line-minimised steps (:class:`~gpscale.train.admm.coordinate.CoordinateThetaStep`, the
default), Armijo steps along −g or L-BFGS in the raw space
(:class:`~gpscale.train.admm.theta.PaperThetaStep`, ``direction="gd"``/``"lbfgs"``), both
with z held, or, with ``coupling="tangent"``, ours
(:class:`~gpscale.train.admm.tangent.TangentThetaStep`: z moves with θ). The z-step is
the conjugate-gradient iteration of eq. (14) run on (13) to tolerance (default,
``z_step="cg"``: §3.1's CGM "terminates at an optimal solution", and the authors' code
runs it to convergence) or a single Fletcher–Reeves step (``z_step="fr"``, kept to
compare: under it the residual and λ grow and θ stalls,
benchmarks/results/admm-paper-steps/fix-z-step/); it uses only products with K_VT, K_VTᵀ
and C; the dual step may use a separate ρ′.

Convergence. With z fixed, moving θ by δ costs ρ/2 ‖J δ‖² (J = ∂(C z)/∂θ), so one
ADMM iteration moves θ by about ∇F/(ρ JᵀJ) — F the reduced CV loss — however exactly
the θ-step is solved: the linear rate is a property of the algorithm with a fixed ρ,
not of the inner solver. The paper's ρ = 5 and ε = 1e-2 therefore stop early, near θ⁰
(the authors' R code runs a fixed number of iterations, θ-step solved to ‖g‖ < 1e-3,
z-step CG to convergence, λ⁰ = 1; their Fig. 2 shows θ still descending at iteration
100, which is why the ``paper`` preset drops the ε test). Two options, off by default
(paper): ``adaptive_rho`` (residual balancing, which lowers ρ to where the primal and
dual residuals balance) and ``lam_init="adjoint"`` (λ⁰ = the multiplier that makes
∇_θ L_ρ the exact CV gradient at the start; λ⁰ = 1 pulls θ away in the first
iterations, and makes small ρ unstable).
With both, the paper's θ-step gets much closer to the CV optimum in the same number of
iterations; ``coupling="tangent"`` removes the pinning instead. The variants side by
side on kin40k: benchmarks/results/admm-quality.md.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...linalg import cg
from ...models.exact import ExactGP
from ...params import inv_softplus
from .coordinate import CoordinateThetaStep, coordinates
from .lagrangian import HoldoutLagrangian
from .options import ADMMOptions
from .tangent import TangentThetaStep
from .theta import DescentMemory, PaperThetaStep

__all__ = ["HoldoutADMM", "THETA_STEPS", "theta_step_class"]

#: the θ-step of each ``coupling``: z held (eq. 12; by ``direction``) and ours (z moves)
THETA_STEPS = {"fixed": PaperThetaStep, "tangent": TangentThetaStep}


def theta_step_class(opts: ADMMOptions) -> type:
    """The θ-step of ``opts``: coordinate descent with line search (the paper, §5.3), the
    raw-space Armijo steps along −g or L-BFGS (z held), or the tangent step."""
    if opts.coupling == "fixed" and opts.direction == "coordinate":
        return CoordinateThetaStep
    return THETA_STEPS[opts.coupling]


class HoldoutADMM(HoldoutLagrangian):
    """State (θ, z, λ) of Algorithm 1 on one split; the model holds θ.

    ``model`` is an :class:`ExactGP` whose kernel and noise are the hyperparameters
    (its own X, y are not used); its mean constant is held fixed. ``prox`` terms
    (consensus ADMM, eq. 16) add μᵀ(θ − θ̄) + τ/2 ‖θ − θ̄‖² to the θ-step objective.
    ``theta_update`` is the θ-step of ``opts.coupling`` (:data:`THETA_STEPS`);
    ``descent`` its L-BFGS memory, carried across iterations like z and λ.
    """

    def __init__(self, model: ExactGP, X_T: torch.Tensor, y_T: torch.Tensor,
                 X_V: torch.Tensor, y_V: torch.Tensor, opts: ADMMOptions,
                 client: Any = None) -> None:
        super().__init__(model, X_T, y_T, X_V, y_V, opts, client)
        self.descent = DescentMemory(opts)
        self.theta_update = theta_step_class(opts)(self, self.descent)
        self.grad_norm = math.nan  # ‖∂L_ρ/∂θ‖ at the start of the last θ-step
        # the Fletcher–Reeves z-step's memory: d_z^(η−1) and ‖g_z^(η−1)‖² (eq. 14)
        self.z_dir: torch.Tensor | None = None
        self.z_gg = math.nan

    # -- the three steps ---------------------------------------------------------------------
    def init(self, z0: torch.Tensor | None = None, lam0: torch.Tensor | None = None) -> None:
        """z⁰ = C(θ̃)⁻¹ y_T by CG (eq. 10) at θ̃ = :meth:`perturbed_theta` (§5: "with a
        perturbed θ⁰"), λ⁰ = lam0 · 1 (paper: all ones)."""
        if z0 is None:
            theta0 = self.theta()
            self.set_theta(self.perturbed_theta())
            ops = self.kernel_ops()
            z0, _ = cg(ops.c, self.y_T, precond=self.c_inv(ops), tol=self.opts.cg_tol,
                       max_iter=self.max_cg_iters())
            self.set_theta(theta0)
        self.z = z0.clone()
        if lam0 is not None:
            self.lam = lam0.clone()
        elif self.opts.lam_init == "adjoint":
            self.lam = self.adjoint_multiplier()
        else:
            self.lam = torch.full_like(self.y_T, self.opts.lam0)

    def perturbed_theta(self) -> torch.Tensor:
        """Raw θ̃ with each hyperparameter θ⁰_i (in its own units) times 1 + z0_perturb u_i,
        u_i uniform on [−1, 1] from ``z0_seed``; θ⁰ itself when z0_perturb = 0."""
        theta0 = self.theta()
        if self.opts.z0_perturb == 0:
            return theta0
        g = torch.Generator().manual_seed(self.opts.z0_seed)
        u = 2.0 * torch.rand(theta0.numel(), generator=g, dtype=torch.float64) - 1.0
        out = theta0.clone()
        for i, floor in enumerate(coordinates(self)):
            raw = theta0[i:i + 1]
            v = raw if floor is None else floor + torch.nn.functional.softplus(raw)
            v = v * (1.0 + self.opts.z0_perturb * float(u[i]))
            out[i] = (v if floor is None else inv_softplus(v - floor))[0]
        return out

    def adjoint_multiplier(self) -> torch.Tensor:
        """λ = 2 C⁻¹ K_VTᵀ(y_V − K_VT z), the multiplier with ∇_z L_ρ = 0 when the
        constraint holds (then ∇_θ L_ρ is the CV-loss gradient): one CG solve."""
        return self.solve_adjoint(self.y_V - self.kernel_ops().kvt(self.z), self.lam)

    def theta_step(self) -> int:
        """(11a): the θ-step of ``coupling`` (eq. 12 for the paper's); returns the
        accepted steps."""
        accepted, self.grad_norm = self.theta_update.step()
        return accepted

    def sigma(self, V: torch.Tensor) -> torch.Tensor:
        """Σ V = K_VTᵀ K_VT V + ρ/2 C² V, the Hessian half of the quadratic (13)."""
        ops = self.kernel_ops()
        return ops.kvt_t(ops.kvt(V)) + 0.5 * self.rho * ops.c(ops.c(V))

    def z_step(self) -> int:
        """(11b)/(13–14) by ``z_step``: CG to tolerance (:meth:`z_step_cg`, the paper) or
        one Fletcher–Reeves step (:meth:`z_step_fr`); returns the Σ-products' CG
        iterations (1 for the single step)."""
        return self.z_step_fr() if self.opts.z_step == "fr" else self.z_step_cg()

    def z_step_fr(self) -> int:
        """(14): z ← z + μ₂ d, d = −g + β d_prev, β = ‖g‖²/‖g_prev‖² (Fletcher–Reeves),
        g = 2Σz + b the gradient of (13) with b = Cλ − ρ C y_T − 2 K_VTᵀ y_V, μ₂ =
        −gᵀd / (2 dᵀΣd) its exact line minimiser; d = −g at the first step and
        whenever d is no descent direction (Σ, b change with θ and λ between steps)."""
        ops, rho = self.kernel_ops(), self.rho
        b = ops.c(self.lam - rho * self.y_T) - 2.0 * ops.kvt_t(self.y_V)
        g = 2.0 * self.sigma(self.z) + b
        gg = float(g @ g)
        d = -g
        if self.z_dir is not None and self.z_gg > 0:
            d = d + (gg / self.z_gg) * self.z_dir
            if float(d @ g) >= 0:  # restart: the quadratic has changed under d_prev
                d = -g
        dsd = float(d @ self.sigma(d))
        if gg > 0 and dsd > 0:
            self.z = self.z - (float(g @ d) / (2.0 * dsd)) * d
        self.z_dir, self.z_gg = d, gg
        return 1

    def z_step_cg(self) -> int:
        """(11b)/(13): solve (K_VTᵀK_VT + ρ/2 C²) z = K_VTᵀ y_V + ρ/2 C y_T − ½ C λ by
        CG warm-started at the current z, preconditioned by (2/ρ) P⁻² with P ≈ C (see
        ``preconditioner``); returns the CG iterations used."""
        ops, rho = self.kernel_ops(), self.rho
        sigma = self.sigma
        pinv = self.c_inv(ops)
        precond = None if pinv is None else (lambda R: (2.0 / rho) * pinv(pinv(R)))
        rhs = ops.kvt_t(self.y_V) + ops.c(0.5 * rho * self.y_T - 0.5 * self.lam)
        self.z, info = cg(sigma, rhs, precond=precond, x0=self.z, tol=self.opts.cg_tol,
                          max_iter=self.max_cg_iters())
        return info.iterations

    def lam_step(self) -> torch.Tensor:
        """(11c): λ ← λ + ρ′ (C z − y_T); returns the residual C z − y_T."""
        r = self.kernel_ops().c(self.z) - self.y_T
        rho_dual = self.rho if self.opts.rho_dual is None else self.opts.rho_dual
        self.lam = self.lam + rho_dual * r
        return r

    def iterate(self) -> dict[str, float]:
        """One ADMM iteration (11a–c); returns its diagnostics."""
        before = self.values()
        n_acc = self.theta_step()
        z_old, rho = self.z, self.rho
        cg_iters = self.z_step()
        r = self.lam_step()
        out = {"theta_steps": n_acc, "grad_norm": self.grad_norm, "cg_iters": cg_iters,
               "dtheta": float((self.values() - before).norm()), "rho": rho,
               **self.diagnostics(r)}
        if self.opts.adaptive_rho:
            out["dual_residual"] = self.balance_rho(r, z_old, out["residual"])
        return out

    def balance_rho(self, r: torch.Tensor, z_old: torch.Tensor, primal: float) -> float:
        """Residual balancing (Boyd et al. 2011, eq. 3.13, relative residuals): the dual
        residual s = ρ Jᵀ C (z⁺ − z) relative to ‖Jᵀ λ‖ against the relative primal
        residual; ρ is multiplied or divided by rho_tau (λ is unscaled, so it stays).
        Returns the relative dual residual."""
        o, ops = self.opts, self.kernel_ops()
        with torch.no_grad():
            s = self.rho * self.jt(ops.c(self.z - z_old), self.z)
            dual = float(s.norm() / self.jt(self.lam, self.z).norm().clamp_min(1e-300))
        if primal > o.rho_mu * dual:
            self.rho = min(self.rho * o.rho_tau, o.rho_max)
        elif dual > o.rho_mu * primal:
            self.rho = max(self.rho / o.rho_tau, o.rho_min)
        return dual

    def diagnostics(self, r: torch.Tensor | None = None) -> dict[str, float]:
        """CV loss (validation MSE of the mean K_VT z), L_ρ, relative residual, ‖z‖."""
        ops = self.kernel_ops()
        r = ops.c(self.z) - self.y_T if r is None else r
        e = self.y_V - ops.kvt(self.z)
        rho = self.rho
        lrho = e @ e + self.lam @ r + 0.5 * rho * (r @ r)
        return {"cv_loss": float(e @ e) / e.shape[0], "lrho": float(lrho),
                "residual": float(r.norm() / self.y_T.norm().clamp_min(1e-300)),
                "z_norm": float(self.z.norm())}
