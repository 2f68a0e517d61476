"""The augmented Lagrangian of hold-out GPCV-ADMM on one split, and its θ-gradient.

Hold-out CV loss (eq. 9) with the auxiliary variable z = C⁻¹ y_T (eq. 8, 10):

    min_θ,z ‖y_V − K_VT z‖²   s.t.   C z = y_T,      C = K_TT + σ² I,

and its augmented Lagrangian (eq. 11)

    L_ρ(θ, z, λ) = ‖y_V − K_VT z‖² + λᵀ(C z − y_T) + ρ/2 ‖C z − y_T‖².

The θ-gradient is the appendix's eq. (17–18) written as two kernel contractions with
rank-1 weights (e = y_V − K_VT z, r = C z − y_T, w = λ + ρ r):

    ∂L_ρ/∂θ_h = ⟨−2 e zᵀ, ∂K_VT/∂θ_h⟩ + ⟨w zᵀ, ∂K_TT/∂θ_h⟩,    ∂L_ρ/∂σ² = wᵀ z,

evaluated over row blocks with ``kernel.vjp``: O(p · n · n_T) time, O(block · n_T)
memory, no O(n³) step. Kernel blocks are held densely when they fit in
``dense_bytes`` and recomputed block-wise (``kernel.matmul``) otherwise.
"""

from __future__ import annotations

from typing import Any

import torch

from ...kernels.chunked import auto_block
from ...linalg import cg
from ...models.exact import ExactGP
from ...params import positive_params
from .ops import KernelOps
from .options import ADMMOptions, dense_blocks


class HoldoutLagrangian:
    """L_ρ(θ, z, λ) of eq. (11) on one split (D_T, D_V); the model holds θ.

    ``model`` is an :class:`ExactGP` whose kernel and noise are the hyperparameters
    (its own X, y are not used); its mean constant is held fixed. ``prox`` terms
    (consensus ADMM, eq. 16) add μᵀ(θ − θ̄) + τ/2 ‖θ − θ̄‖² to L_ρ.
    """

    def __init__(self, model: ExactGP, X_T: torch.Tensor, y_T: torch.Tensor,
                 X_V: torch.Tensor, y_V: torch.Tensor, opts: ADMMOptions,
                 client: Any = None) -> None:
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
        self.n_evals = 0
        self.ops: KernelOps | None = None  # products at the current θ, built on first use
        self.client = client  # a dask client: chunked products on its workers

    # -- θ as one raw vector -----------------------------------------------------------
    def theta(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def set_theta(self, vec: torch.Tensor) -> None:
        """Set the raw θ; the kernel products are rebuilt only if a kernel parameter
        changed (a new σ² alone updates C = K_TT + σ²I in place: the coordinate θ-step's
        noise coordinate costs no kernel evaluation)."""
        kernel_changed, i = False, 0
        with torch.no_grad():
            for p in self.params:
                new = vec[i:i + p.numel()].reshape(p.shape)
                i += p.numel()
                if not torch.equal(p, new):
                    p.copy_(new)
                    kernel_changed = kernel_changed or p is not self.model.raw_noise
        if kernel_changed or self.ops is None:
            self.ops = None
        else:
            self.ops.set_noise(self.model.noise)

    def values(self) -> torch.Tensor:
        """The hyperparameters in their constrained units (what ε is measured in)."""
        out = [self.model.noise.detach().reshape(-1)] if self.model.raw_noise.requires_grad \
            else []
        for _, sub, desc in positive_params(self.model.kernel):
            if getattr(sub, desc.raw_name).requires_grad:
                out.append(getattr(sub, desc.name).detach().reshape(-1))
        return torch.cat(out) if out else self.theta()[:0]

    def kernel_ops(self) -> KernelOps:
        """Products with K_VT, K_VTᵀ and C at the current θ."""
        if self.ops is None:
            self.ops = KernelOps(self.model.kernel, self.model.noise, self.X_T, self.X_V,
                                 self.dense, self.block, self.client)
        return self.ops

    # -- L_ρ and its θ-gradient (eq. 11, 17–18) ---------------------------------------------
    def lrho(self) -> tuple[float, torch.Tensor, torch.Tensor]:
        """L_ρ(θ, z, λ) at the model's θ, with e = y_V − K_VT z and r = C z − y_T."""
        ops = self.kernel_ops()
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
        """∂L_ρ/∂θ (raw space) from e, r at the current θ: eq. (18) as two contractions,
        with w = λ + ρ r."""
        return self.grad_with(e, self.lam + self.rho * r)

    def grad_with(self, e: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """∂/∂θ of ‖y_V − K_VT z‖² + wᵀ(C z − y_T) at fixed z and w (eq. 18 with
        λ + ρ r replaced by w), plus the consensus term's gradient."""
        g1 = self.kernel_ops().vjp("V", -2.0 * e, self.z)
        return self.jt(w, self.z, g1) + self.prox_grad()

    def jt(self, w: torch.Tensor, z: torch.Tensor,
           extra: dict[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Jᵀ w with J = ∂(C(θ) z)/∂θ (raw space): the contraction ⟨w zᵀ, ∂C/∂θ⟩, plus
        ``extra`` kernel-parameter gradients."""
        g2 = self.kernel_ops().vjp("T", w, z)
        extra = extra or {}
        parts = []
        for p in self.kparams:
            g = extra.get(p, torch.zeros_like(p)) + g2.get(p, torch.zeros_like(p))
            parts.append(g.reshape(-1))
        if self.model.raw_noise.requires_grad:
            d_noise = w @ z  # ∂(wᵀ C z)/∂σ² = wᵀ z
            parts.append(type(self.model).noise.raw_grad(self.model, d_noise).reshape(-1))
        return torch.cat(parts)

    def prox_grad(self) -> torch.Tensor | float:
        """Gradient of the consensus term μᵀ(θ − θ̄) + τ/2 ‖θ − θ̄‖² (0 without one)."""
        if self.prox is None:
            return 0.0
        mu, bar, tau = self.prox
        return mu + tau * (self.theta() - bar)

    # -- solves with C ----------------------------------------------------------------------
    def c_inv(self, ops: KernelOps):
        """P⁻¹ ≈ C⁻¹ (``preconditioner`` / ``precond_rank``), or None."""
        return ops.c_inv_approx(self.opts.preconditioner, self.opts.precond_rank)

    def max_cg_iters(self) -> int:
        n_T = self.y_T.shape[0]  # rounding spoils CG's n_T-step termination: allow more
        return 10 * n_T if self.opts.cg_max_iter is None else self.opts.cg_max_iter

    def solve_adjoint(self, e: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
        """λ̂ = 2 C⁻¹ K_VTᵀ e by CG from ``x0``: the multiplier with ∇_z L_ρ = 0 when the
        constraint holds (then Jᵀ λ̂ completes the CV-loss gradient)."""
        ops = self.kernel_ops()
        lam, _ = cg(ops.c, 2.0 * ops.kvt_t(e), precond=self.c_inv(ops), x0=x0,
                    tol=self.opts.cg_tol, max_iter=self.max_cg_iters())
        return lam
