"""Kernels on non-vector inputs represented as tensors (Cao et al. 2013, §4.1: discrete
domains, where inducing points must be chosen from the training data).

Each kernel takes a tensor whose rows describe one object: count fingerprints of
molecules (:func:`gpscale.data.featurize.morgan_counts`), integer-coded equal-length
sequences (:func:`gpscale.data.featurize.sequence_codes`), k-mer count vectors
(:func:`gpscale.data.featurize.kmer_counts`) or histograms. None of them is
differentiable in the inputs, and none needs to be. Pairwise reductions that would
need an n1 x n2 x F intermediate are computed over row blocks within a memory budget.

Tanimoto, Intersection and Hamming cache their hyperparameter-free work: the last
pairwise reduction per pair of input tensors, and the training set's count statistics
(see :mod:`gpscale.kernels.memo`). A sparse GP's hyperparameter phase, which evaluates
K(X, Z) again and again with new variances, then costs one scaling per evaluation.
After writing into an input behind PyTorch's back (``tensor.data``, or a NumPy array
that shares its memory), call ``kernel.clear_cache()``.

Compound kernels with one learned variance per component (the paper's graph-kernel
sums and per-camera histogram kernels) are ``Scale(k1) + Scale(k2) + ...``;
:func:`scaled_sum` builds one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..params import Positive
from .base import Kernel, Scale, Sum
from .memo import InputMemo

#: default bytes for one block of an n1 x n2 x F broadcast
DEFAULT_BUDGET = 64 * 2**20
#: integer-valued inputs with counts up to this use the threshold-matmul path of min_sum
MAX_THRESHOLDS = 256
#: below this many n1·n2·F entries (over the joint support) min_sum broadcasts even for
#: integer counts: for a few kernel columns (a sparse GP's K[:, j]) one broadcast beats
#: the threshold matmuls; the limit sits below the timed break-even of the two paths
MAX_SMALL_BROADCAST = 2**19
#: the largest kernel block (entries) whose parameter-free reduction is cached: n x m
#: blocks of a sparse GP, not the n x n matrix of a large exact GP
MAX_CACHED_BLOCK = 2**24
#: the largest cached input (entries) that also keeps a column-major copy for fast
#: column gathers; a larger one is gathered in place rather than held twice
MAX_TRANSPOSED = 2**25


class _Budgeted(Kernel):
    """A kernel whose pairwise reduction is blocked to ``budget`` bytes (on inputs used
    as given: ``raw_inputs``).

    Subclasses split the work into ``_reduce(X1, X2)``, which depends on no parameter
    and is the expensive part, and ``_finish(R)``, which applies the parameters and
    returns a new tensor. ``forward`` caches the last reduction per pair of input
    tensors (:class:`~gpscale.kernels.memo.InputMemo`): re-evaluating K(X, Z) with new
    hyperparameters costs only ``_finish``.
    """

    raw_inputs = True

    def __init__(self, budget: int = DEFAULT_BUDGET, active_dims: list[int] | None = None):
        super().__init__(active_dims)
        if int(budget) < 1:
            raise ValueError(f"budget must be a positive number of bytes, got {budget}")
        self.budget = int(budget)
        self._pair_memo = InputMemo(max_numel=MAX_CACHED_BLOCK)

    def _config_args(self) -> dict[str, Any]:
        return {} if self.budget == DEFAULT_BUDGET else {"budget": self.budget}

    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        X2 = X1 if X2 is None else X2
        R = self._pair_memo.get((X1, X2), lambda: self._reduce_raw(X1, X2))
        return self._finish(R)

    def _reduce_raw(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._reduce(self._cols(X1), self._cols(X2))

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._finish(self._reduce(X1, X2))

    def _reduce(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _finish(self, R: torch.Tensor) -> torch.Tensor:
        return R.clone()  # the caller owns the result (Kernel contract)


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
    if bool(lo < 0):
        raise ValueError(f"{who} needs non-negative counts or histograms; the inputs have "
                         "negative entries")
    return hi


@dataclass
class Counts:
    """Validated non-negative features with the reductions :func:`min_sum` needs:
    column maxima, row sums, whether all entries are integers, and (optionally) a
    column-major copy for fast gathers of a few columns."""

    X: torch.Tensor
    colmax: torch.Tensor
    rowsum: torch.Tensor
    integer: bool
    Xt: torch.Tensor | None = None

    @classmethod
    def of(cls, X: torch.Tensor, who: str, transposed: bool = False) -> Counts:
        colmax = _check_nonneg(X, who)
        return cls(X, colmax, X.sum(1), bool((X == X.round()).all()),
                   X.mT.contiguous() if transposed else None)

    def columns(self, cols: torch.Tensor) -> torch.Tensor:
        """X[:, cols] (n x len(cols))."""
        return self.Xt[cols].mT if self.Xt is not None else self.X[:, cols]


def _rows_per_block(n2: int, F: int, itemsize: int, budget: int) -> int:
    return max(1, budget // max(1, n2 * F * itemsize))


def min_sum(X1: torch.Tensor | Counts, X2: torch.Tensor | Counts,
            budget: int = DEFAULT_BUDGET) -> torch.Tensor:
    """S_ij = Σ_f min(X1_if, X2_jf) for non-negative rows, without an n1 x n2 x F tensor.

    Only the columns where both inputs have a non-zero entry contribute (min(a, 0) = 0),
    so the work is over that joint support: a kernel column K[:, j] of sparse
    fingerprints touches the few dozen features of molecule j, not all F. Either input
    may be given as :class:`Counts` (its reductions computed once, e.g. cached).

    Integer counts (max ≤ :data:`MAX_THRESHOLDS`) use min(a, b) = Σ_{t≥1} [a ≥ t][b ≥ t],
    i.e. one indicator matmul per threshold t over only the columns where both inputs
    reach t (sparse fingerprints have few columns above 1); each product is an exact
    integer, computed in float32 when F < 2²⁴ and accumulated in the input dtype.
    Other inputs, and small blocks (at most :data:`MAX_SMALL_BROADCAST` entries, such
    as a single kernel column), are reduced by broadcasting over row blocks within
    ``budget`` bytes.
    """
    A = X1 if isinstance(X1, Counts) else Counts.of(X1, "min_sum")
    B = X2 if isinstance(X2, Counts) else Counts.of(X2, "min_sum")
    n1, F = A.X.shape
    n2 = B.X.shape[0]
    out = torch.zeros(n1, n2, dtype=A.X.dtype, device=A.X.device)
    if n1 == 0 or n2 == 0 or F == 0:
        return out
    both = torch.minimum(A.colmax, B.colmax)  # column f counts only where both are > 0
    cols = torch.nonzero(both > 0).flatten()
    if cols.numel() == 0:
        return out
    both = both[cols]
    full = cols.numel() == F
    Xa = A.X if full else A.columns(cols)
    Xb = B.X if full else B.columns(cols)
    F = cols.numel()
    top = float(both.max())
    small = n1 * n2 * F <= MAX_SMALL_BROADCAST
    if A.integer and B.integer and top <= MAX_THRESHOLDS and not small:
        exact32 = F < 2**24 and torch.get_float32_matmul_precision() == "highest"
        work = torch.float32 if exact32 else Xa.dtype  # TF32 would round the counts
        for t in range(1, int(top) + 1):
            sel = torch.nonzero(both >= t).flatten()
            if sel.numel() == 0:
                break
            P = (Xa[:, sel] >= t).to(work)
            Q = (Xb[:, sel] >= t).to(work)
            out += (P @ Q.mT).to(out.dtype)
        return out
    rows = _rows_per_block(n2, F, Xa.element_size(), budget)
    for s in range(0, n1, rows):
        out[s : s + rows] = torch.minimum(Xa[s : s + rows, None, :], Xb[None, :, :]).sum(-1)
    return out


class _CountKernel(_Budgeted):
    """A budgeted kernel on non-negative counts: the first argument's :class:`Counts`
    (with a column-major copy up to :data:`MAX_TRANSPOSED` entries) are cached while
    the same tensor is passed, so each of many kernel columns K(X, x_j) touches only
    x_j's support."""

    name = "count kernel"

    def __init__(self, budget: int = DEFAULT_BUDGET, active_dims: list[int] | None = None):
        super().__init__(budget, active_dims)
        self._input_memo = InputMemo()

    def _counts(self, X1: torch.Tensor, X2: torch.Tensor) -> tuple[Counts, Counts]:
        A = self._input_memo.get((X1,), lambda: Counts.of(
            X1, self.name, transposed=X1.numel() <= MAX_TRANSPOSED))
        B = A if X2 is X1 else Counts.of(X2, self.name)
        return A, B

    def _reduce_raw(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        if self.active_dims is None:  # the cacheable case: X1 itself is the input
            return self._reduce_counts(*self._counts(X1, X2))
        return self._reduce(self._cols(X1), self._cols(X2))

    def _reduce(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        A = Counts.of(X1, self.name)
        return self._reduce_counts(A, A if X2 is X1 else Counts.of(X2, self.name))

    def _reduce_counts(self, A: Counts, B: Counts) -> torch.Tensor:
        raise NotImplementedError


class Tanimoto(_CountKernel):
    """MinMax / Tanimoto kernel on counts: k(a, b) = Σ_f min(a_f, b_f) / Σ_f max(a_f, b_f).

    Uses Σ max = Σ a + Σ b − Σ min. On 0/1 fingerprints it equals the binary Tanimoto
    ⟨a, b⟩ / (|a|² + |b|² − ⟨a, b⟩). Positive definite on non-negative vectors
    (Ralaivola et al. 2005); by convention k(0, 0) = 1 and k(0, b) = 0 for b ≠ 0.
    Inputs must be non-negative (ValueError otherwise). No parameters: wrap it in
    :class:`Scale` for a signal variance.
    """

    name = "Tanimoto"

    def _reduce_counts(self, A: Counts, B: Counts) -> torch.Tensor:
        mins = min_sum(A, B, self.budget)
        maxs = A.rowsum[:, None] + B.rowsum[None, :] - mins
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

    raw_inputs = True

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        _check_nonneg(X1, "TanimotoDot")
        _check_nonneg(X2, "TanimotoDot")
        dot = X1 @ X2.mT
        den = (X1 * X1).sum(1)[:, None] + (X2 * X2).sum(1)[None, :] - dot
        empty = den <= 0
        return torch.where(empty, 1.0, dot / torch.where(empty, 1.0, den))

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)


class Intersection(_CountKernel):
    """Histogram intersection k(a, b) = Σ_f min(a_f, b_f) (Cao et al. §4.1, HoG data).

    Positive definite on non-negative histograms (min(a, b) = ∫ 1[t < a] 1[t < b] dt).
    Computed by :func:`min_sum` within ``budget`` bytes per block.
    """

    name = "Intersection"

    def _reduce_counts(self, A: Counts, B: Counts) -> torch.Tensor:
        return min_sum(A, B, self.budget)

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

    def _reduce(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        _check_codes(X1)
        _check_codes(X2)
        if X1.shape[1] != X2.shape[1]:
            raise ValueError(f"Hamming needs sequences of equal length; got {X1.shape[1]} "
                             f"and {X2.shape[1]} positions")
        return mismatches(X1, X2, self.budget)

    def _finish(self, H: torch.Tensor) -> torch.Tensor:
        return torch.exp(-H.to(self.lengthscale.dtype) / self.lengthscale)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=self.lengthscale.dtype, device=X.device)


class Spectrum(Kernel):
    """Normalised k-mer spectrum kernel (Leslie et al. 2002) on k-mer count vectors φ:
    k(a, b) = ⟨φ(a), φ(b)⟩ / (|φ(a)| |φ(b)|).

    A cosine of count vectors, hence positive semi-definite; rows of zeros (sequences
    shorter than k) get k = 0 everywhere, including their diagonal. One matmul.
    """

    raw_inputs = True

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
