"""Kernel block operators of hold-out GPCV-ADMM: products with K_VT, K_VTᵀ and
C = K_TT + σ²I (dense or recomputed by row blocks) and the rank-1 kernel contractions
of the θ-gradient (eq. 17–18)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...kernels import Kernel
from ...kernels.chunked import kernel_matmul
from ...kernels.cluster_operator import ClusterOperator
from ...linalg import CGInfo, cg
from ...models.precond import check_preconditioner, kernel_preconditioner


def rank1_vjp(kernel: Kernel, X1: torch.Tensor, X2: torch.Tensor, a: torch.Tensor,
              b: torch.Tensor, block: int) -> dict[torch.Tensor, torch.Tensor]:
    """Gradients of aᵀ K(X1, X2) b in every trainable kernel parameter, contracting
    ``block`` rows at a time (G = a bᵀ is never held whole)."""
    out: dict[torch.Tensor, torch.Tensor] = {}
    for s in range(0, X1.shape[0], block):
        part, _ = kernel.vjp(X1[s:s + block], X2, a[s:s + block, None] * b[None, :])
        for p, g in part.items():
            out[p] = out[p] + g if p in out else g.clone()
    return out


class KernelOps:
    """Products with K_VT, K_VTᵀ and C = K_TT + σ²I at the kernel's current θ, and the
    θ-gradient's contractions with K_VT and K_TT.

    Dense mode holds K_VT and K_TT, each evaluated on its first use (then BLAS
    products); chunked mode recomputes row blocks on every product — on the workers of
    ``client`` (a dask.distributed Client) when one is given: the rows [X_T; X_V] go
    there once per θ (per object), as a :class:`~gpscale.kernels.cluster_operator.ClusterOperator`
    whose rectangles K_TT, K_VT and K_TV are the products' and contractions' (the
    cluster is not used in dense mode, where holding the blocks beats recomputing
    them). Either way the kernel's parameters must not change while the object is in
    use; a dense block first needed after such a change raises instead of mixing two θ.
    """

    def __init__(self, kernel: Kernel, noise: torch.Tensor, X_T: torch.Tensor,
                 X_V: torch.Tensor, dense: bool, block: int | None, client: Any = None
                 ) -> None:
        self.kernel, self.X_T, self.X_V, self.dense = kernel, X_T, X_V, dense
        self.s2 = noise.detach()
        self.block = block
        n_T = X_T.shape[0]
        self._span = {"T": (0, n_T), "V": (n_T, n_T + X_V.shape[0])}
        self.cluster = None
        if client is not None and not dense:
            self.cluster = ClusterOperator(kernel, torch.cat([X_T, X_V]), 0.0, client,
                                           block=block)
        self._KVT: torch.Tensor | None = None
        self._KTT: torch.Tensor | None = None
        self._versions = self._param_versions()
        self._pinv: dict[tuple[str, int], Callable[[torch.Tensor], torch.Tensor] | None] = {}

    def set_noise(self, noise: torch.Tensor) -> None:
        """A new σ² for C = K_TT + σ²I (the kernel blocks stay; preconditioners go)."""
        self.s2 = noise.detach()
        self._pinv.clear()

    def _param_versions(self) -> list[int]:
        return [p._version for p in self.kernel.parameters()]

    def _evaluate(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        if self._param_versions() != self._versions:
            raise RuntimeError("the kernel's parameters changed after these operators were "
                               "built; build new ones for the new θ")
        with torch.no_grad():
            return self.kernel(X1, X2)

    @property
    def KVT(self) -> torch.Tensor | None:
        """K_VT, evaluated on first use (dense mode; None in chunked mode)."""
        if self.dense and self._KVT is None:
            self._KVT = self._evaluate(self.X_V, self.X_T)
        return self._KVT

    @property
    def KTT(self) -> torch.Tensor | None:
        """K_TT, evaluated on first use (dense mode; None in chunked mode)."""
        if self.dense and self._KTT is None:
            self._KTT = self._evaluate(self.X_T, self.X_T)
        return self._KTT

    def c_inv_approx(self, kind: str, rank: int
                     ) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """P⁻¹ for P ≈ C of the given kind and rank (:mod:`gpscale.models.precond`),
        built once per θ; None for "none" or rank 0."""
        if (kind, rank) not in self._pinv:
            self._pinv[kind, rank] = kernel_preconditioner(
                self.kernel, self.X_T, self.s2, kind, rank, K=self.KTT)
        return self._pinv[kind, rank]

    def _part(self, name: str) -> torch.Tensor:
        return self.X_T if name == "T" else self.X_V

    def _mm(self, rows: str, cols: str, v: torch.Tensor) -> torch.Tensor:
        """K(X_rows, X_cols) v recomputed by row blocks, rows and cols "T" or "V"."""
        if self.cluster is not None:
            return self.cluster.range_products(self._span[rows], self._span[cols], v)
        with torch.no_grad():
            return kernel_matmul(self.kernel, self._part(rows), self._part(cols), v,
                                 block=self.block)

    def kvt(self, v: torch.Tensor) -> torch.Tensor:
        """K_VT v."""
        return self.KVT @ v if self.dense else self._mm("V", "T", v)

    def kvt_t(self, u: torch.Tensor) -> torch.Tensor:
        """K_VTᵀ u (= K_TV u: kernels are symmetric)."""
        return self.KVT.mT @ u if self.dense else self._mm("T", "V", u)

    def c(self, v: torch.Tensor) -> torch.Tensor:
        """C v = K_TT v + σ² v."""
        kv = self.KTT @ v if self.dense else self._mm("T", "T", v)
        return kv + self.s2 * v

    def vjp(self, rows: str, a: torch.Tensor, b: torch.Tensor
            ) -> dict[torch.Tensor, torch.Tensor]:
        """Gradients of aᵀ K(X_rows, X_T) b (rows "V" or "T") in every trainable kernel
        parameter (:func:`rank1_vjp`; on the cluster when there is one)."""
        if self.cluster is None:
            return rank1_vjp(self.kernel, self._part(rows), self.X_T, a, b, self.block)
        grads = self.cluster.range_contraction(self._span[rows], self._span["T"],
                                               a[:, None], b[:, None])
        params = [p for p in self.kernel.parameters() if p.requires_grad]
        return dict(zip(params, grads))


def solve_full(model, tol: float = 1e-8, max_iter: int | None = None, precond_rank: int = 50,
               block: int | None = None, preconditioner: str = "pivchol",
               dense_bytes: int = 2**30, client: Any = None) -> tuple[torch.Tensor, CGInfo]:
    """α = C⁻¹(y − m), C = K + σ²I on an ExactGP's full data, by CG with a
    rank-``precond_rank`` preconditioner (``"pivchol"``: pivoted Cholesky, ``"grief"``:
    GRIEF eigenfunctions, ``"none"``; see :mod:`gpscale.models.precond`). K is held
    densely when its n² entries fit in ``dense_bytes`` (one kernel evaluation, then
    BLAS products); otherwise every product recomputes it over row blocks of ``block``
    rows: O(n² · iterations) time, O(n · block) memory — on the workers of ``client``
    (a dask.distributed Client) when given. No O(n³) step either way."""
    check_preconditioner(preconditioner, precond_rank)
    with torch.no_grad():
        s2 = model.noise.detach()
        r = model.y - model.mean_constant.detach()
        X = model.X
        K = model.kernel(X) if X.shape[0] ** 2 * X.element_size() <= dense_bytes else None
        if K is None and client is not None:
            matvec = ClusterOperator(model.kernel, X, s2, client, block=block).matmul
        else:
            def matvec(V: torch.Tensor) -> torch.Tensor:
                KV = K @ V if K is not None else model.kernel.matmul(X, X, V, block)
                return KV + s2 * V

        precond = kernel_preconditioner(model.kernel, X, s2, preconditioner, precond_rank, K=K)
        return cg(matvec, r, precond=precond, tol=tol, max_iter=max_iter)
