"""Predictive variances of an exact GP solved by CG, without an n x n matrix.

var(x*) = k(x*, x*) − k*ᵀ C⁻¹ k*,  C = K + σ²I,  k* = K(X, x*).

Two caches; both answer a batch of test points with one product K(X*, X) [α, W]
(the mean's weights α and the cache W in the same pass), O(n (1 + s)) per point.

``PathwiseVariance`` (default for kernels with a spectral density: RBF, Matérn):
pathwise conditioning (Wilson et al. 2020, "Efficiently sampling functions from
Gaussian process posteriors", eq. 13). For s = 1..S draw a prior function
g_s(x) = √(2 s²/F) Σ_j (a_j cos ω_jᵀx + b_j sin ω_jᵀx) with its *own* F/2 random
frequencies ω ~ p(ω) (Bochner) and weights a, b ~ N(0, 1), and noise ε_s ~ N(0, σ²I);
solve v_s = C⁻¹(g_s(X) + ε_s) in the same CG as α. Then

    r_s(x*) = g_s(x*) − k*ᵀ v_s,   E[r_s(x*)²] = k** − k*ᵀC⁻¹k*

exactly — not only as F → ∞ — because with fresh frequencies per draw
E[g_s(x) g_s(x')] = k(x, x') (Rahimi & Recht 2007) and the expectation is quadratic
in g_s. The estimate var ≈ (1/S) Σ_s r_s² is unbiased, with relative standard error
about √(2/S) per point (the solves' own error aside): measured, about 1/√S at the
median over test points and 4/√S at their 99th percentile, 12 % and 50 % at the
default S = 64 (:meth:`PathwiseVariance.note` says so in the summary and the file).

``LanczosVariance`` (any kernel): the LOVE idea (Pleiss et al. 2018, eq. 7–9) with a
block Krylov space: Q an orthonormal basis of span{B, CB, ..., C^{s−1}B}, B = K(X, Z)
for p random training rows Z, H = QᵀCQ = L Lᵀ and R = Q L⁻ᵀ, so that
var ≈ k** − ‖Rᵀk*‖². The projection gives k*ᵀRRᵀk* ≤ k*ᵀC⁻¹k*: an upper bound on
the variance, exact once p·s ≥ n, but too wide when σ² is small against K's spectrum
(many eigen-directions above σ² — the measurements are in the report on issue 30).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..features.rff import draw_frequencies
from ..linalg.cholesky import robust_cholesky
from ..rng import as_generator

__all__ = ["PathwiseVariance", "LanczosVariance", "variance_cache", "pathwise_ok"]


def _spectral(kernel: Any):
    """(spectral density, tiled form) when pathwise sampling applies, else None."""
    density = getattr(kernel, "spectral_density", lambda: None)()
    form = kernel.tiled_form()
    if density is None or form is None:
        return None
    return density, form


#: the pathwise cache's default draws S and random features per draw F
PATHWISE_SAMPLES, PATHWISE_FEATURES = 64, 256
#: the pathwise variance's relative error over test points is about these / √S at the
#: median and at the 99th percentile (measured against Cholesky variances at n = 300 to
#: 2000, S = 16 to 1024: benchmarks/results/cg-variance/README.md)
PATHWISE_MEDIAN_ERROR, PATHWISE_P99_ERROR = 1.0, 4.0


def pathwise_ok(kernel: Any) -> bool:
    """True when :class:`PathwiseVariance` can sample the kernel's prior."""
    return _spectral(kernel) is not None


class PathwiseVariance:
    """S prior draws of F random Fourier features each, solved against C (module doc).

    Tensors (saved with the model): ``omega`` (S, F/2, d) frequencies divided by the
    lengthscales, ``weights`` (S, F) with the scale √(2s²/F) folded in, ``V`` (n, S)."""

    kind = "pathwise"

    def __init__(self, num_samples: int = 64, num_features: int = 256) -> None:
        if num_samples < 2 or num_features < 2 or num_features % 2:
            raise ValueError("pathwise variances need num_samples >= 2 and an even "
                             f"num_features >= 2, got {num_samples}, {num_features}")
        self.S, self.F = int(num_samples), int(num_features)
        self.omega = self.weights = self.V = None
        self.dims: tuple[int, ...] | None = None

    def probes(self, kernel: Any, X: torch.Tensor, noise: float | torch.Tensor,
               seed: int | torch.Generator) -> torch.Tensor:
        """Draw the S prior functions; returns the right-hand sides g_s(X) + ε_s (n, S),
        ε_s ~ N(0, diag(noise)) (``noise``: σ², or each row's (n,))."""
        spec = _spectral(kernel)
        if spec is None:
            raise ValueError("pathwise variances need a stationary kernel with a spectral "
                             "density (RBF, Matérn); use variance='lanczos'")
        density, form = spec
        gen = as_generator(seed)
        self.dims = form.active_dims
        Xa = self._active(X)
        d, half = Xa.shape[1], self.F // 2
        ls = form.lengthscale.to(torch.float64).cpu().expand(d)
        # plain (not orthogonal) draws: one call for all S, and unbiased all the same
        omega = draw_frequencies(self.S * half, d, density, False, gen).reshape(
            self.S, half, d) / ls
        scale = math.sqrt(2.0 * form.scale / self.F)
        weights = torch.randn(self.S, self.F, generator=gen, dtype=torch.float64) * scale
        eps = torch.randn(X.shape[0], self.S, generator=gen, dtype=torch.float64)
        self.omega = omega.to(X)
        self.weights = weights.to(X)
        noise = torch.as_tensor(noise).to(X)  # σ², or σ²/c of each row (n,) with copies
        return self.prior(X).add_(eps.to(X) * noise.sqrt().reshape(-1, 1))

    def _active(self, X: torch.Tensor) -> torch.Tensor:
        if self.dims is None:
            return X
        return X[:, torch.as_tensor(self.dims, device=X.device) % X.shape[1]]

    def prior(self, X: torch.Tensor, block: int | None = None) -> torch.Tensor:
        """g_s(X) for every draw s: (n, S), in blocks of rows (about 32 MiB each)."""
        Xa, half = self._active(X), self.F // 2
        Om = self.omega.reshape(self.S * half, -1)
        a, b = self.weights[:, :half], self.weights[:, half:]
        block = block or max(1, 2**22 // max(1, self.S * half))
        out = X.new_empty(X.shape[0], self.S)
        for s in range(0, X.shape[0], block):
            P = (Xa[s:s + block] @ Om.mT).reshape(-1, self.S, half)
            out[s:s + block] = (torch.cos(P) * a).sum(-1) + (torch.sin(P).mul_(b)).sum(-1)
        return out

    def finish(self, solutions: torch.Tensor, op: Any) -> None:
        """Keep v_s = C⁻¹(g_s(X) + ε_s) (n, S)."""
        self.V = solutions

    @property
    def W(self) -> torch.Tensor:
        return self.V

    def variance(self, X_new: torch.Tensor, KW: torch.Tensor, prior_diag: torch.Tensor
                 ) -> torch.Tensor:
        """(1/S) Σ_s (g_s(x*) − k*ᵀv_s)² from KW = K(X*, X) V."""
        r = self.prior(X_new).sub_(KW)
        return (r * r).mean(1)

    def error(self) -> dict[str, float]:
        """The estimate's measured relative error of var(f(x*)) over test points,
        ``median`` and ``p99`` (:data:`PATHWISE_MEDIAN_ERROR` / √S, ...)."""
        return {"median": PATHWISE_MEDIAN_ERROR / math.sqrt(self.S),
                "p99": PATHWISE_P99_ERROR / math.sqrt(self.S)}

    def note(self) -> str:
        """One line saying the variances are estimates, and how good."""
        err = self.error()
        return (f"predictive variances: pathwise estimate from {self.S} draws, "
                f"~{100 * err['median']:.0f} % median relative error "
                f"(~{100 * err['p99']:.0f} % at the 99th percentile of test points)")

    def state(self) -> dict[str, torch.Tensor]:
        return {"omega": self.omega, "weights": self.weights, "V": self.V}

    def config(self) -> dict[str, Any]:
        return {"num_samples": self.S, "num_features": self.F,
                "active_dims": None if self.dims is None else list(self.dims)}

    @classmethod
    def empty(cls, config: dict[str, Any], n: int, d: int, dtype: torch.dtype,
              ) -> PathwiseVariance:
        """A cache of the saved shapes (values then come from the state)."""
        out = cls(config["num_samples"], config["num_features"])
        dims = config.get("active_dims")
        out.dims = None if dims is None else tuple(dims)
        da = d if dims is None else len(dims)
        out.omega = torch.zeros(out.S, out.F // 2, da, dtype=dtype)
        out.weights = torch.zeros(out.S, out.F, dtype=dtype)
        out.V = torch.zeros(n, out.S, dtype=dtype)
        return out


class LanczosVariance:
    """A rank-(p·s) block Krylov cache R with C⁻¹ ≈ R Rᵀ (module doc); ``R`` (n, p·s)."""

    kind = "lanczos"

    def __init__(self, block_size: int = 32, steps: int = 8) -> None:
        if block_size < 1 or steps < 1:
            raise ValueError(f"lanczos variances need block_size >= 1 and steps >= 1, "
                             f"got {block_size}, {steps}")
        self.p, self.s = int(block_size), int(steps)
        self.R = None

    def probes(self, kernel: Any, X: torch.Tensor, noise: float | torch.Tensor,
               seed: int | torch.Generator) -> torch.Tensor:
        """No right-hand sides for the CG: the cache is built by :meth:`finish`."""
        self._gen = as_generator(seed)
        return X.new_zeros(X.shape[0], 0)

    @torch.no_grad()
    def finish(self, solutions: torch.Tensor, op: Any) -> None:
        """Block Lanczos with full reorthogonalisation: s passes of p columns over C."""
        n = op.n
        p = min(self.p, n)
        rows = torch.randperm(n, generator=self._gen)[:p].to(op.device)
        Q = torch.linalg.qr(op.cross(op.X[rows]).mT)[0]
        basis, images = [], []
        for step in range(self.s):
            W = op.matmul(Q)
            basis.append(Q)
            images.append(W)
            if sum(b.shape[1] for b in basis) >= n or step == self.s - 1:
                break
            Qa = torch.cat(basis, 1)
            for _ in range(2):  # twice is enough (Giraud et al. 2005)
                W = W - Qa @ (Qa.mT @ W)
            Q, Rq = torch.linalg.qr(W)
            keep = Rq.diagonal().abs() > 1e-10 * Rq.diagonal().abs().max().clamp_min(1e-300)
            Q = Q[:, keep]
            if Q.shape[1] == 0:
                break
        Q, W = torch.cat(basis, 1), torch.cat(images, 1)
        H = Q.mT @ W
        L = robust_cholesky(0.5 * (H + H.mT))
        self.R = torch.linalg.solve_triangular(L, Q.mT, upper=False).mT

    @property
    def W(self) -> torch.Tensor:
        return self.R

    def note(self) -> str:
        """One line saying how good the variances are: a projection on the Krylov space,
        so never below the exact ones, and too wide where C⁻¹ needs a larger rank."""
        return (f"predictive variances: Lanczos cache of rank {self.p * self.s}, at least "
                "the exact ones and too wide where the noise is small (standard deviations "
                "2-3x the exact ones measured on kin40k, σ² ≈ 0.002-0.005)")

    def variance(self, X_new: torch.Tensor, KW: torch.Tensor, prior_diag: torch.Tensor
                 ) -> torch.Tensor:
        """k** − ‖Rᵀk*‖² from KW = K(X*, X) R, clamped at 0."""
        return (prior_diag - (KW * KW).sum(1)).clamp_min(0.0)

    def state(self) -> dict[str, torch.Tensor]:
        return {"R": self.R}

    def config(self) -> dict[str, Any]:
        return {"block_size": self.p, "steps": self.s, "rank": int(self.R.shape[1])
                if self.R is not None else 0}

    @classmethod
    def empty(cls, config: dict[str, Any], n: int, d: int, dtype: torch.dtype,
              ) -> LanczosVariance:
        out = cls(config["block_size"], config["steps"])
        out.R = torch.zeros(n, config["rank"], dtype=dtype)
        return out


def variance_cache(kind: str, kernel: Any, options: dict[str, Any]
                   ) -> PathwiseVariance | LanczosVariance:
    """The cache called ``kind`` ("auto": pathwise where the kernel allows it)."""
    if kind == "auto":
        kind = "pathwise" if pathwise_ok(kernel) else "lanczos"
    if kind == "pathwise":
        return PathwiseVariance(options.get("num_samples", PATHWISE_SAMPLES),
                                options.get("num_features", PATHWISE_FEATURES))
    if kind == "lanczos":
        return LanczosVariance(options.get("block_size", 32), options.get("steps", 8))
    raise ValueError(f"variance must be 'auto', 'pathwise' or 'lanczos', got {kind!r}")
