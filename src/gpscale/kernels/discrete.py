"""Kernels on non-vector inputs represented as tensors (Cao et al. 2013, §4.1: discrete
domains, where inducing points must be chosen from the training data).

Each kernel takes a tensor whose rows describe one object: count fingerprints of
molecules (:func:`gpscale.data.featurize.morgan_counts`), integer-coded equal-length
sequences (:func:`gpscale.data.featurize.sequence_codes`), k-mer count vectors
(:func:`gpscale.data.featurize.kmer_counts`) or histograms. None of them is
differentiable in the inputs, and none needs to be. Pairwise reductions that would
need an n1 x n2 x F intermediate are computed over row blocks within a memory budget.

Compound kernels with one learned variance per component (the paper's graph-kernel
sums and per-camera histogram kernels) are ``Scale(k1) + Scale(k2) + ...``;
:func:`scaled_sum` builds one.
"""

from __future__ import annotations

from typing import Any

import torch

from ..params import Positive
from .base import Kernel, Scale, Sum

#: default bytes for one block of an n1 x n2 x F broadcast
DEFAULT_BUDGET = 64 * 2**20
#: integer-valued inputs with counts up to this use the threshold-matmul path of min_sum
MAX_THRESHOLDS = 256


class _Budgeted(Kernel):
    """A kernel whose pairwise reduction is blocked to ``budget`` bytes."""

    def __init__(self, budget: int = DEFAULT_BUDGET, active_dims: list[int] | None = None):
        super().__init__(active_dims)
        if int(budget) < 1:
            raise ValueError(f"budget must be a positive number of bytes, got {budget}")
        self.budget = int(budget)

    def _config_args(self) -> dict[str, Any]:
        return {} if self.budget == DEFAULT_BUDGET else {"budget": self.budget}


def _check_nonneg(X: torch.Tensor, who: str) -> torch.Tensor:
    """Validate non-negative finite features (n, F); return the column maxima (F,).
    Two cheap reductions (max and min propagate NaN), no boolean n x F temporaries."""
    if X.dim() != 2:
        raise ValueError(f"{who} expects a 2-D tensor of features (n, F); got shape "
                         f"{tuple(X.shape)}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        return torch.zeros(X.shape[1], dtype=X.dtype, device=X.device)
    hi, lo = X.amax(0), X.min()
    if not (torch.isfinite(hi).all() and torch.isfinite(lo)):
        raise ValueError(f"{who} inputs contain NaN or inf")
    if (lo < 0).any():
        raise ValueError(f"{who} needs non-negative counts or histograms; the inputs have "
                         "negative entries")
    return hi


def _rows_per_block(n2: int, F: int, itemsize: int, budget: int) -> int:
    return max(1, budget // max(1, n2 * F * itemsize))


def min_sum(X1: torch.Tensor, X2: torch.Tensor, budget: int = DEFAULT_BUDGET,
            colmax: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """S_ij = Σ_f min(X1_if, X2_jf) for non-negative rows, without an n1 x n2 x F tensor.

    Only the columns where both inputs have a non-zero entry contribute (min(a, 0) = 0),
    so the work is over that joint support: a kernel column K[:, j] of sparse
    fingerprints touches the few dozen features of molecule j, not all F.
    ``colmax``: the column maxima of X1 and X2 when the caller has them (from
    :func:`_check_nonneg`).

    Integer counts (max ≤ :data:`MAX_THRESHOLDS`) use min(a, b) = Σ_{t≥1} [a ≥ t][b ≥ t],
    i.e. one indicator matmul per threshold t over only the columns where both inputs
    reach t (sparse fingerprints have few columns above 1); each product is an exact
    integer, computed in float32 when F < 2²⁴ and accumulated in the input dtype.
    Other inputs are reduced by broadcasting over row blocks within ``budget`` bytes.
    """
    n1, F = X1.shape
    n2 = X2.shape[0]
    out = torch.zeros(n1, n2, dtype=X1.dtype, device=X1.device)
    if n1 == 0 or n2 == 0 or F == 0:
        return out
    c1, c2 = colmax if colmax is not None else (X1.amax(0), X2.amax(0))
    both = torch.minimum(c1, c2)  # column f contributes only where both maxima are > 0
    cols = torch.nonzero(both > 0).flatten()
    if cols.numel() == 0:
        return out
    both = both[cols]
    if cols.numel() < F:
        X1, X2 = X1[:, cols], X2[:, cols]
    F = cols.numel()
    top = float(both.max())
    integer = bool((X1 == X1.round()).all() and (X2 == X2.round()).all())
    if integer and top <= MAX_THRESHOLDS:
        exact32 = F < 2**24 and torch.get_float32_matmul_precision() == "highest"
        work = torch.float32 if exact32 else X1.dtype  # TF32 would round the counts
        for t in range(1, int(top) + 1):
            sel = torch.nonzero(both >= t).flatten()
            if sel.numel() == 0:
                break
            A = (X1[:, sel] >= t).to(work)
            B = (X2[:, sel] >= t).to(work)
            out += (A @ B.mT).to(out.dtype)
        return out
    rows = _rows_per_block(n2, F, X1.element_size(), budget)
    for s in range(0, n1, rows):
        out[s : s + rows] = torch.minimum(X1[s : s + rows, None, :], X2[None, :, :]).sum(-1)
    return out


class Tanimoto(_Budgeted):
    """MinMax / Tanimoto kernel on counts: k(a, b) = Σ_f min(a_f, b_f) / Σ_f max(a_f, b_f).

    Uses Σ max = Σ a + Σ b − Σ min. On 0/1 fingerprints it equals the binary Tanimoto
    ⟨a, b⟩ / (|a|² + |b|² − ⟨a, b⟩). Positive definite on non-negative vectors
    (Ralaivola et al. 2005); by convention k(0, 0) = 1 and k(0, b) = 0 for b ≠ 0.
    Inputs must be non-negative (ValueError otherwise). No parameters: wrap it in
    :class:`Scale` for a signal variance.
    """

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        colmax = _check_nonneg(X1, "Tanimoto"), _check_nonneg(X2, "Tanimoto")
        mins = min_sum(X1, X2, self.budget, colmax)
        maxs = X1.sum(1)[:, None] + X2.sum(1)[None, :] - mins
        empty = maxs <= 0
        return torch.where(empty, 1.0, mins / torch.where(empty, 1.0, maxs))

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)


class TanimotoDot(Kernel):
    """Tanimoto in inner-product form: k(a, b) = ⟨a, b⟩ / (|a|² + |b|² − ⟨a, b⟩).

    The binary Tanimoto on 0/1 fingerprints (equal to :class:`Tanimoto` there); on
    real-valued non-negative vectors it is the form GAUCHE uses. One n1 x n2 matmul,
    no chunking needed. k(0, 0) = 1 by convention.
    """

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        _check_nonneg(X1, "TanimotoDot")
        _check_nonneg(X2, "TanimotoDot")
        dot = X1 @ X2.mT
        den = (X1 * X1).sum(1)[:, None] + (X2 * X2).sum(1)[None, :] - dot
        empty = den <= 0
        return torch.where(empty, 1.0, dot / torch.where(empty, 1.0, den))

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)


class Intersection(_Budgeted):
    """Histogram intersection k(a, b) = Σ_f min(a_f, b_f) (Cao et al. §4.1, HoG data).

    Positive definite on non-negative histograms (min(a, b) = ∫ 1[t < a] 1[t < b] dt).
    Computed by :func:`min_sum` within ``budget`` bytes per block.
    """

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        colmax = _check_nonneg(X1, "Intersection"), _check_nonneg(X2, "Intersection")
        return min_sum(X1, X2, self.budget, colmax)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return X.sum(1)


def _check_codes(X: torch.Tensor) -> None:
    if X.dim() != 2:
        raise ValueError(f"Hamming expects integer codes of shape (n, L); got shape "
                         f"{tuple(X.shape)}")
    if X.is_floating_point() and not (torch.isfinite(X).all() and (X == X.round()).all()):
        raise ValueError("Hamming needs integer-coded sequences (see "
                         "gpscale.data.featurize.sequence_codes); the inputs have "
                         "non-integer entries")


def mismatches(X1: torch.Tensor, X2: torch.Tensor, budget: int = DEFAULT_BUDGET) -> torch.Tensor:
    """Hamming distance H_ij = Σ_p [X1_ip ≠ X2_jp], over row blocks within ``budget``."""
    n1, L = X1.shape
    out = torch.empty(n1, X2.shape[0], dtype=torch.float64 if not X1.is_floating_point()
                      else X1.dtype, device=X1.device)
    rows = _rows_per_block(X2.shape[0], L, 1, budget)
    for s in range(0, n1, rows):
        out[s : s + rows] = (X1[s : s + rows, None, :] != X2[None, :, :]).sum(-1)
    return out


class Hamming(_Budgeted):
    """Exponentiated Hamming kernel on equal-length integer-coded sequences:
    k(a, b) = exp(−H(a, b) / l), H = number of positions p with a_p ≠ b_p.

    Positive definite: exp(−H/l) = Π_p [c + (1 − c) 1[a_p = b_p]] with c = e^{−1/l} ∈ (0, 1),
    a product of PSD per-position kernels. The lengthscale l is learned; l → ∞ gives the
    constant kernel, small l the identity.
    """

    lengthscale = Positive(doc="mismatch lengthscale l")

    def __init__(self, lengthscale: float = 1.0, budget: int = DEFAULT_BUDGET,
                 active_dims: list[int] | None = None):
        super().__init__(budget, active_dims)
        self.lengthscale = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(1)

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        _check_codes(X1)
        _check_codes(X2)
        if X1.shape[1] != X2.shape[1]:
            raise ValueError(f"Hamming needs sequences of equal length; got {X1.shape[1]} "
                             f"and {X2.shape[1]} positions")
        H = mismatches(X1, X2, self.budget).to(self.lengthscale.dtype)
        return torch.exp(-H / self.lengthscale)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=self.lengthscale.dtype, device=X.device)


class Spectrum(Kernel):
    """Normalised k-mer spectrum kernel (Leslie et al. 2002) on k-mer count vectors φ:
    k(a, b) = ⟨φ(a), φ(b)⟩ / (|φ(a)| |φ(b)|).

    A cosine of count vectors, hence positive semi-definite; rows of zeros (sequences
    shorter than k) get k = 0 everywhere, including their diagonal. One matmul.
    """

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._unit(X1) @ self._unit(X2).mT

    @staticmethod
    def _unit(X: torch.Tensor) -> torch.Tensor:
        if X.dim() != 2 or not torch.isfinite(X).all():
            raise ValueError("Spectrum expects finite k-mer count vectors of shape (n, F)")
        norm = torch.linalg.vector_norm(X, dim=1, keepdim=True)
        return X / torch.where(norm > 0, norm, 1.0)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return (torch.linalg.vector_norm(X, dim=1) > 0).to(X.dtype)


def scaled_sum(*kernels: Kernel, variances: float | list[float] = 1.0) -> Kernel:
    """Σ_c s_c² k_c: one learned signal variance per component (Cao et al. §4.1's
    compound graph-kernel and per-camera histogram kernels)."""
    if not kernels:
        raise ValueError("scaled_sum needs at least one kernel")
    vs = [float(variances)] * len(kernels) if not isinstance(variances, (list, tuple)) \
        else [float(v) for v in variances]
    if len(vs) != len(kernels):
        raise ValueError(f"variances has {len(vs)} entries for {len(kernels)} kernels")
    parts = [Scale(k, v) for k, v in zip(kernels, vs)]
    return parts[0] if len(parts) == 1 else Sum(*parts)
