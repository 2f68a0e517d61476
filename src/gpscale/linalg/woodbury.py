"""Solves and log-determinants of C = σ²I + Φ W Φᵀ through the p x p matrix
A = ΦᵀΦ + σ² W⁻¹ (W diagonal, positive).

Woodbury:            C⁻¹ = σ⁻² (I − Φ A⁻¹ Φᵀ)
Determinant lemma:   log|C| = (n − p) log σ² + log|W| + log|A|
"""

from __future__ import annotations

import torch

from .cholesky import robust_cholesky


def woodbury_factor(
    gram: torch.Tensor, noise: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Cholesky factor of A = ΦᵀΦ + σ² diag(w)⁻¹ given ``gram`` = ΦᵀΦ (p x p)."""
    p = gram.shape[-1]
    A = gram + torch.diag_embed((noise / weights).expand(p))
    return robust_cholesky(A)


def woodbury_solve(
    phi: torch.Tensor, noise: torch.Tensor, weights: torch.Tensor, B: torch.Tensor
) -> torch.Tensor:
    """C⁻¹ B for C = σ²I + Φ diag(w) Φᵀ, in O(n p² + p³)."""
    L = woodbury_factor(phi.mT @ phi, noise, weights)
    inner = torch.cholesky_solve(phi.mT @ B, L)
    return (B - phi @ inner) / noise


def woodbury_logdet(
    n: int, noise: torch.Tensor, weights: torch.Tensor, L: torch.Tensor
) -> torch.Tensor:
    """log|σ²I + Φ diag(w) Φᵀ| from the factor ``L`` of A (see :func:`woodbury_factor`)."""
    p = L.shape[-1]
    w = weights.expand(p)
    return ((n - p) * torch.log(noise) + torch.log(w).sum()
            + 2.0 * torch.log(torch.diagonal(L)).sum())
