"""ΦᵀΦ summed over row chunks at about half the cost of a full product.

ΦᵀΦ is symmetric, so a chunk adds only its upper triangle, in panels of ``block``
columns: panel i adds Φ[:, i:i+b]ᵀ Φ[:, i:] to rows i..i+b of the upper part. With p/b
panels that is (1 + 1/(p/b)) / 2 of the p² products of Φᵀ @ Φ, as matrix products large
enough to run at the GEMM rate (a BLAS ``syrk`` does the same; torch has no binding to it).
The lower triangle is filled once, by :func:`mirror_upper`, after the last chunk.
"""

from __future__ import annotations

import torch

__all__ = ["add_upper_gram_", "mirror_upper"]

#: columns per panel: small enough to skip most of the lower triangle, large enough for
#: each product to run near the GEMM rate (benchmarks/results/design-measurements.md)
PANEL = 128


def add_upper_gram_(gram: torch.Tensor, phi: torch.Tensor, block: int = PANEL) -> torch.Tensor:
    """Add the upper triangle (and the diagonal blocks) of ``phi.mT @ phi`` to ``gram``,
    in place; entries strictly below the diagonal blocks are left untouched."""
    p = phi.shape[-1]
    if gram.shape != (p, p):
        raise ValueError(f"gram must be ({p}, {p}) for {p} feature columns, "
                         f"got {tuple(gram.shape)}")
    if block < 1:
        raise ValueError(f"block must be >= 1 columns, got {block}")
    for i in range(0, p, block):
        gram[i:i + block, i:].addmm_(phi[:, i:i + block].mT, phi[:, i:])
    return gram


def mirror_upper(gram: torch.Tensor) -> torch.Tensor:
    """The symmetric matrix whose upper triangle (diagonal included) is ``gram``'s."""
    upper = torch.triu(gram)
    return upper + torch.triu(gram, diagonal=1).mT
