"""Numerical linear algebra: robust Cholesky, preconditioned CG, Woodbury identities."""

from .cg import CGInfo, cg
from .cholesky import CholeskyError, NumericalWarning, robust_cholesky
from .woodbury import woodbury_factor, woodbury_logdet, woodbury_solve

__all__ = [
    "cg", "CGInfo", "robust_cholesky", "CholeskyError", "NumericalWarning",
    "woodbury_factor", "woodbury_logdet", "woodbury_solve",
]
