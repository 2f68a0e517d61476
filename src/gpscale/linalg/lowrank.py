"""Low-rank approximations of a kernel matrix: greedy pivoted Cholesky and the
Woodbury inverse of L Lᵀ + σ²I built on it (a CG preconditioner)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

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


def factor_gram(L) -> torch.Tensor:
    """LᵀL of a factor: a tensor, or any object with ``gram()`` (a factor whose row blocks
    live on a dask cluster, :class:`gpscale.kernels.cluster_operator.ClusterFactor`)."""
    return L.mT @ L if isinstance(L, torch.Tensor) else L.gram()


def factor_tmatmul(L, R: torch.Tensor) -> torch.Tensor:
    """LᵀR of a factor (as :func:`factor_gram`; a cluster factor's ``t_matmul``)."""
    return L.mT @ R if isinstance(L, torch.Tensor) else L.t_matmul(R)


def low_rank_inverse(L, s2: torch.Tensor, gram: torch.Tensor | None = None,
                     scale: torch.Tensor | None = None
                     ) -> Callable[[torch.Tensor], torch.Tensor]:
    """R ↦ (L Lᵀ + σ²I)⁻¹ R by Woodbury (one r x r Cholesky, r = L.shape[1]), in L's
    dtype. L: an n x r tensor, or a factor with ``shape``, ``@``, ``t_matmul`` and
    ``gram`` (:class:`gpscale.kernels.cluster_operator.ClusterFactor`: its products run
    where its rows are). ``gram``: LᵀL when at hand (the same L with another σ² then costs r³/3,
    not n r²). ``scale`` (n,): the inverse of S⁻¹(L Lᵀ + σ²I)S⁻¹ = S⁻¹LLᵀS⁻¹ + σ² S⁻²,
    S = diag(scale), i.e. R ↦ S (L Lᵀ + σ²I)⁻¹ S R (rows at which y is a mean of c
    copies: scale = √c, L a factor of S K S; :mod:`gpscale.models.copies`).

    Not in float32, even where the products C V are: along an eigenvector of L Lᵀ with
    eigenvalue λ the result is R's component over λ + σ², formed as (R − L z)/σ², so
    float32's rounding of L z comes back multiplied by about λ/σ², and CG stalls
    (benchmarks/results/design-measurements.md)."""
    if scale is not None:
        inner = low_rank_inverse(L, s2, gram)
        s = scale[:, None]
        return lambda R: inner(R * s.to(R)) * s.to(R)
    if L.shape[1] == 0:
        return lambda R: R / s2
    gram = factor_gram(L) if gram is None else gram
    F = woodbury_factor(gram, s2, torch.ones((), dtype=gram.dtype, device=gram.device))
    return lambda R: (R - L @ torch.cholesky_solve(factor_tmatmul(L, R), F)) / s2


class DenseFactor:
    """Where :func:`rp_cholesky` writes its factor in this process: an n x ``capacity``
    tensor, filled a block of columns at a time. ``columns(idx)``: K(X, X[idx]) (with
    ``scale``: of S K S). The same three steps as
    :class:`gpscale.kernels.cluster_operator.ClusterFactor`, whose row blocks live on dask workers.
    ``block``: the factor is a :class:`BlockedFactor` of row blocks of that size."""

    def __init__(self, columns: Callable[[torch.Tensor], torch.Tensor], n: int,
                 capacity: int, dtype: torch.dtype, device: torch.device,
                 scale: torch.Tensor | None = None, block: int | None = None) -> None:
        self.columns, self.scale, self.block = columns, scale, block
        self.out = torch.zeros(n, capacity, dtype=dtype, device=device)
        self.G: torch.Tensor | None = None

    @property
    def capacity(self) -> int:
        return self.out.shape[1]

    def pivot_block(self, S: torch.Tensor, m: int) -> torch.Tensor:
        """Forms G = K(X, X_S) − L L_Sᵀ (L: the first m columns) and returns G_S."""
        self.G = pivot_columns(self.columns(S).to(self.out.dtype), self.out[:, :m],
                               self.out[S, :m], self.scale, None if self.scale is None
                               else self.scale[S])
        return self.G[S]

    def extend(self, T: torch.Tensor, m: int) -> torch.Tensor:
        """Writes F = G T into columns m, m + 1, ...; returns each row's ‖F_i‖²."""
        out = extend_rows(self.out, self.G, T, m)
        self.G = None
        return out

    def factor(self, m: int) -> torch.Tensor | BlockedFactor:
        """The first m columns (a copy when fewer than the capacity, so that the rest
        is freed); a :class:`BlockedFactor` when the store was given ``block``."""
        L = self.out if m == self.capacity else self.out[:, :m].clone()
        return L if self.block is None else BlockedFactor(L, self.block)


class BlockedFactor:
    """A factor L (n x r) in this process whose LᵀR and LᵀL are sums over row blocks of
    ``block`` rows, added in order: the sums a factor on a dask cluster forms
    (:class:`gpscale.kernels.cluster_operator.ClusterFactor`), so that both round alike."""

    def __init__(self, L: torch.Tensor, block: int) -> None:
        self.L, self.block = L, int(block)

    @property
    def shape(self) -> torch.Size:
        return self.L.shape

    def __matmul__(self, W: torch.Tensor) -> torch.Tensor:
        return self.L @ W

    def t_matmul(self, R: torch.Tensor) -> torch.Tensor:
        return ordered_sum(self.L[s:s + self.block].mT @ R[s:s + self.block]
                           for s in range(0, self.L.shape[0], self.block))

    def gram(self) -> torch.Tensor:
        return ordered_sum(self.L[s:s + self.block].mT @ self.L[s:s + self.block]
                           for s in range(0, self.L.shape[0], self.block))


def ordered_sum(parts) -> torch.Tensor:
    """((p₀ + p₁) + p₂) + ..., one part held at a time (a new tensor)."""
    total = None
    for part in parts:
        total = part.clone() if total is None else total.add_(part)
    return total


def pivot_columns(K_S: torch.Tensor, L: torch.Tensor, L_S: torch.Tensor,
                  scale: torch.Tensor | None, scale_S: torch.Tensor | None) -> torch.Tensor:
    """G = S K(X, X_S) S_S − L L_Sᵀ for the rows of L (a round of :func:`rp_cholesky`,
    here or on the worker holding those rows)."""
    G = K_S if scale is None else K_S * scale_S * scale[:, None]
    return G - L @ L_S.mT if L.shape[1] else G


def extend_rows(out: torch.Tensor, G: torch.Tensor, T: torch.Tensor, m: int) -> torch.Tensor:
    """Writes F = G T into ``out``'s columns m, m + 1, ... and returns ‖F_i‖² by row."""
    F = G @ T
    out[:, m:m + F.shape[1]] = F
    return (F * F).sum(1)


def rp_cholesky(kernel, X: torch.Tensor, rank: int, block: int = 128,
                seed: int | torch.Generator | None = 0,
                columns: Callable[[torch.Tensor], torch.Tensor] | None = None,
                rel_tol: float = 1e-10, abs_tol: float = 0.0,
                scale: torch.Tensor | None = None, store: Any = None):
    """Block randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2023, Alg. 3):
    K(X, X) ≈ L Lᵀ, L (n x m, m ≤ rank). Each round samples ``block`` pivots S with
    probability ∝ the residual diagonal d, forms G = K(X, X_S) − L L_Sᵀ (one GEMM, not
    one kernel row and one GEMV per pivot as :func:`pivoted_cholesky`), and appends
    G H^{-1/2} with H = G_S (by eigendecomposition, dropping directions below
    ``rel_tol`` · ‖H‖, so near-duplicate pivots cost nothing but time). O(n m²) flops
    in GEMMs. ``columns(idx)``: K(X, X[idx]) (default ``kernel(X, X[idx])``); ``seed``:
    the pivots' generator. Stops early once the residual trace Σd = tr(K − L Lᵀ) is at
    most ``rel_tol`` · tr K or ``abs_tol``. ``scale`` (n,): factor S K S instead,
    S = diag(scale) (pivots drawn from its diagonal).

    ``store``: where G and L live (default a :class:`DenseFactor` here, and L is a
    tensor); a :class:`gpscale.kernels.cluster_operator.ClusterFactor` forms them on the dask
    workers that hold the rows, and is itself the L returned. The pivots, H and its
    eigendecomposition are found here either way."""
    n = X.shape[0]
    gen = as_generator(seed)
    with torch.no_grad():
        s = None if scale is None else scale.to(X.dtype)
        if store is None:
            store = DenseFactor(columns or (lambda idx: kernel(X, X[idx])), n,
                                min(rank, n), X.dtype, X.device, s)
        d = kernel.diag(X).detach().clone().to(X.dtype)
        if s is not None:
            d = d * s * s
        total = float(d.sum())
        m = 0
        while m < store.capacity and float(d.sum()) > max(rel_tol * total, abs_tol):
            b = min(block, store.capacity - m, int((d > 0).sum()))
            S = torch.multinomial(d.cpu(), b, replacement=False, generator=gen).to(X.device)
            H = store.pivot_block(S, m)
            H = 0.5 * (H + H.mT)
            w, U = torch.linalg.eigh(H)
            keep = w > rel_tol * w.abs().max().clamp_min(torch.finfo(X.dtype).tiny)
            T = U[:, keep] / w[keep].sqrt()
            d = (d - store.extend(T, m)).clamp_min_(0.0)
            d[S] = 0.0
            m += T.shape[1]
        return store.factor(m)
