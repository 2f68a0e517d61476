"""Preconditioners for conjugate-gradient solves with C = K(X, X) + σ²I.

Each one is an approximation P ≈ C whose inverse is cheap to apply by Woodbury; one
vocabulary (:data:`PRECONDITIONERS`) for every CG solve with C in the library (the exact
GP's iterative solver, GPCV-ADMM's z-step and its full-data solve):

- ``"rpchol"``: P = L Lᵀ + σ²I, L a randomly pivoted Cholesky factor of K built in
  blocks of kernel columns (Chen, Epperly, Tropp & Webber 2023), grown until its trace
  error tr(K − L Lᵀ) is small or its rank is reached;
- ``"pivchol"``: P = L Lᵀ + σ²I, L a rank-r greedy pivoted Cholesky factor of K
  (O(n r²) set-up, r kernel rows);
- ``"grief"``: P = s Φ Φᵀ + σ²I, Φ the p = r grid-structured eigenfunctions of the
  kernel (Evans & Nair 2018, §4.1): O(d n p + n p²) set-up and no kernel evaluation
  at all, but only for separable kernels (RBF-ARD, or products of 1-D Matérns, each
  optionally under one :class:`~gpscale.kernels.Scale`);
- ``"none"``: no preconditioner.

Each applies in O(n r) per right-hand side. Which one wins depends on the spectrum of
K: ``gpscale bench precond`` measures the CG iterations on real data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..features.grief import GriefFeatures
from ..kernels import RBF, Kernel, Matern, Product
from ..linalg.lowrank import low_rank_inverse, pivoted_cholesky, rp_cholesky
from .grief import grief_preconditioner

#: the preconditioners of CG solves with C = K + σ²I (module docstring)
PRECONDITIONERS = ("rpchol", "pivchol", "grief", "none")


def separable_form(kernel: Kernel, d: int) -> tuple[str, torch.Tensor, torch.Tensor]:
    """Write ``kernel`` on d input columns as s·Πᵢ kᵢ(xᵢ, zᵢ), the form GRIEF
    approximates. Returns (GRIEF base-kernel name, lengthscales (d,), s).

    Accepted: RBF (one or d lengthscales, all columns), a 1-D Matérn when d = 1, or a
    product of 1-D Matérns of one ν covering each column once; each optionally inside
    one Scale. The base-kernel name is the kernel's own
    (:meth:`~gpscale.kernels.Kernel.spectral_density`). Anything else raises ValueError."""
    scale, base = kernel.unscaled()
    scale = torch.tensor(scale, dtype=torch.float64)
    if isinstance(base, RBF) and base.active_dims in (None, list(range(d))):
        return (base.spectral_density().name,
                base.lengthscale.detach().reshape(-1).expand(d).clone(), scale)
    parts: list[Kernel] = []

    def walk(k: Kernel) -> None:
        if isinstance(k, Product):
            for sub in k.kernels:
                walk(sub)
        else:
            parts.append(k)

    walk(base)
    materns = [k for k in parts if isinstance(k, Matern)]
    if len(materns) == len(parts) and len({k.spectral_density() for k in materns}) == 1:
        dims = [k.active_dims if k.active_dims is not None else
                (list(range(d)) if d == 1 else None) for k in materns]
        if all(c is not None and len(c) == 1 for c in dims) and \
                sorted(c[0] for c in dims) == list(range(d)):
            order = sorted(range(len(materns)), key=lambda i: dims[i][0])
            ls = torch.cat([materns[i].lengthscale.detach().reshape(-1) for i in order])
            return materns[0].spectral_density().name, ls, scale
    raise ValueError(
        f"the GRIEF preconditioner needs a separable kernel: RBF over all {d} columns or "
        "a product of 1-D Matérns (one per column), optionally inside one Scale; got "
        f"{type(kernel).__name__}. Use preconditioner='pivchol' for other kernels.")


def check_preconditioner(kind: str, rank: int,
                         allowed: tuple[str, ...] = PRECONDITIONERS) -> None:
    """ValueError naming the bad argument (kind not among ``allowed``, rank not an
    int ≥ 0)."""
    if kind not in allowed:
        raise ValueError(f"unknown preconditioner {kind!r}; choose one of {allowed}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"precond_rank must be an int >= 0, got {rank!r}")


def low_rank_factor(kind: str, kernel: Kernel, X: torch.Tensor, rank: int, *,
                    K: torch.Tensor | None = None, scale: torch.Tensor | None = None,
                    seed: int = 0, abs_tol: float = 0.0,
                    store: Callable[[], Any] | None = None) -> Any:
    """L (n x r, r ≤ ``rank``) with L Lᵀ ≈ K(X, X) (of S K S with ``scale`` S =
    diag(scale)) for ``kind`` "rpchol" (stops once tr(K − L Lᵀ) ≤ ``abs_tol``; pivots
    from ``seed``; built in ``store()``, a factor store such as
    :meth:`~gpscale.kernels.operator.KernelOperator.factor_store`, when given) or
    "pivchol" (exactly ``rank`` greedy pivots, rows read from ``K`` when at hand);
    None for "none" or rank 0."""
    if kind == "none" or rank == 0:
        return None
    if kind == "pivchol":
        L = pivoted_cholesky(kernel, X, rank, K=K)
        return L if scale is None else L * scale[:, None]
    if kind != "rpchol":
        raise ValueError(f"{kind!r} has no low-rank Cholesky factor; choose 'rpchol' or "
                         "'pivchol'")
    return rp_cholesky(kernel, X, rank, seed=seed, abs_tol=abs_tol, scale=scale,
                       store=None if store is None else store())


def kernel_preconditioner(
    kernel: Kernel, X: torch.Tensor, noise: torch.Tensor, kind: str = "pivchol",
    rank: int = 100, K: torch.Tensor | None = None, m_bar: int = 10,
) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """R ↦ P⁻¹R for P ≈ K(X, X) + σ²I of the given ``kind`` (module docstring) and
    rank r = ``rank`` (p for "grief", whose grid has ``m_bar`` points per column).
    ``K``: the dense kernel matrix when at hand (pivoted Cholesky reads its rows from
    it). Returns None for "none" or rank 0."""
    check_preconditioner(kind, rank)
    if kind == "none" or rank == 0:
        return None
    noise = noise.detach()
    with torch.no_grad():
        if kind in ("rpchol", "pivchol"):
            return low_rank_inverse(low_rank_factor(kind, kernel, X, rank, K=K), noise)
        name, ls, scale = separable_form(kernel, X.shape[1])
        features = GriefFeatures(X, rank, m_bar=m_bar, kernel=name,
                                 lengthscale=ls.to(X.device), dtype=X.dtype, device=X.device)
        return grief_preconditioner(features, X, noise, scale.to(X.device))
