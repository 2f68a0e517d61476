"""C = K(X, X) + σ²I as a linear operator applied over row blocks, never formed.

The product is a concatenation over row blocks b of pure functions

    (C V)_b = K(X_b, X) V + σ² V_b,    K(X_b, X) V = block_matmul(form, X_b, cols, V),

of the kernel's state (``form``, detached and picklable), the block's rows X_b, the
prepared columns of X (``cols``, the size of X) and V (see
:func:`gpscale.kernels.chunked.block_matmul`). That function is the seam to a
distributed product: a subclass that overrides :meth:`KernelOperator.row_products`
(e.g. one dask task per block on the worker that holds X_b and ``cols``) keeps every
solver built on this class (CG, Lanczos) unchanged; only n-vectors travel per product.

The operator lives with the kernels, not in :mod:`gpscale.linalg`, because it is made
of a kernel's tiled form; the solvers in linalg take any operator and know no kernel.
"""

from __future__ import annotations

from typing import Any

import torch

from ..linalg.lowrank import DenseFactor
from ..sizes import available_memory
from .chunked import (
    GenericForm,
    PreparedColumns,
    TiledForm,
    auto_block,
    block_matmul,
    dense_block,
    kernel_contraction,
    kernel_form,
    prepare_columns,
    tiled_contraction,
)

__all__ = ["KernelOperator", "row_blocks", "contract_rows", "BLOCK_ROWS"]

#: default rows per block of the operator's products
BLOCK_ROWS = 8192
#: memory for one slab of a contraction (:func:`contract_rows`; about six n-wide
#: float64 temporaries per row)
CONTRACTION_BYTES = 512 * 2**20


def row_blocks(n: int, block: int) -> list[tuple[int, int]]:
    """The (start, stop) row ranges of blocks of ``block`` rows covering range(n)."""
    return [(s, min(n, s + block)) for s in range(0, n, block)]


def contract_rows(kernel: Any, form: TiledForm | GenericForm, cols: PreparedColumns,
                  X: torch.Tensor, bounds: list[tuple[int, int]], left: torch.Tensor,
                  right: torch.Tensor, X2: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Σ over the row ranges (s, e) of the gradients of ⟨left_{s:e} rightᵀ, K(X_{s:e}, X2)⟩
    (``cols`` prepared from X2; X2 = X by default), in the order of the kernel's
    trainable parameters (a pure function: one task's share of a distributed
    contraction). A form with an exponential profile (the RBF, under Scale wrappers)
    contracts by tiles in the dtype of ``cols``
    (:func:`~gpscale.kernels.chunked.tiled_contraction`, its sums turned into
    gradients by ``kernel.tiled_gradients``); any other kernel through ``kernel.vjp``
    on float64 slabs."""
    X2 = X if X2 is None else X2
    params = [p for p in kernel.parameters() if p.requires_grad]
    if isinstance(form, TiledForm) and form.radial.exponential:
        total = torch.zeros((), dtype=left.dtype, device=left.device)
        S = torch.zeros(cols.B.shape[1] - 2, dtype=left.dtype, device=left.device)
        for s, e in bounds:
            t, part = tiled_contraction(form, X[s:e], cols, left[s:e], right)
            total, S = total + t, S + part
        grads = kernel.tiled_gradients(form, total, S)
        return [grads.get(p, torch.zeros_like(p)) for p in params]
    out = [torch.zeros_like(p) for p in params]
    sub = auto_block(X.shape[0], X2.shape[0], X.element_size(), CONTRACTION_BYTES)
    for s, e in bounds:
        part = kernel_contraction(kernel, X[s:e], X2, left[s:e], right, sub)
        for acc, p in zip(out, params):
            if p in part:
                acc += part[p]
    return out


class KernelOperator:
    """(K(X, X) + σ²I) V and K(X_new, X) V by row blocks, without autograd.

    Parameters
    ----------
    kernel : any kernel (``kernel(X1, X2)``); its hyperparameters are read once, here:
        build a new operator after they change.
    X : training inputs (n, d); products follow its dtype and device.
    noise : σ² (a float or a 0-d tensor), or the noise of each row (n,) (rows that are
        means of copies: :mod:`gpscale.models.copies`).
    block : rows per call of :func:`block_matmul` (the unit of work a distributed
        product would send to a worker; each call tiles its block itself); default 8192.
    block_dtype : dtype the tiles of K are formed and multiplied in (torch.float32:
        faster, about 1e-7 relative error per entry; stationary kernels only, see
        :mod:`gpscale.kernels.chunked`); the tiles' products are summed in X's dtype.
    """

    def __init__(self, kernel: Any, X: torch.Tensor, noise: torch.Tensor | float,
                 block: int | None = None, block_dtype: torch.dtype | None = None) -> None:
        self.kernel = kernel
        self.X = X.detach()
        noise = torch.as_tensor(noise).detach()
        self.noise: float | torch.Tensor = float(noise) if noise.ndim == 0 else noise.to(X)
        self.block_dtype = X.dtype if block_dtype is None else block_dtype
        self.form: TiledForm | GenericForm = kernel_form(kernel)
        self.cols: PreparedColumns = prepare_columns(self.form, self.X, self.block_dtype)
        self.block = int(block) if block is not None else BLOCK_ROWS
        if self.block < 1:
            raise ValueError(f"block must be a positive number of rows, got {block!r}")
        #: passes over K so far, and right-hand sides multiplied in them
        self.passes = 0
        self.columns = 0

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def noise_column(self) -> torch.Tensor | float:
        """The noise as a multiplier of an (n, k) block: σ², or each row's (n, 1)."""
        return self.noise if isinstance(self.noise, float) else self.noise[:, None]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def dtype(self) -> torch.dtype:
        return self.X.dtype

    @property
    def device(self) -> torch.device:
        return self.X.device

    def row_products(self, X1: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """K(X1, X) V, one :func:`block_matmul` per row block of X1 (the seam)."""
        parts = [block_matmul(self.form, X1[s:e], self.cols, V)
                 for s, e in row_blocks(X1.shape[0], self.block)]
        return torch.cat(parts) if parts else V.new_zeros(0, V.shape[1])

    def _check(self, V: torch.Tensor) -> tuple[torch.Tensor, bool]:
        squeeze = V.ndim == 1
        V2 = V[:, None] if squeeze else V
        if V2.shape[0] != self.n:
            raise ValueError(f"V has {V2.shape[0]} rows but the operator has {self.n}")
        return V2.to(self.dtype), squeeze

    @torch.no_grad()
    def matmul(self, V: torch.Tensor) -> torch.Tensor:
        """(K + σ²I) V for V of shape (n,) or (n, k): all k columns in one pass."""
        V2, squeeze = self._check(V)
        self.passes += 1
        self.columns += V2.shape[1]
        out = self.row_products(self.X, V2)
        if isinstance(self.noise, float):
            out.add_(V2, alpha=self.noise)
        else:
            out.addcmul_(V2, self.noise[:, None])
        return out[:, 0] if squeeze else out

    __call__ = matmul

    @torch.no_grad()
    def kernel_matmul(self, V: torch.Tensor) -> torch.Tensor:
        """K V (no noise term)."""
        V2, squeeze = self._check(V)
        self.passes += 1
        self.columns += V2.shape[1]
        out = self.row_products(self.X, V2)
        return out[:, 0] if squeeze else out

    @torch.no_grad()
    def cross_matmul(self, X_new: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """K(X_new, X) V (e.g. the posterior mean K(X*, X) α)."""
        V2, squeeze = self._check(V)
        out = self.row_products(X_new.to(self.X), V2)
        return out[:, 0] if squeeze else out

    def contraction(self, left: torch.Tensor, right: torch.Tensor) -> list[torch.Tensor]:
        """Gradients of ⟨left rightᵀ, K(X, X)⟩ (left, right: n x k) in the kernel's
        trainable parameters, in the order of ``kernel.parameters()``: row blocks of
        :func:`contract_rows` (the seam, as :meth:`row_products`)."""
        return contract_rows(self.kernel, self.form, self.cols, self.X,
                             row_blocks(self.n, self.block), left, right)

    @torch.no_grad()
    def cross(self, X1: torch.Tensor) -> torch.Tensor:
        """K(X1, X) as a dense matrix (X1 small), in X's dtype."""
        if isinstance(self.form, GenericForm):
            return self.kernel(X1.to(self.X), self.X)
        if self.block_dtype == self.dtype:
            cols = self.cols
        else:  # full-precision columns for dense rows, prepared once
            if getattr(self, "_cols_full", None) is None:
                self._cols_full = prepare_columns(self.form, self.X)
            cols = self._cols_full
        return dense_block(self.form, X1.to(self.X), cols)

    @torch.no_grad()
    def kernel_columns(self, index: torch.Tensor) -> torch.Tensor:
        """K(X, X[index]) in X's dtype (columns for randomly pivoted Cholesky)."""
        return dense_block(self.form, self.X, prepare_columns(self.form, self.X[index]))

    def factor_store(self, capacity: int, scale: torch.Tensor | None = None) -> DenseFactor:
        """Where a preconditioner's factor of K (with ``scale``: of S K S) is built by
        :func:`~gpscale.linalg.lowrank.rp_cholesky`: a tensor in this process, of at
        most ``capacity`` columns, whose sums run over this operator's row blocks
        (:class:`~gpscale.linalg.lowrank.BlockedFactor`; a cluster's operator keeps the
        rows on its workers)."""
        return DenseFactor(self.kernel_columns, self.n, capacity, self.dtype, self.device,
                           scale, block=self.block)

    def factor_memory(self) -> int | None:
        """Bytes the memory holding that factor has free (None: unknown)."""
        return available_memory()

    def diag(self) -> torch.Tensor:
        """diag(K) + σ² (n,)."""
        with torch.no_grad():
            return self.kernel.diag(self.X).detach().to(self.X) + self.noise
