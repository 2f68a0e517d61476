"""Settings of GPCV-ADMM (Xu, Yin, Zhang, Luo, Cui): :class:`ADMMOptions` (the paper's
ρ = 5, ε = 1e-2 and 100 iterations by default), :func:`make_options` (options from a base
and keyword overrides, as every trainer takes them) and :func:`dense_blocks` (whether a
hold-out run holds its kernel blocks in memory)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ...models.precond import check_preconditioner


@dataclass
class ADMMOptions:
    """Settings of one hold-out ADMM run (paper defaults: ρ = 5, ε = 1e-2, 100 iterations).

    rho: ρ of the augmented Lagrangian; rho_dual: ρ′ of the dual step (11c), None = ρ.
    lam0: initial dual λ⁰ = lam0 · 1 (paper: 1). eps: stop when ‖Δθ‖ < eps (θ in its
    constrained units, as in the paper), Δθ = θ^η − θ^(η−window): the change over the
    last ``window`` iterations (rounds, for consensus). ``window=1`` is Algorithm 1's
    test verbatim; the default 10 (the authors' R code runs 10 iterations) never stops
    a run in its first 10 iterations, and does not take the slow, steady drift of θ
    under a fixed ρ (see :mod:`gpscale.train.admm.core`, "Convergence": a few 1e-3
    per iteration) for convergence — with window 1 such a run stopped "converged"
    after one iteration with θ at its start. res_tol: additionally require the
    relative constraint residual ‖Cz − y_T‖/‖y_T‖ below it (None: the paper's rule
    only).
    theta_steps: Armijo steps per θ-step; direction: "gd" (steepest descent, as in
    eq. 12) or "lbfgs" (the same gradient scaled by an L-BFGS two-loop recursion whose
    curvature pairs persist across ADMM iterations; falls back to −g when it is not a
    descent direction); max_step: longest raw-space move of one step.
    cg_tol / cg_max_iter: the z-step's CG (None = 10 n_T iterations); preconditioner
    and precond_rank: an approximation P ≈ C of rank r (``"pivchol"``: pivoted
    Cholesky of K_TT, O(n_T r²); ``"grief"``: r GRIEF eigenfunctions, separable kernels
    only; ``"none"`` or r = 0: none; :mod:`gpscale.models.precond`), giving the z-step
    preconditioner (2/ρ) P⁻² ≈ (ρ/2 C²)⁻¹ and the P⁻¹ of the z⁰ and λ⁰ solves.
    memory: "auto" | "dense" | "chunked"; dense_bytes: budget of the dense blocks.
    lam_init: "const" (λ⁰ = lam0 · 1, the paper) or "adjoint" (λ⁰ = 2 C⁻¹ K_VTᵀ(y_V −
    K_VT z⁰), the multiplier that makes ∇_z L = 0 at (θ⁰, z⁰): one extra CG solve).
    adaptive_rho: residual balancing (Boyd et al. 2011, §3.4.1, with the relative
    residuals of Wohlberg 2017) — after each iteration ρ ← ρ·rho_tau when the relative
    primal residual ‖Cz − y_T‖/‖y_T‖ exceeds rho_mu times the relative dual residual
    ‖ρ Jᵀ C (z⁺ − z)‖/‖Jᵀλ‖ (J = ∂(C(θ) z)/∂θ), ρ ← ρ/rho_tau in the opposite case,
    kept in [rho_min, rho_max]; off by default (the paper's fixed ρ).
    coupling: how the θ-step treats z. "fixed" (the paper, eq. 12;
    :class:`~gpscale.train.admm.theta.PaperThetaStep`): z is held, so the penalty pins
    θ (:mod:`gpscale.train.admm.core`, "Convergence"). "tangent" (ours, not in the paper;
    :class:`~gpscale.train.admm.tangent.TangentThetaStep`): z moves with θ along the
    curve that holds the residual C z − y_T at its value, first to the tangent point
    z + μ dz (dz = −C⁻¹ J d, one CG solve per step) and then ``curve_cg`` CG iterations
    onto the curve; the gradient is the hold-out CV gradient with the adjoint
    λ̂ = 2 C⁻¹ K_VTᵀ e (one warm-started CG solve per step). The z- and λ-steps are
    unchanged. A failed line search ends the θ-step; a θ-step that accepts no step
    gives Δθ = 0 < eps, so such a run usually stops there (its history shows
    ``theta_steps`` 0): the line search has reached the noise of the inexact solves
    (more ``cg_max_iter`` and ``curve_cg`` lower it).
    diverge_tol: a relative constraint residual above this counts as divergence;
    feasible_tol: iterates with a residual below this compete for "best θ".
    """

    rho: float = 5.0
    rho_dual: float | None = None
    lam0: float = 1.0
    eps: float = 1e-2
    window: int = 10
    res_tol: float | None = None
    max_iter: int = 100
    theta_steps: int = 3
    direction: str = "lbfgs"
    lbfgs_memory: int = 10
    max_step: float = 1.0
    armijo_c: float = 1e-4
    armijo_shrink: float = 0.5
    max_backtracks: int = 40
    cg_tol: float = 1e-8
    cg_max_iter: int | None = 500
    preconditioner: str = "pivchol"
    precond_rank: int = 100
    memory: str = "auto"
    dense_bytes: int = 2**30
    block: int | None = None
    lam_init: str = "const"
    coupling: str = "fixed"
    curve_cg: int = 10
    adaptive_rho: bool = False
    rho_mu: float = 10.0
    rho_tau: float = 2.0
    rho_min: float = 1e-4
    rho_max: float = 1e4
    diverge_tol: float = 1e3
    feasible_tol: float = 0.1

    def check(self) -> None:
        """Raise ValueError naming the first bad option."""
        for name in ("rho", "eps", "max_step", "cg_tol", "diverge_tol", "feasible_tol",
                     "rho_mu", "rho_min", "rho_max"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        if self.rho_dual is not None and not (math.isfinite(self.rho_dual)
                                              and self.rho_dual > 0):
            raise ValueError(f"rho_dual must be positive (or None = rho), got {self.rho_dual!r}")
        if not math.isfinite(self.lam0):
            raise ValueError(f"lam0 must be finite, got {self.lam0!r}")
        check_preconditioner(self.preconditioner, self.precond_rank)
        for name in ("max_iter", "theta_steps", "curve_cg", "window"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if self.window < 1:
            raise ValueError(f"window must be an int >= 1 (1: the paper's test), got "
                             f"{self.window!r}")
        if self.direction not in ("gd", "lbfgs"):
            raise ValueError(f"direction must be 'gd' or 'lbfgs', got {self.direction!r}")
        if self.coupling not in ("fixed", "tangent"):
            raise ValueError("coupling must be 'fixed' (z held in the θ-step, the paper) or "
                             f"'tangent' (z moves along the constraint), got {self.coupling!r}")
        if self.lam_init not in ("const", "adjoint"):
            raise ValueError(f"lam_init must be 'const' or 'adjoint', got {self.lam_init!r}")
        if not (isinstance(self.rho_tau, (int, float)) and self.rho_tau > 1):
            raise ValueError(f"rho_tau must be a number > 1, got {self.rho_tau!r}")
        if self.rho_min > self.rho_max:
            raise ValueError(f"rho_min ({self.rho_min}) must not exceed rho_max ({self.rho_max})")
        if self.memory not in ("auto", "dense", "chunked"):
            raise ValueError(f"memory must be 'auto', 'dense' or 'chunked', got {self.memory!r}")
        if not 0 < self.armijo_shrink < 1 or not 0 < self.armijo_c < 1:
            raise ValueError("armijo_shrink and armijo_c must lie in (0, 1)")


def dense_blocks(opts: ADMMOptions, n_T: int, n_V: int, itemsize: int = 8) -> bool:
    """Whether a hold-out run holds K_VT and K_TT densely: ``memory="dense"``, or
    ``"auto"`` with their (n_T + n_V) · n_T entries within ``dense_bytes``."""
    need = (n_T + n_V) * n_T * itemsize
    return opts.memory == "dense" or (opts.memory == "auto" and need <= opts.dense_bytes)


def make_options(options: ADMMOptions | None = None, **overrides: Any) -> ADMMOptions:
    """ADMMOptions from a base (default: the paper's) and keyword overrides."""
    base = options if options is not None else ADMMOptions()
    names = {f.name for f in dataclasses.fields(ADMMOptions)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(f"unknown GPCV-ADMM option(s) {unknown}; valid: {sorted(names)}")
    opts = dataclasses.replace(base, **overrides)
    opts.check()
    return opts
