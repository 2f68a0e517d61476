"""Batched preconditioned conjugate gradients for symmetric positive definite systems."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

MatVec = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class CGInfo:
    """Outcome of a CG solve: iterations run, final relative residual per column."""

    iterations: int
    rel_residual: torch.Tensor
    converged: bool


def cg(
    matvec: MatVec,
    B: torch.Tensor,
    precond: MatVec | None = None,
    x0: torch.Tensor | None = None,
    tol: float = 1e-8,
    max_iter: int | None = None,
    callback: Callable[[int, torch.Tensor], None] | None = None,
    stop: Callable[[torch.Tensor], bool] | None = None,
) -> tuple[torch.Tensor, CGInfo]:
    """Solve A X = B for every column of B (A given by ``matvec``, SPD).

    Stops when every column's relative residual ‖b − A x‖ / ‖b‖ is below ``tol`` or
    after ``max_iter`` iterations (default: the system size). ``precond`` applies an
    approximation of A⁻¹ (SPD). Columns are iterated together, each with its own
    step sizes; converged columns are frozen. ``callback(iteration, rel_residuals)``
    is called after every iteration (progress bars; it may raise KeyboardInterrupt);
    then ``stop(rel_residuals)`` (e.g. a deadline): True ends the solve where it is.
    """
    squeeze = B.ndim == 1
    B2 = B[:, None] if squeeze else B
    n = B2.shape[0]
    max_iter = n if max_iter is None else max_iter
    X = torch.zeros_like(B2) if x0 is None else (x0[:, None] if x0.ndim == 1 else x0).clone()
    R = B2 - matvec(X) if x0 is not None else B2.clone()
    bnorm = B2.norm(dim=0).clamp_min(torch.finfo(B2.dtype).tiny)
    Z = precond(R) if precond is not None else R
    P = Z.clone()
    rz = (R * Z).sum(0)
    rel = R.norm(dim=0) / bnorm
    it = 0
    while it < max_iter and (rel > tol).any():
        active = (rel > tol).to(B2.dtype)
        AP = matvec(P)
        pAp = (P * AP).sum(0)
        alpha = torch.where(pAp > 0, rz / pAp.clamp_min(torch.finfo(B2.dtype).tiny), 0.0)
        alpha = alpha * active
        X = X + P * alpha
        R = R - AP * alpha
        Z = precond(R) if precond is not None else R
        rz_new = (R * Z).sum(0)
        beta = torch.where(rz > 0, rz_new / rz.clamp_min(torch.finfo(B2.dtype).tiny), 0.0)
        P = Z + P * beta
        rz = rz_new
        rel = R.norm(dim=0) / bnorm
        it += 1
        if callback is not None:
            callback(it, rel)
        if stop is not None and stop(rel):
            break
    info = CGInfo(iterations=it, rel_residual=rel, converged=bool((rel <= tol).all()))
    return (X[:, 0] if squeeze else X), info
