"""K(X1, X2) @ V over row blocks, differentiable in the kernel's parameters and V.

The forward pass never holds more than one ``block x n2`` slab of the kernel matrix.
The backward pass recomputes each slab and contracts it with the incoming gradient
through ``kernel.vjp`` (⟨g, K_b V⟩ = ⟨g Vᵀ, K_b⟩), so O(n²)-time methods run in
O(n · block) memory.
Gradients with respect to X1 and X2 are not provided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # base imports this module for Kernel.matmul
    from .base import Kernel

#: default memory for one kernel slab and its autograd intermediates
DEFAULT_BLOCK_BYTES = 128 * 2**20


def auto_block(n1: int, n2: int, itemsize: int = 8, budget: int = DEFAULT_BLOCK_BYTES) -> int:
    """Rows per slab so that ~6 slab-sized temporaries fit in ``budget`` bytes."""
    return int(max(1, min(n1, budget // max(1, 6 * n2 * itemsize))))


class _KernelMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kernel, X1, X2, V, block, *params):  # noqa: D102
        out = V.new_empty(X1.shape[0], V.shape[1])
        with torch.no_grad():
            for s in range(0, X1.shape[0], block):
                out[s : s + block] = kernel(X1[s : s + block], X2) @ V
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
        for s in range(0, X1.shape[0], block):
            g = grad_out[s : s + block]
            if any(needs):
                # ⟨g, K_b V⟩ = ⟨g Vᵀ, K_b⟩: one kernel contraction per slab
                part, _ = kernel.vjp(X1[s : s + block], X2, g @ V.mT)
                for acc, p in zip(grads, params):
                    if acc is not None and p in part:
                        acc += part[p]
            if grad_V is not None:
                with torch.no_grad():
                    grad_V += kernel(X1[s : s + block], X2).mT @ g
        return (None, None, None, grad_V, None, *grads)


def kernel_matmul(
    kernel: Kernel,
    X1: torch.Tensor,
    X2: torch.Tensor,
    V: torch.Tensor,
    block: int | None = None,
) -> torch.Tensor:
    """K(X1, X2) @ V in row blocks of ``block`` rows (chosen from memory when None)."""
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
