"""Inducing-subset baselines of Cao et al. (2013) §4.1: random, greedy variance
(pivoted Cholesky), Titsias's greedy VFE selection and the IVM.

Each selector returns a LongTensor of ``m`` distinct training indices. The selectors
that depend on the kernel evaluate only the kernel columns they need (n x 1 per step,
or n x candidates), never the n x n matrix, and work in O(n m²) (greedy variance, IVM)
or O(n m² · candidates) (Titsias) time with rank-one updates.

The alternation of selection with hyperparameter fitting lives in
:mod:`gpscale.train.baselines` (:func:`fit_selected`).
"""

from __future__ import annotations

import math

import torch

from ..kernels import Kernel
from ..linalg.lowrank import pivoted_cholesky
from ..params import LOG_2PI
from ..rng import as_generator
from ..validation import check_positive

#: residual variances below this (relative to the largest diagonal) count as zero
TINY = 1e-12


def _check_m(n: int, m: int) -> int:
    if not isinstance(m, int) or isinstance(m, bool):
        raise ValueError(f"m must be an int, got {type(m).__name__}")
    if m < 1 or m > n:
        raise ValueError(f"m must be between 1 and the number of training points n={n}; "
                         f"got m={m}")
    return m


def _noise(noise) -> float:
    return check_positive("noise", noise)


def select_random(n: int, m: int, seed: int | torch.Generator = 0,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """``m`` indices drawn uniformly without replacement from range(n) (Random)."""
    _check_m(n, m)
    return torch.randperm(n, generator=as_generator(seed))[:m].to(device)


@torch.no_grad()
def select_variance(kernel: Kernel, X: torch.Tensor, m: int) -> torch.Tensor:
    """Greedy variance = pivoted Cholesky (Bach & Jordan 2005; Cao et al. eq. 6).

    Step k picks i = argmax of the residual diagonal d = diag(K − L Lᵀ), then appends
    the column ℓ = (K[:, i] − L L[i]ᵀ) / √d_i (eq. 13) and updates d ← d − ℓ².
    One kernel column per step: O(n m²) time, O(n m) memory.
    """
    n = X.shape[0]
    _check_m(n, m)
    _, pivots = pivoted_cholesky(kernel, X, m, rel_tol=TINY, return_pivots=True)
    if pivots.shape[0] < m:  # rank exhausted: the rest by prior variance
        prior = kernel.diag(X).detach().clone()
        prior[pivots] = -math.inf
        rest = torch.argsort(prior, descending=True)[: m - pivots.shape[0]]
        pivots = torch.cat([pivots, rest])
    return pivots


class IncrementalVFE:
    """Nyström factor K̂ = L Lᵀ of the inducing set chosen so far (Cao et al. eq. 6) with
    the Cholesky R Rᵀ = A = LᵀL + σ²I and c = R⁻¹ Lᵀ y, so the objective

        F = ½ [σ⁻²(yᵀy − ‖c‖²) + (n−k) log σ² + log|A| + σ⁻² tr(K − K̂) + n log 2π]

    (eqs. 5, 7–9; DTC/PP omits the trace term, eq. 4) and the exact change from adding
    any candidate (eqs. 14–16) cost O(n k) per candidate instead of a refit.
    """

    def __init__(self, kernel: Kernel, X: torch.Tensor, y: torch.Tensor, noise: float,
                 m: int, objective: str = "vfe") -> None:
        if objective not in ("vfe", "dtc"):
            raise ValueError(f"objective must be 'vfe' or 'dtc', got {objective!r}")
        self.kernel, self.X, self.y, self.s2, self.vfe = kernel, X, y, noise, objective == "vfe"
        n = X.shape[0]
        self.d = kernel.diag(X).detach().clone()
        self.L = torch.zeros(n, m, dtype=self.d.dtype, device=self.d.device)
        self.R = torch.zeros(m, m, dtype=self.d.dtype, device=self.d.device)
        self.c = torch.zeros(m, dtype=self.d.dtype, device=self.d.device)
        self.k = 0
        self.floor = TINY * float(self.d.max().clamp_min(1e-300))
        self.log_det_a = 0.0
        self.yy = float(y @ y)
        self.value = self._value(0.0, float(self.d.sum()))

    def _value(self, cc: float, trace: float) -> float:
        n, k, s2 = self.X.shape[0], self.k, self.s2
        f = (self.yy - cc) / s2 + (n - k) * math.log(s2) + self.log_det_a + n * LOG_2PI
        return 0.5 * (f + (trace / s2 if self.vfe else 0.0))

    def columns(self, J: torch.Tensor) -> torch.Tensor:
        """Candidate Cholesky columns ℓ_j = (K − K̂)[:, j] / √(K − K̂)_jj (eq. 13), n x |J|;
        zero for candidates whose residual variance is numerically zero."""
        k = self.k
        KJ = self.kernel(self.X, self.X[J]).detach()
        res = KJ - self.L[:, :k] @ self.L[J, :k].mT
        dJ = self.d[J]
        ok = dJ > self.floor
        return torch.where(ok, res / torch.where(ok, dJ, 1.0).sqrt(), 0.0)

    def gains(self, ell: torch.Tensor):
        """New objective values for each candidate column, and the (r, ρ, c_new) that
        :meth:`add` needs: ΔF = ½[−c_new²/σ² + log(ρ²/σ²) − ‖ℓ‖²/σ²] (eqs. 14–16)."""
        k, s2 = self.k, self.s2
        r = torch.linalg.solve_triangular(self.R[:k, :k], self.L[:, :k].mT @ ell, upper=False)
        ll = (ell * ell).sum(0)
        rho2 = (ll + s2 - (r * r).sum(0)).clamp_min(s2 * 1e-12)
        c_new = (ell.mT @ self.y - r.mT @ self.c[:k]) / rho2.sqrt()
        delta = -c_new**2 / s2 + torch.log(rho2 / s2) - (ll / s2 if self.vfe else 0.0)
        return self.value + 0.5 * delta, r, rho2.sqrt(), c_new

    def add(self, ell: torch.Tensor, r: torch.Tensor, rho: torch.Tensor,
            c_new: torch.Tensor) -> None:
        """Append one column (rank-one update of L, R, c and the residual diagonal)."""
        k = self.k
        self.L[:, k] = ell
        self.d -= ell * ell
        self.R[k, :k] = r
        self.R[k, k] = rho
        self.c[k] = c_new
        self.k += 1
        self.log_det_a += 2.0 * float(torch.log(rho))
        cc = float(self.c[: self.k] @ self.c[: self.k])
        self.value = self._value(cc, float(self.d.clamp_min(0.0).sum()))


@torch.no_grad()
def select_greedy(kernel: Kernel, X: torch.Tensor, y: torch.Tensor, noise, m: int,
                  candidates: int = 16, seed: int | torch.Generator = 0,
                  objective: str = "vfe", return_objective: bool = False):
    """Titsias (2009) greedy forward selection (Titsias-16 / Titsias-512 in Cao et al.):
    at each step evaluate the exact objective F (negative VFE bound, eq. 5, or DTC,
    eq. 4) after adding each of ``candidates`` random non-selected points and keep the
    best. Incremental factors (:class:`IncrementalVFE`): O(n m) per candidate.

    With ``return_objective`` also returns F (total nats) after each addition.
    """
    n = X.shape[0]
    _check_m(n, m)
    if int(candidates) < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates}")
    y = y.reshape(-1).to(dtype=X.dtype)
    state = IncrementalVFE(kernel, X, y, _noise(noise), m, objective)
    gen = as_generator(seed)
    free = torch.ones(n, dtype=torch.bool)
    out = torch.empty(m, dtype=torch.long)
    trace = []
    for k in range(m):
        pool = torch.nonzero(free).flatten()
        J = pool[torch.randperm(pool.numel(), generator=gen)[: int(candidates)]]
        Jd = J.to(X.device)
        ell = state.columns(Jd)
        vals, r, rho, c_new = state.gains(ell)
        b = int(vals.argmin())
        state.add(ell[:, b], r[:, b], rho[b], c_new[b])
        out[k] = J[b]
        free[J[b]] = False
        trace.append(state.value)
    out = out.to(X.device)
    return (out, trace) if return_objective else out


@torch.no_grad()
def select_ivm(kernel: Kernel, X: torch.Tensor, y: torch.Tensor, noise, m: int,
               return_scores: bool = False):
    """Informative Vector Machine (Lawrence, Seeger & Herbrich 2003), Gaussian likelihood.

    ADF keeps the posterior covariance of f given the included sites,
    Σ = K − M Mᵀ. Including site j shrinks its variance ζ_j = Σ_jj to ζ_j σ²/(ζ_j + σ²),
    a differential-entropy reduction Δ_j = ½ log(1 + ζ_j/σ²); IVM includes the
    non-selected point with the largest Δ_j, then the rank-one update
    s = Σ[:, j], M ← [M, s/√(ζ_j + σ²)], ζ ← ζ − s²/(ζ_j + σ²). With a Gaussian
    likelihood the updates are exact and the scores do not depend on y (kept for a
    common signature). O(n m²) time, one kernel column per step.

    With ``return_scores`` also returns the Δ of each inclusion.
    """
    n = X.shape[0]
    _check_m(n, m)
    if y.reshape(-1).shape[0] != n:
        raise ValueError(f"y has {y.reshape(-1).shape[0]} entries for n={n} inputs")
    s2 = _noise(noise)
    zeta = kernel.diag(X).detach().clone()
    M = torch.zeros(n, m, dtype=zeta.dtype, device=zeta.device)
    chosen = torch.zeros(n, dtype=torch.bool, device=zeta.device)
    out = torch.empty(m, dtype=torch.long, device=zeta.device)
    scores = []
    for k in range(m):
        j = int(torch.where(chosen, -math.inf, zeta).argmax())
        zj = float(zeta[j].clamp_min(0.0))
        scores.append(0.5 * math.log1p(zj / s2))
        out[k] = j
        chosen[j] = True
        s = kernel(X, X[j : j + 1])[:, 0] - M[:, :k] @ M[j, :k]
        M[:, k] = s / math.sqrt(zj + s2)
        zeta -= M[:, k] ** 2
    return (out, scores) if return_scores else out

__all__ = ["select_random", "select_variance", "select_greedy", "select_ivm",
           "IncrementalVFE"]
