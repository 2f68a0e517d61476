"""K(X1, X2) @ V over row blocks: differentiable (:func:`kernel_matmul`) and fast
(:func:`kernel_product`, :func:`block_matmul`) for iterative solves.

:func:`kernel_matmul`'s forward pass never holds more than one ``block x n2`` slab of
the kernel matrix. Its backward pass recomputes each slab and contracts it with the
incoming gradient through ``kernel.vjp`` (⟨g, K_b V⟩ = ⟨g Vᵀ, K_b⟩), so O(n²)-time
methods run in O(n · block) memory. Gradients with respect to X1 and X2 are not
provided.

The fast products need no autograd graph (CG, Lanczos). For a kernel with a tiled form
(``kernel.tiled_form()``: the stationary kernels, under any number of Scale wrappers,
ARD or not) a slab is one GEMM of augmented inputs followed by the kernel's elementwise
map κ(t), t = coefficient · r² + offset (:class:`Radial`), with the coefficient and
offset folded into the GEMM. For the RBF (κ = eᵗ, t = −r²/2):

    log k(x, x')/s² = a·b − ½‖a‖² − ½‖b‖² = [a, −½‖a‖², 1] · [b, 1, −½‖b‖²],

a = (x − c)/l, b = (x' − c)/l (c: the column means of X2, which keeps the cancellation
in ‖a‖² + ‖b‖² − 2a·b small), so a slab costs one GEMM and one ``exp_``. Slabs are
cut into tiles of :data:`TILE_ROWS` x :data:`TILE_COLS` that stay in cache from their
GEMM to their product with V. Tiles may be formed and multiplied in float32
(``block_dtype``); their products are summed in V's dtype (float64), so float32
rounding adds up over at most :data:`TILE_COLS` terms. Other kernels are evaluated by
``kernel(X1_b, X2)`` (no fast map, in the kernel's own dtype).

Nothing here imports the kernel classes or knows a formula: a kernel is any callable
``kernel(X1, X2)`` with ``parameters()``, ``vjp`` and ``tiled_form()`` (None: no fast
form), and the formulas are the kernels' own (:func:`kernel_form`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

#: default memory for one kernel slab and its autograd intermediates
DEFAULT_BLOCK_BYTES = 128 * 2**20
#: memory for one slab of a generic kernel in the fast (no-autograd) product
FAST_BLOCK_BYTES = 16 * 2**20
#: tile of the fast product for the stationary kernels (rows x columns): 2-4 MiB, in
#: cache through GEMM, map and product (faster than full-width slabs)
TILE_ROWS, TILE_COLS = 128, 4096


def auto_block(n1: int, n2: int, itemsize: int = 8, budget: int = DEFAULT_BLOCK_BYTES) -> int:
    """Rows per slab so that ~6 slab-sized temporaries fit in ``budget`` bytes."""
    return int(max(1, min(n1, budget // max(1, 6 * n2 * itemsize))))


# -- fast forms -----------------------------------------------------------------------
@dataclass(frozen=True)
class Radial:
    """A stationary kernel's profile as its tiles evaluate it: κ(t) with
    t = ``coefficient`` · r² + ``offset``, so that a tile's GEMM of augmented inputs
    gives t directly (module docstring) and ``map_`` turns it into κ in place.
    ``exponential``: κ(t) = eᵗ with t = −r²/2, whose derivative in t is κ itself, so
    one tile gives both ⟨G, K⟩ and the lengthscale sums (:func:`tiled_contraction`).
    Written by the kernel (its ``radial()``); ``map_`` must pickle (a function or a
    ``functools.partial`` of one, not a bound method: the form travels to workers)."""

    coefficient: float
    offset: float
    map_: Callable[[torch.Tensor], torch.Tensor]
    exponential: bool = False

    def __post_init__(self) -> None:
        if self.exponential and (self.coefficient, self.offset) != (-0.5, 0.0):
            raise ValueError("an exponential radial profile has t = −r²/2 (coefficient "
                             f"−0.5, offset 0), got {self.coefficient}, {self.offset}")


@dataclass(frozen=True)
class TiledForm:
    """k(x, x') = scale · κ(t), κ and t from ``radial``, r² = Σ_d (x_d − x'_d)²/l_d²
    over ``active_dims``: what ``kernel.tiled_form()`` answers, its output scale and
    lengthscales folded in. Detached values only: picklable, the kernel's state for a
    worker."""

    radial: Radial
    lengthscale: torch.Tensor
    scale: float = 1.0
    active_dims: tuple[int, ...] | None = None


@dataclass(frozen=True)
class GenericForm:
    """Any other kernel: slabs come from ``kernel(X1_b, X2)``."""

    kernel: Any


def kernel_form(kernel: Any) -> TiledForm | GenericForm:
    """The fast form of ``kernel`` (its current hyperparameters, detached): the one the
    kernel gives (``kernel.tiled_form()``), else the generic form."""
    form = kernel.tiled_form()
    return GenericForm(kernel) if form is None else form


def tiled_gradient(kernel: Any) -> bool:
    """Whether ``kernel``'s gradients contract by tiles (:func:`tiled_contraction`)."""
    form = kernel.tiled_form()
    return form is not None and form.radial.exponential


class PreparedColumns(NamedTuple):
    """The right-hand factor of a slab's GEMM, prepared once per X2:
    ``B`` (n2 x (d + 2)) in the block dtype and the centre c; for a generic kernel,
    ``B`` is X2 itself and c is None."""

    B: torch.Tensor
    centre: torch.Tensor | None


def _active(form: TiledForm, X: torch.Tensor) -> torch.Tensor:
    if form.active_dims is None:
        return X
    return X[:, torch.as_tensor(form.active_dims, device=X.device) % X.shape[1]]


def prepare_columns(form: TiledForm | GenericForm, X2: torch.Tensor,
                    dtype: torch.dtype | None = None) -> PreparedColumns:
    """The :class:`PreparedColumns` of X2 for slabs in ``dtype`` (default X2's):
    t = u·(a·b) + v·(‖a‖² + ‖b‖²) + offset with v the radial coefficient, u = −2v."""
    dtype = X2.dtype if dtype is None else dtype
    if isinstance(form, GenericForm):
        return PreparedColumns(X2, None)
    X2 = _active(form, X2)
    ls = form.lengthscale.to(X2)
    centre = X2.mean(0, keepdim=True) if X2.shape[0] else X2.new_zeros(1, X2.shape[1])
    b = (X2 - centre) / ls
    v = form.radial.coefficient
    B = torch.cat([(-2.0 * v) * b, torch.ones_like(b[:, :1]),
                   v * (b * b).sum(-1, keepdim=True) + form.radial.offset], dim=1)
    return PreparedColumns(B.to(dtype), centre)


def _left(form: TiledForm, X1: torch.Tensor, cols: PreparedColumns) -> torch.Tensor:
    a = (_active(form, X1) - cols.centre) / form.lengthscale.to(X1)
    v = form.radial.coefficient
    A = torch.cat([a, v * (a * a).sum(-1, keepdim=True), torch.ones_like(a[:, :1])], dim=1)
    return A.to(cols.B.dtype)


def kernel_slab(form: TiledForm | GenericForm, X1: torch.Tensor,
                cols: PreparedColumns) -> torch.Tensor:
    """K(X1, X2) / scale in the block dtype (the generic form: K(X1, X2) itself)."""
    if isinstance(form, GenericForm):
        return form.kernel(X1, cols.B)
    return form.radial.map_(_left(form, X1, cols) @ cols.B.mT)


def dense_block(form: TiledForm | GenericForm, X1: torch.Tensor,
                cols: PreparedColumns) -> torch.Tensor:
    """K(X1, X2) as a dense matrix in the columns' dtype, the output scale included."""
    if isinstance(form, GenericForm):
        return form.kernel(X1, cols.B)
    return kernel_slab(form, X1, cols).mul_(form.scale)


@torch.no_grad()
def block_matmul(form: TiledForm | GenericForm, X1: torch.Tensor, cols: PreparedColumns,
                 V: torch.Tensor, tile_rows: int = TILE_ROWS, tile_cols: int = TILE_COLS
                 ) -> torch.Tensor:
    """K(X1, X2) @ V for one row block X1 (X2 given by ``cols``), in V's dtype.

    Stationary kernels: tiles of ``tile_rows x tile_cols`` entries (a few MiB, so that
    the elementwise map runs on a tile still in cache after its GEMM), each formed and
    multiplied with V in the dtype of ``cols`` and summed in V's dtype: float32 tiles
    then add float32 rounding over at most ``tile_cols`` terms, not over all n2.
    Generic kernels: ``kernel(X1_b, X2)`` in slabs of about :data:`FAST_BLOCK_BYTES`.
    A pure function of (kernel form, X1 block, X2's columns, V): the unit of work that a
    distributed product sends to the worker holding the block."""
    n1, n2 = X1.shape[0], cols.B.shape[0]
    if isinstance(form, GenericForm):
        rows = fast_block(n2, X1.element_size())
        parts = [form.kernel(X1[s:s + rows], cols.B) @ V for s in range(0, n1, rows)]
        return torch.cat(parts) if parts else V.new_zeros(0, V.shape[1])
    Vt = V.to(cols.B.dtype)
    out = V.new_zeros(n1, V.shape[1])
    tile = _Tile(tile_rows, tile_cols, cols.B)
    for s in range(0, n1, tile_rows):
        A = _left(form, X1[s:s + tile_rows], cols)
        acc = out[s:s + tile_rows]
        for c in range(0, n2, tile_cols):
            G = form.radial.map_(tile.product(A, cols.B[c:c + tile_cols]))
            acc += (G @ Vt[c:c + tile_cols]).to(V.dtype)
    return out.mul_(form.scale)


class _Tile:
    """One tile's memory, reused by every tile of a product: a fresh multi-MiB tensor per
    tile costs a page fault per page where the allocator hands large blocks back to the
    system at once (glibc with MALLOC_TRIM_THRESHOLD_ set, as dask's nanny sets it on
    every worker; benchmarks/results/design-measurements.md)."""

    def __init__(self, rows: int, cols: int, like: torch.Tensor, count: int = 1) -> None:
        self.buffers = [like.new_empty(rows * cols) for _ in range(count)]

    def product(self, A: torch.Tensor, B: torch.Tensor, which: int = 0) -> torch.Tensor:
        """A Bᵀ written into the tile's memory."""
        out = self.buffers[which][:A.shape[0] * B.shape[0]].view(A.shape[0], B.shape[0])
        return torch.mm(A, B.mT, out=out)


@torch.no_grad()
def tiled_contraction(form: TiledForm, X1: torch.Tensor, cols: PreparedColumns,
                      left: torch.Tensor, right: torch.Tensor, tile_rows: int = TILE_ROWS,
                      tile_cols: int = TILE_COLS) -> tuple[torch.Tensor, torch.Tensor]:
    """For an exponential form (κ(t) = eᵗ, t = −r²/2: the RBF), with
    M = (left rightᵀ) ⊙ κ(X1, X2) (κ = K / scale):
    (Σ_ij M_ij, S) with S_d = Σ_ij M_ij (a_id − b_jd)², a = (x1 − c)/l, b = (x2 − c)/l,
    by tiles as :func:`block_matmul` (formed in the dtype of ``cols``, summed in
    left's). ⟨left rightᵀ, K⟩ = scale · Σ M and its derivative in l_d is
    scale · S_d / l_d (the kernel's ``tiled_gradients``): the lengthscale sums without
    an n1 x n2 x d tensor, as
    S_d = Σ_i a_id² Σ_j M_ij + Σ_j b_jd² Σ_i M_ij − 2 Σ_i a_id (M b)_id."""
    if not form.radial.exponential:
        raise ValueError("tiled_contraction needs an exponential radial profile (the RBF's)")
    d = cols.B.shape[1] - 2
    wide = left.dtype
    lt, rt = left.to(cols.B.dtype), right.to(cols.B.dtype)
    total = torch.zeros((), dtype=wide, device=left.device)
    S = torch.zeros(d, dtype=wide, device=left.device)
    col_sums = torch.zeros(cols.B.shape[0], dtype=wide, device=left.device)
    tile = _Tile(tile_rows, tile_cols, cols.B, count=2)
    for s in range(0, X1.shape[0], tile_rows):
        A = _left(form, X1[s:s + tile_rows], cols)
        a = A[:, :d]
        for c in range(0, cols.B.shape[0], tile_cols):
            Bt = cols.B[c:c + tile_cols]
            M = form.radial.map_(tile.product(A, Bt)).mul_(
                tile.product(lt[s:s + tile_rows], rt[c:c + tile_cols], 1))
            rows, cs = M.sum(1), M.sum(0)
            col_sums[c:c + tile_cols] += cs.to(wide)
            total += rows.sum(dtype=wide)
            S += ((a * a) * rows[:, None]).sum(0, dtype=wide) \
                - 2.0 * (a * (M @ Bt[:, :d])).sum(0, dtype=wide)
    b = cols.B[:, :d].to(wide)
    return total, S + ((b * b) * col_sums[:, None]).sum(0)


def fast_block(n2: int, itemsize: int, budget: int = FAST_BLOCK_BYTES) -> int:
    """Rows per slab of a generic kernel: one ``rows x n2`` slab within ``budget``."""
    return int(max(16, budget // max(1, n2 * itemsize)))


@torch.no_grad()
def kernel_product(kernel: Any, X1: torch.Tensor, X2: torch.Tensor, V: torch.Tensor,
                   noise: torch.Tensor | float | None = None, block: int | None = None,
                   block_dtype: torch.dtype | None = None) -> torch.Tensor:
    """(K(X1, X2) + σ²I) V for every column of V at once, in row blocks, no autograd.

    ``noise`` (σ²) needs X1 and X2 to be the same rows. ``block_dtype`` (e.g.
    torch.float32): slabs of stationary kernels are formed and multiplied in it, the
    result summed in V's dtype. ``block``: rows per call of :func:`block_matmul` (which
    tiles its block itself; default: all rows in one call)."""
    squeeze = V.ndim == 1
    V2 = V[:, None] if squeeze else V
    if V2.shape[0] != X2.shape[0]:
        raise ValueError(f"V has {V2.shape[0]} rows but X2 has {X2.shape[0]}")
    if noise is not None and X1.shape[0] != X2.shape[0]:
        raise ValueError("noise (σ²I) needs X1 and X2 to be the same rows")
    form = kernel_form(kernel)
    cols = prepare_columns(form, X2, block_dtype)
    block = max(1, X1.shape[0]) if block is None else int(block)
    out = V2.new_empty(X1.shape[0], V2.shape[1])
    for s in range(0, X1.shape[0], int(block)):
        out[s : s + block] = block_matmul(form, X1[s : s + block], cols, V2)
    if noise is not None:
        out.add_(V2, alpha=float(noise))
    return out[:, 0] if squeeze else out


# -- differentiable product ------------------------------------------------------------
class _KernelMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kernel, X1, X2, V, block, *params):  # noqa: D102
        out = V.new_empty(X1.shape[0], V.shape[1])
        with torch.no_grad():
            form = kernel_form(kernel)
            cols = prepare_columns(form, X2)
            for s in range(0, X1.shape[0], block):
                out[s : s + block] = block_matmul(form, X1[s : s + block], cols, V)
        ctx.kernel, ctx.block = kernel, block
        ctx.save_for_backward(X1, X2, V, *params)
        return out

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        X1, X2, V, *params = ctx.saved_tensors
        kernel, block = ctx.kernel, ctx.block
        needs = ctx.needs_input_grad[5:]
        grads = [torch.zeros_like(p) if need else None for p, need in zip(params, needs)]
        grad_V = torch.zeros_like(V) if ctx.needs_input_grad[3] else None
        if any(needs):  # ⟨g, K V⟩ = ⟨g Vᵀ, K⟩
            part = kernel_contraction(kernel, X1, X2, grad_out, V, block)
            for acc, p in zip(grads, params):
                if acc is not None and p in part:
                    acc += part[p]
        if grad_V is not None:
            with torch.no_grad():
                for s in range(0, X1.shape[0], block):
                    grad_V += kernel(X1[s : s + block], X2).mT @ grad_out[s : s + block]
        return (None, None, None, grad_V, None, *grads)


def kernel_contraction(kernel: Any, X1: torch.Tensor, X2: torch.Tensor, left: torch.Tensor,
                       right: torch.Tensor, block: int | None = None
                       ) -> dict[torch.Tensor, torch.Tensor]:
    """Gradients of ⟨left rightᵀ, K(X1, X2)⟩ in the kernel's trainable parameters (a
    dict keyed by parameter): one ``kernel.vjp`` per row block b with the cotangent
    left_b rightᵀ (``block`` x n2, chosen from memory when None), never the n1 x n2
    matrix."""
    if block is None:
        block = auto_block(X1.shape[0], X2.shape[0], X1.element_size())
    out: dict[torch.Tensor, torch.Tensor] = {}
    for s in range(0, X1.shape[0], int(block)):
        part, _ = kernel.vjp(X1[s : s + block], X2, left[s : s + block] @ right.mT)
        for p, g in part.items():
            out[p] = out[p] + g if p in out else g.clone()
    return out


def kernel_matmul(
    kernel: Any,
    X1: torch.Tensor,
    X2: torch.Tensor,
    V: torch.Tensor,
    block: int | None = None,
) -> torch.Tensor:
    """K(X1, X2) @ V in row blocks of ``block`` rows (chosen from memory when None);
    differentiable in the kernel's parameters and V."""
    if X1.requires_grad or X2.requires_grad:
        raise ValueError(
            "kernel_matmul does not differentiate with respect to the inputs X1, X2; "
            "pass detached inputs (or use kernel(X1, X2) @ V for input gradients)."
        )
    squeeze = V.ndim == 1
    V2 = V[:, None] if squeeze else V
    if V2.shape[0] != X2.shape[0]:
        raise ValueError(f"V has {V2.shape[0]} rows but X2 has {X2.shape[0]}")
    if block is None:
        block = auto_block(X1.shape[0], X2.shape[0], X1.element_size())
    params = [p for p in kernel.parameters() if p.requires_grad]
    out = _KernelMatmul.apply(kernel, X1, X2, V2, int(block), *params)
    return out[:, 0] if squeeze else out


__all__ = ["kernel_matmul", "kernel_contraction", "kernel_product", "block_matmul",
           "kernel_form", "tiled_gradient", "prepare_columns", "kernel_slab",
           "tiled_contraction", "Radial", "TiledForm", "GenericForm", "PreparedColumns",
           "auto_block", "fast_block", "TILE_ROWS", "TILE_COLS"]
