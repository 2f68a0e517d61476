"""Kronecker and Khatri-Rao algebra that never expands (Evans & Nair 2018, §4).

Notation (paper §4): for factor matrices A⁽ⁱ⁾, i = 1..d,

* Kronecker product ``⊗ᵢ A⁽ⁱ⁾`` (Van Loan 2000), e.g. K_UU = ⊗ᵢ K_UU⁽ⁱ⁾ and
  Q = ⊗ᵢ Q⁽ⁱ⁾ on a Cartesian grid of inducing points;
* row-partitioned Khatri-Rao product ``∗ᵢ A⁽ⁱ⁾`` (eq. 9-14): row r is
  A⁽¹⁾(r,:) ⊗ … ⊗ A⁽ᵈ⁾(r,:), e.g. K_XU (n x m̄ᵈ);
* column-partitioned Khatri-Rao product: column j is A⁽¹⁾(:,j) ⊗ … ⊗ A⁽ᵈ⁾(:,j),
  e.g. S_pᵀ (m̄ᵈ x p).

Flat indices into a Kronecker product are row-major (the last factor varies fastest),
as :func:`torch.kron`. Everything here costs O(d) small products; the helpers that
return an m-vector (m = Π m̄ᵢ) are for moderate m only, while
:func:`kron_top_p` and :func:`kr_kron_select` work for any m (10¹⁰⁰ included).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.autograd.function import once_differentiable

__all__ = [
    "kron_matmul", "khatri_rao_rows_matmul", "khatri_rao_cols_matmul",
    "khatri_rao_cols_rmatmul", "kron_top_p", "kr_kron_select", "kr_kron_select_direct",
]


def _as_2d(V: torch.Tensor) -> tuple[torch.Tensor, bool]:
    return (V[:, None], True) if V.ndim == 1 else (V, False)


def kron_matmul(factors: Sequence[torch.Tensor], V: torch.Tensor) -> torch.Tensor:
    """(⊗ᵢ Aᵢ) V without forming the Kronecker product: Aᵢ (rᵢ x cᵢ), V (Π cᵢ, k) or
    (Π cᵢ,). Each factor is applied along its own axis of V reshaped to (c₁,…,c_d, k):
    O(Σᵢ rᵢ·Π cⱼ·k) time instead of O(Π rᵢ cᵢ k)."""
    V, vec = _as_2d(V)
    cols = [A.shape[1] for A in factors]
    T = V.reshape(*cols, V.shape[1])
    for axis, A in enumerate(factors):
        T = torch.tensordot(A, T, dims=([1], [axis]))  # new axis 0
        T = torch.movedim(T, 0, axis)
    out = T.reshape(-1, V.shape[1])
    return out[:, 0] if vec else out


def khatri_rao_rows_matmul(factors: Sequence[torch.Tensor], V: torch.Tensor) -> torch.Tensor:
    """(∗ᵢ Aᵢ) V for the row-partitioned Khatri-Rao product of Aᵢ (n x m̄ᵢ) (eq. 9):
    row r of the product is ⊗ᵢ Aᵢ(r,:). V: (Π m̄ᵢ, k) or (Π m̄ᵢ,). The factors are
    contracted one at a time, row by row, so at most an n x (Π_{j>i} m̄ⱼ) x k
    intermediate exists and the n x Π m̄ᵢ product never does."""
    V, vec = _as_2d(V)
    n, k = factors[0].shape[0], V.shape[1]
    rest = V.shape[0] // factors[0].shape[1]
    T = (factors[0] @ V.reshape(factors[0].shape[1], rest * k)).reshape(n, rest, k)
    for A in factors[1:]:
        rest //= A.shape[1]
        T = torch.einsum("nj,njrk->nrk", A, T.reshape(n, A.shape[1], rest, k))
    out = T.reshape(n, k)
    return out[:, 0] if vec else out


def khatri_rao_cols_matmul(factors: Sequence[torch.Tensor], V: torch.Tensor) -> torch.Tensor:
    """(∗ᵢ Bᵢ) V for the column-partitioned Khatri-Rao product of Bᵢ (m̄ᵢ x p): column
    j is ⊗ᵢ Bᵢ(:,j). V: (p, k) or (p,). Returns the (Π m̄ᵢ, k) result (an m-vector per
    column of V, so only for moderate m), built as Σⱼ V(j,:) ⊗ᵢ Bᵢ(:,j) one factor at
    a time: O(p·Π m̄ᵢ·k)."""
    V, vec = _as_2d(V)
    T = V.mT[:, :, None] * factors[0].mT[None]  # (k, p, m̄₁)
    for B in factors[1:]:
        T = (T[..., None] * B.mT[None, :, None, :]).flatten(-2)
    out = T.sum(1).mT
    return out[:, 0] if vec else out


def khatri_rao_cols_rmatmul(factors: Sequence[torch.Tensor], U: torch.Tensor) -> torch.Tensor:
    """(∗ᵢ Bᵢ)ᵀ U for the column-partitioned Khatri-Rao product of Bᵢ (m̄ᵢ x p) and
    U (Π m̄ᵢ, k) or (Π m̄ᵢ,): entry (j, ·) is (⊗ᵢ Bᵢ(:,j))ᵀ U, contracted one axis at a
    time (the transpose of a column- is a row-partitioned product, cf. S_p in §4)."""
    U, vec = _as_2d(U)
    k = U.shape[1]
    rest = U.shape[0] // factors[0].shape[0]
    T = factors[0].mT @ U.reshape(factors[0].shape[0], rest * k)  # (p, rest·k)
    p = T.shape[0]
    T = T.reshape(p, rest, k)
    for B in factors[1:]:
        rest //= B.shape[0]
        T = torch.einsum("jb,jbrk->jrk", B.mT, T.reshape(p, B.shape[0], rest, k))
    out = T.reshape(p, k)
    return out[:, 0] if vec else out


def kron_top_p(
    log_values: Sequence[torch.Tensor], p: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The p largest entries of the Kronecker product ⊗ᵢ λ⁽ⁱ⁾ of positive vectors,
    given log λ⁽ⁱ⁾ (Algorithm 1, in log space so that m = Π m̄ᵢ may be 10¹⁰⁰).

    After each factor only the p largest partial products are kept; this is exact:
    an entry whose prefix is not among the p largest prefixes is dominated by p
    entries sharing its suffix. Entries equal to −inf (excluded eigenvalues) are
    never returned. Returns ``(log_top, idx)``: log_top (p',) in descending order and
    idx (p', d) long, the per-dimension indices (row i of S_p⁽ʲ⁾ selects idx[i, j]),
    with p' = min(p, number of finite entries). O(d·m̄·p log(m̄ p)) time.
    """
    if p < 1:
        raise ValueError(f"p must be a positive number of eigenvalues, got {p}")
    if len(log_values) == 0:
        raise ValueError("log_values must hold at least one factor")
    lv = [torch.as_tensor(v).reshape(-1) for v in log_values]
    top, order = torch.sort(lv[0], descending=True, stable=True)
    top = top[:p]
    digits, parents = [order[:p]], []
    for v in lv[1:]:
        mbar = v.shape[0]
        cand = (top[:, None] + v[None, :]).reshape(-1)  # log λ_p ⊗ 1 + 1 ⊗ log λ⁽ⁱ⁾
        top, ord_ = torch.sort(cand, descending=True, stable=True)
        top, ord_ = top[:p], ord_[:p]
        parents.append(torch.div(ord_, mbar, rounding_mode="floor"))
        digits.append(ord_ % mbar)
    # idxs = [idxs(⌊ord/m̄⌋, :), mod(ord, m̄)], unrolled by back-tracking: O(d·p)
    keep = torch.nonzero(torch.isfinite(top)).reshape(-1)
    cols, cur = [], keep
    for level in range(len(lv) - 1, -1, -1):
        cols.append(digits[level][cur])
        if level > 0:
            cur = parents[level - 1][cur]
    return top[keep], torch.stack(cols[::-1], dim=1)


def kr_kron_select_direct(
    K_factors: Sequence[torch.Tensor], Q_factors: Sequence[torch.Tensor], idx: torch.Tensor
) -> torch.Tensor:
    """K_XU Q S_pᵀ = ⊙ᵢ K⁽ⁱ⁾ Q⁽ⁱ⁾ S_p⁽ⁱ⁾ᵀ (Theorem 2, eq. 15) as a plain Hadamard
    product: Kᵢ (n x m̄ᵢ), Qᵢ (m̄ᵢ x m̄ᵢ), idx (p, d). Overflows/underflows for large
    d; see :func:`kr_kron_select` for the stable form."""
    out = None
    for i, (K, Q) in enumerate(zip(K_factors, Q_factors)):
        B = K @ Q[:, idx[:, i]]
        out = B if out is None else out * B
    return out


def _selected_t(K: torch.Tensor, Q: torch.Tensor, col: torch.Tensor):
    """Bᵢᵀ = (Kᵢ Qᵢ S_p⁽ⁱ⁾ᵀ)ᵀ touching only the c distinct selected columns: returns the
    compressed (c x n) transpose and the (p,) map from output column to compressed row
    (rows gather contiguously, so the n x p work is row copies)."""
    uniq, inv = torch.unique(col, return_inverse=True)
    return Q[:, uniq].mT @ K.mT, inv


class _LogHadamard(torch.autograd.Function):
    """Φᵀ = sign(Π Bᵢ) exp(Σ log|Bᵢ| + s) (p x n) from compressed Bᵢᵀ (cᵢ x n).

    log| | and sign are taken on the compressed matrices and gathered (float log,
    int8 sign). Backward: ∂Φ_pn/∂Bᵢ = Φ_pn / Bᵢ, and all p columns that share a
    compressed column of Bᵢ share that divisor, so the gradient is
    Bᵢ⁻¹ ⊙ (S⁽ⁱ⁾ᵀ (G ⊙ Φ)) — an O(p·n) row sum per dimension, no n x p temporary
    per dimension (exact unless an entry of Φ underflows below the smallest double
    while its Bᵢ does not).

    Exact zeros in some Bᵢ (the paper: "when the sign of an element is zero, we do not
    compute the log"): the logs are then summed over the non-zero factors only, giving
    the cofactor C = Π_{nonzero} Bⱼ e^s and the count of zero factors per entry; Φ is
    C where the count is 0 and 0 elsewhere. Where exactly one factor Bᵢ is 0,
    ∂Φ/∂Bᵢ = C (the fast path's Φ/Bᵢ would be 0/0); with two or more zeros every
    factor's gradient is 0, which the fast path gives already.
    """

    @staticmethod
    def forward(ctx, log_scale, maps, *Bts):  # noqa: D102
        zero_masks = [Bt == 0 for Bt in Bts]
        has_zeros = any(bool(z.any()) for z in zero_masks)
        logsum = sign = count = None
        for Bt, z, inv in zip(Bts, zero_masks, maps):
            if has_zeros:
                la = torch.log(torch.where(z, 1.0, Bt.abs()))[inv]
                sg = torch.where(z, 1, torch.sign(Bt).to(torch.int8))[inv]
                zi = z.to(torch.int16)[inv]  # int16: up to 32767 dimensions
                count = zi if count is None else count.add_(zi)
            else:
                la, sg = torch.log(Bt.abs())[inv], torch.sign(Bt).to(torch.int8)[inv]
            logsum = la if logsum is None else logsum.add_(la)
            sign = sg if sign is None else sign.mul_(sg)
        cof = logsum.add_(log_scale[:, None]).exp_().mul_(sign)
        out = torch.where(count == 0, cof, 0.0) if has_zeros else cof
        ctx.maps = maps
        ctx.save_for_backward(log_scale, out, *Bts)
        ctx.cofactor = (cof, count) if has_zeros else None
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, G):  # noqa: D102
        log_scale, out, *Bts = ctx.saved_tensors
        maps = ctx.maps
        GO = G * out
        g_scale = GO.sum(1) if ctx.needs_input_grad[0] else None
        H = None  # G ⊙ cofactor where an entry has exactly one zero factor
        if ctx.cofactor is not None:
            cof, count = ctx.cofactor
            H = torch.where(count == 1, G * cof, 0.0)
        grads = []
        for Bt, inv, need in zip(Bts, maps, ctx.needs_input_grad[2:]):
            if not need:
                grads.append(None)
                continue
            z = Bt == 0
            grad = _gather_rows(GO, inv, Bt.shape[0]) / torch.where(z, 1.0, Bt)
            if H is not None and bool(z.any()):
                grad = torch.where(z, _gather_rows(H, inv, Bt.shape[0]), grad)
            grads.append(grad)
        ctx.cofactor = None
        return (g_scale, None, *grads)


def _gather_rows(M: torch.Tensor, inv: torch.Tensor, c: int) -> torch.Tensor:
    """S⁽ⁱ⁾ᵀ M for the (p, c) 0/1 map S⁽ⁱ⁾ of ``inv``: row k is the sum of the rows
    of M (p x n) that gathered compressed row k. O(p·n)."""
    return M.new_zeros(c, M.shape[1]).index_add_(0, inv, M)


def kr_kron_select(
    K_factors: Sequence[torch.Tensor],
    Q_factors: Sequence[torch.Tensor],
    idx: torch.Tensor,
    log_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Theorem 2 in the stable log form after eq. 15:

        K_XU Q S_pᵀ diag(e^s) = (⊙ᵢ sign Bᵢ) ⊙ exp(Σᵢ log|Bᵢ| + 1ₙ sᵀ),
        Bᵢ = K⁽ⁱ⁾ Q⁽ⁱ⁾ S_p⁽ⁱ⁾ᵀ,

    with K⁽ⁱ⁾ (n x m̄ᵢ) the 1-D cross-covariances (rows of the row-partitioned
    Khatri-Rao K_XU), Q⁽ⁱ⁾ (m̄ᵢ x m̄ᵢ) the factors of Q = ⊗ᵢ Q⁽ⁱ⁾, idx (p, d) the
    selection (S_p = ∗ᵢ S_p⁽ⁱ⁾, e.g. from :func:`kron_top_p`) and ``log_scale`` s (p,)
    an optional log column scaling applied inside the exponential (s = −½ log λ_p
    gives Φ of eq. 4 without overflow). Only the distinct selected columns of each
    K⁽ⁱ⁾Q⁽ⁱ⁾ are formed: O(d·n·max(p, m̄c)) time. Differentiable in K⁽ⁱ⁾, Q⁽ⁱ⁾ and s,
    with a backward pass that keeps O(n·p) memory for any d.
    """
    d = len(K_factors)
    if len(Q_factors) != d or idx.ndim != 2 or idx.shape[1] != d:
        raise ValueError(f"need d = {d} K and Q factors and idx of shape (p, {d}); got "
                         f"{len(Q_factors)} Q factors and idx {tuple(idx.shape)}")
    Bts, maps = [], []
    for i, (K, Q) in enumerate(zip(K_factors, Q_factors)):
        Bt, inv = _selected_t(K, Q, idx[:, i])
        Bts.append(Bt)
        maps.append(inv)
    if log_scale is None:
        log_scale = Bts[0].new_zeros(idx.shape[0])
    return _LogHadamard.apply(log_scale, maps, *Bts).mT
