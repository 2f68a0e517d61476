"""Low-rank approximations of a kernel matrix: greedy pivoted Cholesky and the
Woodbury inverse of L Lᵀ + σ²I built on it (a CG preconditioner)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..rng import as_generator
from .woodbury import woodbury_factor


def pivoted_cholesky(kernel, X: torch.Tensor, rank: int, rel_tol: float = 1e-10,
                     K: torch.Tensor | None = None, return_pivots: bool = False
                     ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Partial pivoted Cholesky L (n x m, m ≤ rank) of K(X, X) ≈ L Lᵀ: greedy pivot on
    the largest remaining diagonal (stopping early once it is ≤ ``rel_tol`` times the
    largest prior variance), one kernel row per pivot (read from ``K`` when the dense
    matrix is at hand), O(n m²) time. ``return_pivots``: also the m pivot indices, in
    the order chosen (the "greedy variance" inducing-point selection)."""
    n = X.shape[0]
    L = X.new_zeros(n, min(rank, n))
    pivots = torch.zeros(L.shape[1], dtype=torch.long, device=X.device)
    m = 0
    with torch.no_grad():
        d = (K.diagonal() if K is not None else kernel.diag(X)).clone()
        scale = float(d.max()) if n else 0.0
        while m < L.shape[1]:
            i = int(torch.argmax(d))
            if float(d[i]) <= rel_tol * scale:
                break
            pivots[m] = i
            row = K[i] if K is not None else kernel(X[i:i + 1], X)[0]
            row = row - L[:, :m] @ L[i, :m]
            L[:, m] = row / math.sqrt(float(d[i]))
            d = (d - L[:, m] ** 2).clamp_min(0.0)
            d[i] = 0.0
            m += 1
    return (L[:, :m], pivots[:m]) if return_pivots else L[:, :m]


def low_rank_inverse(L: torch.Tensor, s2: torch.Tensor, gram: torch.Tensor | None = None,
                     scale: torch.Tensor | None = None
                     ) -> Callable[[torch.Tensor], torch.Tensor]:
    """R ↦ (L Lᵀ + σ²I)⁻¹ R by Woodbury (one r x r Cholesky, r = L.shape[1]), in L's
    dtype. ``gram``: LᵀL when at hand (the same L with another σ² then costs r³/3, not
    n r²). ``scale`` (n,): the inverse of S⁻¹(L Lᵀ + σ²I)S⁻¹ = S⁻¹LLᵀS⁻¹ + σ² S⁻²,
    S = diag(scale), i.e. R ↦ S (L Lᵀ + σ²I)⁻¹ S R (rows at which y is a mean of c
    copies: scale = √c, L a factor of S K S; :mod:`gpscale.models.copies`).

    Not in float32, even where the products C V are: along an eigenvector of L Lᵀ with
    eigenvalue λ the result is R's component over λ + σ², formed as (R − L z)/σ², so
    float32's rounding of L z comes back multiplied by about λ/σ². On elevators fold 1
    (14 939 rows, σ² = 0.13, rank 256) a float32 apply took CG 42 iterations where
    float64 took 5; on kin40k fold 0 (rank 5 592) 20 against 15 in the same time."""
    if scale is not None:
        inner = low_rank_inverse(L, s2, gram)
        s = scale[:, None]
        return lambda R: inner(R * s.to(R)) * s.to(R)
    if L.shape[1] == 0:
        return lambda R: R / s2
    gram = L.mT @ L if gram is None else gram
    F = woodbury_factor(gram, s2, torch.ones((), dtype=L.dtype, device=L.device))
    return lambda R: (R - L @ torch.cholesky_solve(L.mT @ R, F)) / s2


def rp_cholesky(kernel, X: torch.Tensor, rank: int, block: int = 128,
                seed: int | torch.Generator | None = 0,
                rows: Callable[[torch.Tensor], torch.Tensor] | None = None,
                rel_tol: float = 1e-10, abs_tol: float = 0.0,
                scale: torch.Tensor | None = None) -> torch.Tensor:
    """Block randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2023, Alg. 3):
    K(X, X) ≈ L Lᵀ, L (n x m, m ≤ rank). Each round samples ``block`` pivots S with
    probability ∝ the residual diagonal d, forms G = K(X, X_S) − L L_Sᵀ (one GEMM, not
    one kernel row and one GEMV per pivot as :func:`pivoted_cholesky`), and appends
    G H^{-1/2} with H = G_S (by eigendecomposition, dropping directions below
    ``rel_tol`` · ‖H‖, so near-duplicate pivots cost nothing but time). O(n m²) flops
    in GEMMs. ``rows(idx)``: K(X[idx], X) (default ``kernel(X[idx], X)``); ``seed``:
    the pivots' generator. Stops early once the residual trace Σd = tr(K − L Lᵀ) is at
    most ``rel_tol`` · tr K or ``abs_tol``. ``scale`` (n,): factor S K S instead,
    S = diag(scale) (pivots drawn from its diagonal)."""
    n = X.shape[0]
    gen = as_generator(seed)
    with torch.no_grad():
        rows = rows or (lambda idx: kernel(X[idx], X))
        d = kernel.diag(X).detach().clone().to(X.dtype)
        if scale is not None:
            s = scale.to(X.dtype)
            plain, d = rows, d * s * s
            rows = lambda idx: plain(idx) * s[idx, None] * s  # noqa: E731
        total = float(d.sum())
        out = X.new_zeros(n, min(rank, n))
        m = 0
        while m < out.shape[1] and float(d.sum()) > max(rel_tol * total, abs_tol):
            b = min(block, out.shape[1] - m, int((d > 0).sum()))
            S = torch.multinomial(d.cpu(), b, replacement=False, generator=gen).to(X.device)
            G = rows(S).mT.to(X.dtype)
            if m:
                G = G - out[:, :m] @ out[S, :m].mT
            H = 0.5 * (G[S] + G[S].mT)
            w, U = torch.linalg.eigh(H)
            keep = w > rel_tol * w.abs().max().clamp_min(torch.finfo(X.dtype).tiny)
            F = G @ (U[:, keep] / w[keep].sqrt())
            out[:, m:m + F.shape[1]] = F
            d = (d - (F * F).sum(1)).clamp_min_(0.0)
            d[S] = 0.0
            m += F.shape[1]
        L = out[:, :m]
    return L
