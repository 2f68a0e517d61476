"""Cholesky factorisation with an escalating jitter ladder."""

from __future__ import annotations

import warnings

import torch


class NumericalWarning(RuntimeWarning):
    """A factorisation needed help (jitter) to succeed."""


class CholeskyError(ValueError):
    """The matrix is not positive definite even after the largest jitter."""


def robust_cholesky(
    A: torch.Tensor,
    jitters: tuple[float, ...] = (1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4),
    warn: bool = True,
) -> torch.Tensor:
    """Lower Cholesky factor of symmetric ``A``.

    If the plain factorisation fails, ``jitter * mean(diag A)`` is added to the
    diagonal for each relative jitter in ``jitters`` in turn; success with jitter
    emits a :class:`NumericalWarning` naming the value used. Raises
    :class:`CholeskyError` when the largest jitter still fails.
    """
    if not torch.isfinite(A).all():
        raise CholeskyError(
            "matrix to factorise contains NaN or inf; the hyperparameters have probably "
            "diverged (check the data scale, or standardise X and y)"
        )
    L, info = torch.linalg.cholesky_ex(A)
    if not info.any():
        return L
    scale = torch.diagonal(A, dim1=-2, dim2=-1).mean().abs().clamp_min(1e-300)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    for rel in jitters:
        L, info = torch.linalg.cholesky_ex(A + (rel * scale) * eye)
        if not info.any():
            if warn:
                warnings.warn(
                    f"Cholesky needed jitter {rel * float(scale.detach()):.3g} "
                    f"({rel:g} x mean diagonal) on a {A.shape[-1]}x{A.shape[-1]} matrix",
                    NumericalWarning,
                    stacklevel=2,
                )
            return L
    raise CholeskyError(
        f"{A.shape[-1]}x{A.shape[-1]} matrix is not positive definite even with jitter "
        f"{jitters[-1]:g} x mean diagonal; the noise variance may be too small or the "
        "kernel degenerate (duplicated inputs with zero noise). Raise the noise floor."
    )


def robust_eigh(A: torch.Tensor, shifts: tuple[float, ...] = (1e-12, 1e-10, 1e-8)
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.eigh`` of a symmetric A that retries when LAPACK's solver fails to
    converge (it can, on ill-conditioned matrices with clustered eigenvalues): A + δI
    for δ = shift · max|diag A| has the same eigenvectors and eigenvalues shifted by δ,
    which are shifted back. Warns with the shift used."""
    try:
        return torch.linalg.eigh(A)
    except torch.linalg.LinAlgError:
        pass
    scale = torch.diagonal(A, dim1=-2, dim2=-1).abs().max().clamp_min(1e-300)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    for rel in shifts:
        delta = rel * scale
        try:
            lam, Q = torch.linalg.eigh(A + delta * eye)
        except torch.linalg.LinAlgError:
            continue
        warnings.warn(f"eigh needed a diagonal shift {float(delta.detach()):.3g} on a "
                      f"{A.shape[-1]}x{A.shape[-1]} matrix", NumericalWarning, stacklevel=2)
        return lam - delta, Q
    raise torch.linalg.LinAlgError(
        f"eigh failed on a {A.shape[-1]}x{A.shape[-1]} matrix even with a diagonal shift of "
        f"{shifts[-1]:g} x its largest diagonal entry; check it for NaN or huge entries")
