"""Numerical linear algebra: robust Cholesky, preconditioned CG, Woodbury identities."""

from .cg import CGInfo, cg
from .cholesky import CholeskyError, NumericalWarning, robust_cholesky, robust_eigh
from .kron import (
    khatri_rao_cols_matmul,
    khatri_rao_cols_rmatmul,
    khatri_rao_rows_matmul,
    kr_kron_select,
    kr_kron_select_direct,
    kron_matmul,
    kron_top_p,
)
from .lowrank import low_rank_inverse, pivoted_cholesky
from .pivchol import CholQRFactors, augmented_qr, partial_cholesky
from .woodbury import woodbury_factor, woodbury_logdet, woodbury_solve

__all__ = [
    "cg", "CGInfo", "robust_cholesky", "robust_eigh", "CholeskyError", "NumericalWarning",
    "woodbury_factor", "woodbury_logdet", "woodbury_solve", "kron_matmul", "kron_top_p",
    "khatri_rao_rows_matmul", "khatri_rao_cols_matmul", "khatri_rao_cols_rmatmul",
    "kr_kron_select", "kr_kron_select_direct", "pivoted_cholesky", "low_rank_inverse",
    "partial_cholesky", "augmented_qr", "CholQRFactors",
]
