"""Hold-out GPCV-ADMM machinery (Xu, Yin, Zhang, Luo, Cui; Algorithm 1).

Hold-out CV loss (eq. 9) with the auxiliary variable z = C⁻¹ y_T (eq. 8, 10):

    min_θ,z ‖y_V − K_VT z‖²   s.t.   C z = y_T,      C = K_TT + σ² I,

solved with the augmented Lagrangian (eq. 11)

    L_ρ(θ, z, λ) = ‖y_V − K_VT z‖² + λᵀ(C z − y_T) + ρ/2 ‖C z − y_T‖²

by alternating a θ-step (11a/12: a few Armijo-backtracked gradient steps in the
unconstrained raw space of *all* hyperparameters, noise included), a z-step (11b,
13–14: conjugate gradients on the quadratic, only products with K_VT, K_VTᵀ and C)
and the dual step (11c, with an optional separate ρ′).

The θ-gradient is the appendix's eq. (17–18) written as two kernel contractions with
rank-1 weights (e = y_V − K_VT z, r = C z − y_T, w = λ + ρ r):

    ∂L_ρ/∂θ_h = ⟨−2 e zᵀ, ∂K_VT/∂θ_h⟩ + ⟨w zᵀ, ∂K_TT/∂θ_h⟩,    ∂L_ρ/∂σ² = wᵀ z,

evaluated over row blocks with ``kernel.vjp``: O(p · n · n_T) time, O(block · n_T)
memory, no O(n³) step. Kernel blocks are held densely when they fit in
``dense_bytes`` and recomputed block-wise (``kernel.matmul``) otherwise.

Convergence. With z fixed, moving θ by δ costs ρ/2 ‖J δ‖² (J = ∂(C z)/∂θ), so one
ADMM iteration moves θ by about ∇F/(ρ JᵀJ) — F the reduced CV loss — however exactly
the θ-step is solved (3 or 50 θ-steps give the same path): the linear rate is a
property of the algorithm with a fixed ρ, not of the inner solver. The paper's ρ = 5
and ε = 1e-2 therefore stop after one iteration near θ⁰ (the authors' R code runs a
fixed 10 iterations, θ-step solved to ‖g‖ < 1e-3, λ⁰ = 1). Two options, off by
default (paper): ``adaptive_rho`` (residual balancing, which lowers ρ to where the
primal and dual residuals balance) and ``lam_init="adjoint"`` (λ⁰ = the multiplier
that makes ∇_θ L_ρ the exact CV gradient at the start; λ⁰ = 1 pulls θ away in the
first iterations, and makes small ρ unstable). On the paper's SE set (n = 500, noise
fixed, θ⁰ = 1.2 θ_true) 100 iterations close 57–69 % of the CV-loss gap with the
paper's ρ and 95–99.5 % with both options.

``coupling="tangent"`` removes the pinning instead: the θ-step moves z with θ so that
the residual stays where it was, which turns the θ-step into L-BFGS steps on the
hold-out CV loss itself (two CG solves per step, O(n · n_T) each iteration of them).
On kin40k (n = 8000, RBF-ARD, the TANGENT preset of :mod:`gpscale.train.admm`) it
stopped after 8 iterations at a test RMSE 1.012x exact ML-II's, in 0.24x its time
(``gpscale bench admm-quality``, benchmarks/results/admm-quality-n8000); the best
fixed-z variant (adaptive ρ, CG ≤ 50) was at 1.168x after 20 iterations in an earlier
run of it (benchmarks/results/admm-quality.md has every variant, at n = 4000).
"""

from __future__ import annotations

import math

import torch

from ..kernels.chunked import auto_block
from ..linalg import cg
from ..models.exact import ExactGP
from ..params import positive_params
from .admm_ops import KernelOps, rank1_vjp
from .admm_options import ADMMOptions, dense_blocks

#: public names (``ADMMOptions`` and ``dense_blocks`` live in
#: :mod:`~gpscale.train.admm_options` and are importable from here too)
__all__ = ["HoldoutADMM", "ADMMOptions", "dense_blocks"]


class HoldoutADMM:
    """State (θ, z, λ) of Algorithm 1 on one split; the model holds θ.

    ``model`` is an :class:`ExactGP` whose kernel and noise are the hyperparameters
    (its own X, y are not used); its mean constant is held fixed. ``prox`` terms
    (consensus ADMM, eq. 16) add μᵀ(θ − θ̄) + τ/2 ‖θ − θ̄‖² to the θ-step objective.
    """

    def __init__(self, model: ExactGP, X_T: torch.Tensor, y_T: torch.Tensor,
                 X_V: torch.Tensor, y_V: torch.Tensor, opts: ADMMOptions) -> None:
        opts.check()
        if X_T.shape[0] < 1 or X_V.shape[0] < 1:
            raise ValueError("both the training and the validation part need at least one "
                             f"point (got n_T={X_T.shape[0]}, n_V={X_V.shape[0]})")
        self.model, self.opts = model, opts
        m = model.mean_constant.detach()
        self.X_T, self.X_V = X_T, X_V
        self.y_T, self.y_V = y_T - m, y_V - m
        self.kparams = [p for p in model.kernel.parameters() if p.requires_grad]
        self.params = self.kparams + ([model.raw_noise] if model.raw_noise.requires_grad
                                      else [])
        if not self.params:
            raise ValueError("the model has no trainable hyperparameters")
        n_T, n_V = X_T.shape[0], X_V.shape[0]
        self.dense = dense_blocks(opts, n_T, n_V, X_T.element_size())
        self.block = opts.block or auto_block(max(n_T, n_V), n_T, X_T.element_size())
        self.prox: tuple[torch.Tensor, torch.Tensor, float] | None = None
        self.rho = float(opts.rho)  # ρ now (changes only with ``adaptive_rho``)
        self.z = torch.zeros_like(self.y_T)
        self.lam = torch.zeros_like(self.y_T)
        self.gd_mu = math.nan  # last accepted steepest-descent step size
        self.pairs: list[tuple[torch.Tensor, torch.Tensor]] = []  # L-BFGS (s, y)
        self.n_evals = 0
        self.grad_norm = math.nan  # ‖∂L_ρ/∂θ‖ at the start of the last θ-step
        self.adj = torch.zeros_like(self.y_T)  # adjoint λ̂ (``coupling="tangent"``)
        self.ops: KernelOps | None = None

    # -- θ as one raw vector -----------------------------------------------------------
    def theta(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def set_theta(self, vec: torch.Tensor) -> None:
        with torch.no_grad():
            i = 0
            for p in self.params:
                p.copy_(vec[i:i + p.numel()].reshape(p.shape))
                i += p.numel()
        self.ops = None

    def values(self) -> torch.Tensor:
        """The hyperparameters in their constrained units (what ε is measured in)."""
        out = [self.model.noise.detach().reshape(-1)] if self.model.raw_noise.requires_grad \
            else []
        for _, sub, desc in positive_params(self.model.kernel):
            if getattr(sub, desc.raw_name).requires_grad:
                out.append(getattr(sub, desc.name).detach().reshape(-1))
        return torch.cat(out) if out else self.theta()[:0]

    def _ops(self) -> KernelOps:
        if self.ops is None:
            self.ops = KernelOps(self.model.kernel, self.model.noise, self.X_T, self.X_V,
                                 self.dense, self.block)
        return self.ops

    # -- L_ρ and its θ-gradient (eq. 11, 17–18) ---------------------------------------------
    def lrho(self) -> tuple[float, torch.Tensor, torch.Tensor]:
        """L_ρ(θ, z, λ) at the model's θ, with e = y_V − K_VT z and r = C z − y_T."""
        ops = self._ops()
        self.n_evals += 1
        e = self.y_V - ops.kvt(self.z)
        r = ops.c(self.z) - self.y_T
        value = e @ e + self.lam @ r + 0.5 * self.rho * (r @ r)
        if self.prox is not None:
            mu, bar, tau = self.prox
            d = self.theta() - bar
            value = value + mu @ d + 0.5 * tau * (d @ d)
        return float(value), e, r

    def grad(self, e: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """∂L_ρ/∂θ (raw space) from e, r at the current θ: eq. (18) as two contractions."""
        w = self.lam + self.rho * r
        k = self.model.kernel
        g1 = rank1_vjp(k, self.X_V, self.X_T, -2.0 * e, self.z, self.block)
        g = self._jt(w, self.z, g1)
        return g + self._prox_grad()

    def _jt(self, w: torch.Tensor, z: torch.Tensor,
            extra: dict[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Jᵀ w with J = ∂(C(θ) z)/∂θ (raw space): the contraction ⟨w zᵀ, ∂C/∂θ⟩, plus
        ``extra`` kernel-parameter gradients."""
        g2 = rank1_vjp(self.model.kernel, self.X_T, self.X_T, w, z, self.block)
        extra = extra or {}
        parts = []
        for p in self.kparams:
            g = extra.get(p, torch.zeros_like(p)) + g2.get(p, torch.zeros_like(p))
            parts.append(g.reshape(-1))
        if self.model.raw_noise.requires_grad:
            d_noise = w @ z  # ∂(wᵀ C z)/∂σ² = wᵀ z
            parts.append(type(self.model).noise.raw_grad(self.model, d_noise).reshape(-1))
        return torch.cat(parts)

    # -- the three steps ---------------------------------------------------------------------
    def init(self, z0: torch.Tensor | None = None, lam0: torch.Tensor | None = None) -> None:
        """z⁰ = C(θ⁰)⁻¹ y_T by CG (eq. 10), λ⁰ = lam0 · 1 (paper: all ones)."""
        ops = self._ops()
        if z0 is None:
            z0, _ = cg(ops.c, self.y_T, precond=self._c_inv(ops), tol=self.opts.cg_tol,
                       max_iter=self._cg_iters())
        self.z = z0.clone()
        if lam0 is not None:
            self.lam = lam0.clone()
        elif self.opts.lam_init == "adjoint":
            self.lam = self.adjoint_multiplier()
        else:
            self.lam = torch.full_like(self.y_T, self.opts.lam0)

    def adjoint_multiplier(self) -> torch.Tensor:
        """λ = 2 C⁻¹ K_VTᵀ(y_V − K_VT z), the multiplier with ∇_z L_ρ = 0 when the
        constraint holds (then ∇_θ L_ρ is the CV-loss gradient): one CG solve."""
        ops = self._ops()
        rhs = 2.0 * ops.kvt_t(self.y_V - ops.kvt(self.z))
        lam, _ = cg(ops.c, rhs, precond=self._c_inv(ops), x0=self.lam, tol=self.opts.cg_tol,
                    max_iter=self._cg_iters())
        return lam

    def _c_inv(self, ops: KernelOps):
        """P⁻¹ ≈ C⁻¹ (``preconditioner`` / ``precond_rank``), or None."""
        return ops.c_inv_approx(self.opts.preconditioner, self.opts.precond_rank)

    def _cg_iters(self) -> int:
        n_T = self.y_T.shape[0]  # rounding spoils CG's n_T-step termination: allow more
        return 10 * n_T if self.opts.cg_max_iter is None else self.opts.cg_max_iter

    def _direction(self, g: torch.Tensor) -> torch.Tensor:
        """−H g with H the L-BFGS inverse-Hessian estimate (two-loop recursion), or −g."""
        if self.opts.direction == "gd" or not self.pairs:
            return -g
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
        return d if float(d @ g) < 0 else -g

    def tangent_grad(self, e: torch.Tensor) -> torch.Tensor:
        """The θ-gradient of L_ρ along the constraint's tangent (``coupling="tangent"``):
        z moves with θ as dz = −C⁻¹ J dθ, which keeps C z − y_T fixed to first order,
        and the gradient becomes ∂‖e‖²/∂θ + Jᵀ λ̂ with the adjoint λ̂ = 2 C⁻¹ K_VTᵀ e
        (one CG solve, warm-started) — the hold-out CV gradient at a feasible z,
        independent of λ and ρ."""
        ops = self._ops()
        self.adj, _ = cg(ops.c, 2.0 * ops.kvt_t(e), precond=self._c_inv(ops), x0=self.adj,
                         tol=self.opts.cg_tol, max_iter=self._cg_iters())
        g1 = rank1_vjp(self.model.kernel, self.X_V, self.X_T, -2.0 * e, self.z, self.block)
        return self._jt(self.adj, self.z, g1) + self._prox_grad()

    def _prox_grad(self) -> torch.Tensor | float:
        if self.prox is None:
            return 0.0
        mu, bar, tau = self.prox
        return mu + tau * (self.theta() - bar)

    def tangent_z(self, d: torch.Tensor) -> torch.Tensor:
        """dz = −C⁻¹ J d: how z moves along the constraint's tangent when θ moves by d.
        J d = ∂(C(θ) z)/∂θ · d by a forward difference of C z (raw step 1e-6/‖d‖: one
        kernel evaluation; relative error ~1e-6, which the curve's correction in
        :meth:`_on_curve` absorbs)."""
        theta0, ops0 = self.theta(), self._ops()
        c0, pinv0 = ops0.c(self.z), self._c_inv(ops0)  # everything at θ₀ first
        h = 1e-6 / max(float(d.norm()), 1e-300)
        self.set_theta(theta0 + h * d)
        jd = (self._ops().c(self.z) - c0) / h
        self.set_theta(theta0)
        self.ops = ops0
        dz, _ = cg(ops0.c, -jd, precond=pinv0, tol=self.opts.cg_tol,
                   max_iter=self._cg_iters())
        return dz

    def _on_curve(self, z: torch.Tensor, r0: torch.Tensor, pinv0) -> torch.Tensor:
        """z corrected towards C(θ) z = y_T + r0 at the trial θ (the residual held at its
        value r0 where the θ-step started): ``curve_cg`` CG iterations from the tangent
        point ``z``, preconditioned by ``pinv0``, the start's P⁻¹ (``curve_cg`` = 0:
        the tangent point itself)."""
        if self.opts.curve_cg == 0:
            return z
        out, _ = cg(self._ops().c, self.y_T + r0, precond=pinv0, x0=z,
                    tol=self.opts.cg_tol, max_iter=self.opts.curve_cg)
        return out

    def theta_step(self) -> int:
        """(11a)/(12): ``theta_steps`` descent steps on L_ρ(·, z, λ) with Armijo
        backtracking (f(θ + μd) ≤ f(θ) + c μ gᵀd); returns the accepted steps.

        L-BFGS steps try μ = 1 first; steepest-descent steps start from 4x the last
        accepted μ (capped at ``max_step``/‖g‖). A failed L-BFGS step drops the stale
        curvature pairs and retries along −g. With ``coupling="tangent"`` the gradient
        is :meth:`tangent_grad`'s and each trial θ + μd takes z from the tangent point
        z + μ dz (:meth:`tangent_z`) onto the residual-holding curve
        (:meth:`_on_curve`); z keeps the accepted trial's value."""
        o = self.opts
        tangent = o.coupling == "tangent"
        accepted = 0
        f, e, r = self.lrho()
        g = self.tangent_grad(e) if tangent else self.grad(e, r)
        self.grad_norm = float(g.norm())
        for _ in range(2 * o.theta_steps):
            if accepted == o.theta_steps or not bool(torch.isfinite(g).all()) \
                    or float(g @ g) == 0.0:
                break
            quasi = o.direction == "lbfgs" and bool(self.pairs)
            d = self._direction(g) if quasi else -g
            quasi = quasi and float(d @ g) < 0
            d = d if quasi else -g
            slope = float(d @ g)
            cap = o.max_step / float(d.norm())
            if quasi:
                mu = min(1.0, cap)
            else:
                mu = cap if not math.isfinite(self.gd_mu) else min(cap, 4.0 * self.gd_mu)
            theta0, ops0, z0 = self.theta(), self.ops, self.z
            pinv0 = self._c_inv(self._ops()) if tangent else None  # P⁻¹ at θ₀
            dz = self.tangent_z(d) if tangent else None
            for _ in range(o.max_backtracks):
                self.set_theta(theta0 + mu * d)
                if dz is not None:
                    self.z = self._on_curve(z0 + mu * dz, r, pinv0)
                f_new, e_new, r_new = self.lrho()
                if math.isfinite(f_new) and f_new <= f + o.armijo_c * mu * slope:
                    break
                mu *= o.armijo_shrink
            else:
                self.set_theta(theta0)
                self.ops, self.z = ops0, z0
                if quasi and not tangent:  # stale curvature: retry along −g
                    self.pairs.clear()
                    continue
                break  # (tangent: no retry; near the optimum failures are the noise
                #         floor of the curve's inexact solves)
            g_new = self.tangent_grad(e_new) if tangent else self.grad(e_new, r_new)
            s_vec, y_vec = mu * d, g_new - g
            if float(s_vec @ y_vec) > 1e-12 * float(s_vec.norm() * y_vec.norm()):
                self.pairs.append((s_vec, y_vec))
                del self.pairs[:-o.lbfgs_memory]
            if not quasi:
                self.gd_mu = mu
            f, e, r, g = f_new, e_new, r_new, g_new
            accepted += 1
        return accepted

    def z_step(self) -> int:
        """(11b)/(13–14): solve (K_VTᵀK_VT + ρ/2 C²) z = K_VTᵀ y_V + ρ/2 C y_T − ½ C λ by
        CG warm-started at the current z, preconditioned by (2/ρ) P⁻² with P ≈ C (see
        ``preconditioner``); returns the CG iterations used."""
        ops, rho = self._ops(), self.rho

        def sigma(V: torch.Tensor) -> torch.Tensor:  # Σ V, columns at a time
            return ops.kvt_t(ops.kvt(V)) + 0.5 * rho * ops.c(ops.c(V))

        pinv = self._c_inv(ops)
        precond = None if pinv is None else (lambda R: (2.0 / rho) * pinv(pinv(R)))
        rhs = ops.kvt_t(self.y_V) + ops.c(0.5 * rho * self.y_T - 0.5 * self.lam)
        self.z, info = cg(sigma, rhs, precond=precond, x0=self.z, tol=self.opts.cg_tol,
                          max_iter=self._cg_iters())
        return info.iterations

    def lam_step(self) -> torch.Tensor:
        """(11c): λ ← λ + ρ′ (C z − y_T); returns the residual C z − y_T."""
        r = self._ops().c(self.z) - self.y_T
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
        o, ops = self.opts, self._ops()
        with torch.no_grad():
            s = self.rho * self._jt(ops.c(self.z - z_old), self.z)
            dual = float(s.norm() / self._jt(self.lam, self.z).norm().clamp_min(1e-300))
        if primal > o.rho_mu * dual:
            self.rho = min(self.rho * o.rho_tau, o.rho_max)
        elif dual > o.rho_mu * primal:
            self.rho = max(self.rho / o.rho_tau, o.rho_min)
        return dual

    def diagnostics(self, r: torch.Tensor | None = None) -> dict[str, float]:
        """CV loss (validation MSE of the mean K_VT z), L_ρ, relative residual, ‖z‖."""
        ops = self._ops()
        r = ops.c(self.z) - self.y_T if r is None else r
        e = self.y_V - ops.kvt(self.z)
        rho = self.rho
        lrho = e @ e + self.lam @ r + 0.5 * rho * (r @ r)
        return {"cv_loss": float(e @ e) / e.shape[0], "lrho": float(lrho),
                "residual": float(r.norm() / self.y_T.norm().clamp_min(1e-300)),
                "z_norm": float(self.z.norm())}
