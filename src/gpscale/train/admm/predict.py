"""The GP predictive mean without an O(n³) step: C⁻¹(y − m) by preconditioned CG.

GPCV-ADMM learns hyperparameters without factorising C = K + σ²I; :func:`cg_predict`
predicts the same way, so a model trained on more rows than a Cholesky can take still
predicts. Any exact GP can use it (it reads only the model's kernel, noise, mean and
data).
"""

from __future__ import annotations

import torch

from ...models.exact import ExactGP
from ...validation import as_matrix
from .ops import solve_full

__all__ = ["cg_predict"]


def cg_predict(
    model: ExactGP,
    X_new,
    *,
    tol: float = 1e-8,
    max_iter: int | None = None,
    precond_rank: int = 50,
    block: int | None = None,
    return_info: bool = False,
    preconditioner: str = "pivchol",
    dense_bytes: int = 2**30,
):
    """Posterior mean K(X*, X) C⁻¹ (y − m) + m with C⁻¹(y − m) from preconditioned CG
    (``preconditioner`` "pivchol": L Lᵀ + σ²I, L a rank-``precond_rank`` pivoted
    Cholesky factor of K; "grief": s ΦΦᵀ + σ²I with p = ``precond_rank`` GRIEF
    eigenfunctions, separable kernels only; both applied by Woodbury; "none" or rank 0:
    plain CG; see :mod:`gpscale.models.precond`). K is held densely when its n² entries
    fit in ``dense_bytes``, else its products are chunked (``block`` rows): O(n² ·
    iterations) time, O(n · block) memory beyond that budget, no O(n³) step.
    With ``return_info`` also returns the :class:`~gpscale.linalg.CGInfo`."""
    Xs = as_matrix(X_new, "X_new", model.X.dtype, model.X.device)
    if Xs.shape[1] != model.X.shape[1]:
        raise ValueError(f"X_new has {Xs.shape[1]} columns but the model was trained on "
                         f"{model.X.shape[1]}")
    alpha, info = solve_full(model, tol, max_iter, precond_rank, block, preconditioner,
                             dense_bytes)
    with torch.no_grad():
        mean = model.kernel.matmul(Xs, model.X, alpha, block) + model.mean_constant.detach()
    return (mean, info) if return_info else mean
