"""Cholesky factorisation with an escalating jitter ladder."""

from __future__ import annotations

import warnings

import torch


class NumericalWarning(RuntimeWarning):
    """A factorisation needed help (jitter) to succeed."""


class CholeskyError(ValueError):
    """The matrix is not positive definite even after the largest jitter."""


#: relative jitters tried, in order, after the plain factorisation fails
JITTERS = (1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4)
#: a relative jitter up to this is not warned of: it is about the factorisation's own
#: rounding (backward error ~ n·ε·‖A‖, 1e-10 x the mean diagonal at n ~ 500 in float64),
#: routine for an inducing points' K_ZZ with repeated rows (one-hot columns of a table)
QUIET_JITTER = 1e-10


class JitterLadder:
    """Where a sequence of factorisations of slowly changing matrices (one per
    evaluation of a fit) starts the jitter ladder.

    ``level`` is the index into the ladder of the last jitter that worked (−1: none
    needed). The next :func:`robust_cholesky` with this ladder still tries the plain
    factorisation first (a matrix that needs no jitter never gets any), but when that
    fails it resumes one rung below ``level`` instead of at the bottom: a fit that needs
    jitter at rung k pays three factorisations per evaluation instead of k + 2, with the
    same jitter as a search from the bottom unless the need dropped by two rungs or more
    since the last call. ``attempts`` counts every factorisation tried.
    """

    def __init__(self) -> None:
        self.level = -1
        self.attempts = 0

    def rungs(self, count: int) -> list[int]:
        """Ladder indices to try, −1 being the plain factorisation."""
        return [-1, *range(max(self.level - 1, 0), count)]

    def __repr__(self) -> str:
        return f"JitterLadder(level={self.level}, attempts={self.attempts})"


def _finite(A: torch.Tensor) -> bool:
    """Whether every entry of A is finite: a NaN or ±inf makes the sum non-finite, so one
    reduction decides unless the sum overflows (then the entries are checked)."""
    return bool(torch.isfinite(A.sum())) or bool(torch.isfinite(A).all())


def robust_cholesky(
    A: torch.Tensor,
    jitters: tuple[float, ...] = JITTERS,
    warn: bool = True,
    ladder: JitterLadder | None = None,
) -> torch.Tensor:
    """Lower Cholesky factor of symmetric ``A``.

    If the plain factorisation fails, ``jitter * mean(diag A)`` is added to the
    diagonal for each relative jitter in ``jitters`` in turn; success with a jitter above
    :data:`QUIET_JITTER` emits a :class:`NumericalWarning` naming the value used. Raises
    :class:`CholeskyError` when the largest jitter still fails. With a
    :class:`JitterLadder` a failed plain factorisation resumes one rung below the jitter
    that last worked (and the ladder remembers the rung that works now).
    """
    if not _finite(A):
        raise CholeskyError(
            "matrix to factorise contains NaN or inf; the hyperparameters have probably "
            "diverged (check the data scale, or standardise X and y)"
        )
    rungs = ladder.rungs(len(jitters)) if ladder is not None else range(-1, len(jitters))
    scale = eye = None
    for level in rungs:
        if level < 0:
            L, info = torch.linalg.cholesky_ex(A)
        else:
            if scale is None:
                scale = torch.diagonal(A, dim1=-2, dim2=-1).mean().abs().clamp_min(1e-300)
                eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
            L, info = torch.linalg.cholesky_ex(A + (jitters[level] * scale) * eye)
        if ladder is not None:
            ladder.attempts += 1
        if not info.any():
            if ladder is not None:
                ladder.level = level
            if level >= 0 and warn and jitters[level] > QUIET_JITTER:
                rel = jitters[level]
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


def inverse_from_cholesky(L: torch.Tensor) -> torch.Tensor:
    """A⁻¹ = L⁻ᵀL⁻¹ from the lower factor L of A (``torch.cholesky_inverse``, LAPACK
    ``potri``: 2n³/3 flops, against 2n³ for ``cholesky_solve(I, L)``), row-major.

    This is what the exact GP's gradient needs (G = ½(A⁻¹ − ααᵀ)). LAPACK's result is
    column-major; torch mirrors one triangle onto the other, so its transpose view holds the
    same values and is the row-major tensor that elementwise work on G and ``reshape(-1)``
    read without a copy or strided access.
    """
    inv = torch.cholesky_inverse(L)
    return inv if inv.is_contiguous() or not inv.mT.is_contiguous() else inv.mT


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
