"""K(X1, X2) @ V over row blocks, differentiable in the kernel's parameters and V.

The forward pass never holds more than one ``block x n2`` slab of the kernel matrix.
The backward pass recomputes each slab with autograd enabled and contracts it with
the incoming gradient, so O(n²)-time methods run in O(n · block) memory.
Gradients with respect to X1 and X2 are not provided.
"""

from __future__ import annotations

import torch

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
        want = [p for p, need in zip(params, ctx.needs_input_grad[5:]) if need]
        grads = [torch.zeros_like(p) for p in want]
        grad_V = torch.zeros_like(V) if ctx.needs_input_grad[3] else None
        for s in range(0, X1.shape[0], block):
            g = grad_out[s : s + block]
            with torch.enable_grad():
                Kb = kernel(X1[s : s + block], X2)
                if want:
                    parts = torch.autograd.grad(Kb, want, g @ V.mT, allow_unused=True)
                    for acc, part in zip(grads, parts):
                        if part is not None:
                            acc += part
            if grad_V is not None:
                grad_V += Kb.detach().mT @ g
        it = iter(grads)
        param_grads = [next(it) if need else None for need in ctx.needs_input_grad[5:]]
        return (None, None, None, grad_V, None, *param_grads)


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
