"""The stochastic NLML gradient of an exact GP solved by CG (BBMM, Gardner, Pleiss,
Bindel, Weinberger & Wilson 2018, §4).

The gradient needs only solves with C and one contraction with ∂K:

    ∂L/∂θ = −½ αᵀ(∂C/∂θ)α + ½ tr(C⁻¹ ∂C/∂θ),

the trace estimated with probes drawn from the preconditioner, z ~ N(0, P):
E[(C⁻¹z)ᵀ ∂C (P⁻¹z)] = tr(C⁻¹ ∂C P⁻¹ E[zzᵀ]) = tr(C⁻¹ ∂C), unbiased for any SPD P. α and
the t solves u_i = C⁻¹z_i come from one batched CG, and the kernel's gradient from one
pass of contractions (:meth:`KernelOperator.contraction`) with the rank-(t+1) cotangent
G = ½ (−ααᵀ + (1/t) Σ_i u_i w_iᵀ), w_i = P⁻¹z_i. The noise's gradient is
½(−αᵀα + (1/t) Σ u_iᵀw_i), the constant mean's −Σα; with copies the noise's weighs each
row by 1/c and adds the derivative of the copies' own term, ((n − g)/σ² − S/σ⁴)/2.
The hyperparameters' search on every row that uses it is
:func:`gpscale.train.exact_refine.refine_on_rows`.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from ..linalg.lowrank import factor_gram

__all__ = ["StochasticGradient", "ProbeDraws", "SolveCut"]


class SolveCut(Exception):
    """A gradient's CG was ended by its ``stop`` before it converged: no gradient."""


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


class StochasticGradient:
    """The stochastic NLML gradient of an exact GP solved by CG (module docstring), by
    parameter, at the model's current hyperparameters, from ``probes`` probes.

    The preconditioner's factor L and the probes' draws are found at construction and
    by :meth:`refresh`, and kept in between: the probes z_i = L e_i + σ e'_i with e, e'
    fixed (common random numbers) make every evaluation the gradient of one fixed
    surrogate, L is kept while P's σ² follows the noise, and each solve is warm-started
    from the one before."""

    def __init__(self, model: Any, probes: int, seed: int = 0) -> None:
        self.model, self.t, self.seed = model, int(probes), seed
        self.solution: torch.Tensor | None = None
        self.refresh()

    def refresh(self) -> None:
        """L, LᵀL and the probes' draws at the current hyperparameters."""
        model, solver = self.model, self.model.solver
        with torch.no_grad():
            op = solver.operator(model, solver.solve_dtype(model))
            self.L = solver.precond_factor(model, op)
        self.gram = None if self.L is None else factor_gram(self.L)
        self.draws = ProbeDraws(model.n, 0 if self.L is None else self.L.shape[1], self.t,
                                self.seed, model.X.dtype, model.X.device)

    def __call__(self, stop: Any = None
                 ) -> tuple[dict[torch.Tensor, torch.Tensor], dict[str, Any]]:
        """(gradients by parameter, info: CG iterations and residual, the data-fit term
        ½ rᵀα, seconds); the solution [α, U] is kept as the next call's start.
        ``stop()``, asked at every CG iteration, ends the solve: :class:`SolveCut` is
        raised unless it had converged, and the kept solution stays the last call's."""
        t0 = time.perf_counter()
        model, solver = self.model, self.model.solver
        noise = model.noise.detach()
        copies, scale = model.copies, model.copy_scale()
        with torch.no_grad():
            op = solver.operator(model, solver.solve_dtype(model))
            precond = solver.preconditioner(model, self.L, self.gram)
            Z = self.draws.probes(self.L, float(noise), scale)
            W = Z / op.noise_column() if precond is None else precond(Z)
            r = model.y - model.mean_constant.detach()
            B = torch.cat([r[:, None], Z], 1)
            halted = []

            def halt(rel: torch.Tensor) -> bool:
                if stop is not None and stop():
                    halted.append(True)
                return bool(halted)

            sol, info, op = solver.run_cg(model, op, B, precond, self.solution, stop=halt)
            if halted and not info.converged:
                raise SolveCut(f"CG stopped after {info.iterations} iterations")
            alpha, U = sol[:, 0], sol[:, 1:]
            t = self.draws.t
            left = torch.cat([-alpha[:, None], U / t], 1).mul_(0.5)   # G = left @ rightᵀ
            right = torch.cat([alpha[:, None], W], 1)
        self.solution = sol
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
        return grads, {"iterations": info.iterations,
                       "residual": float(info.rel_residual.max()),
                       "converged": info.converged, "data_fit": float(0.5 * (r @ alpha)),
                       "solve_s": t_solve, "seconds": time.perf_counter() - t0}

    def keep_weights(self) -> None:
        """Leave the model's α at the last evaluation's solution (a warm start for the
        posterior's solve)."""
        if self.solution is not None:
            self.model.solver.alpha = self.solution[:, 0].clone()
