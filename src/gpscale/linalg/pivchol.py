"""Partial Cholesky of K restricted to a pivot set, its augmented QR, and O(mn)
factor up/down-dates (Cao, Brubaker, Fleet & Hertzmann 2013, §3.1–3.2).

For an ordered pivot set I = (i_1, …, i_k) the partial Cholesky factor L ∈ R^{n×k}
(eq. 6) satisfies L Lᵀ = K[:, I] K[I, I]⁻¹ K[I, :] (the Nyström approximation K̂,
eq. 3) and is lower trapezoidal up to a row permutation: column p is zero in the rows
of the earlier pivots i_1 … i_{p−1}. Only the kernel columns K[:, i] of the pivots
(and diag K) are ever evaluated; K itself is never formed.

The augmented factor L̃ = [L; σ I_k] ((n+k)×k; row n+p carries σ in column p) has the
thin QR factorisation L̃ = Q R (Q (n+k)×k with orthonormal columns, R k×k upper
triangular with a positive diagonal), from which the sparse-GP objectives follow
(eqs. 11–12). :class:`CholQRFactors` keeps L, Q, R (stored transposed, so that the
column operations touch contiguous rows) and updates them in O(kn):

- :meth:`CholQRFactors.remove` moves a pivot to the last position by adjacent pivot
  transpositions, each a 2×2 orthogonal transform of two columns of L (the pivot
  permutation of Bach & Jordan 2005, appendix), of the matching two augmented rows of
  Q (so that the σI block stays σI), and a Givens rotation that restores R's
  triangularity; then it drops the last column (§3.2, downdate);
- :meth:`CholQRFactors.add` appends the new Cholesky column of eq. (13) and one
  Gram–Schmidt step for the new column of Q (with one re-orthogonalisation).
"""

from __future__ import annotations

import torch

from .cholesky import robust_cholesky


def check_pivots(pivots, n: int, name: str = "pivots", allow_empty: bool = False) -> list[int]:
    idx = torch.as_tensor(pivots).reshape(-1) if not isinstance(pivots, list) else None
    if idx is not None and (idx.is_floating_point() or idx.is_complex()):
        raise ValueError(f"{name} must hold integer indices, got dtype {idx.dtype}")
    out = [int(i) for i in (idx.tolist() if idx is not None else pivots)]
    if not out and not allow_empty:
        raise ValueError(f"{name} is empty; give at least one index (m >= 1)")
    bad = [i for i in out if i < 0 or i >= n]
    if bad:
        raise ValueError(f"{name} holds indices outside [0, {n}): {bad[:5]}")
    if len(set(out)) != len(out):
        dup = sorted({i for i in out if out.count(i) > 1})
        raise ValueError(f"{name} holds duplicate indices {dup[:5]}; each point may be "
                         "chosen once")
    return out


def partial_cholesky(kernel, X: torch.Tensor, pivots) -> torch.Tensor:
    """Partial Cholesky factor L (n × m) of K = k(X, X) with pivots in the given order
    (eq. 6): L = K[:, I] L_I⁻ᵀ with L_I the Cholesky factor of K[I, I], i.e. the first
    m columns of the Cholesky factorisation that takes I as its first pivots. Only the
    m kernel columns K[:, I] are evaluated."""
    piv = check_pivots(pivots, X.shape[0])
    idx = torch.tensor(piv, device=X.device)
    K_nI = kernel(X, X[idx])
    L_I = robust_cholesky(K_nI[idx])
    return torch.linalg.solve_triangular(L_I, K_nI.mT, upper=False).mT


def augmented_qr(L: torch.Tensor, sigma: torch.Tensor | float) -> tuple[torch.Tensor,
                                                                        torch.Tensor]:
    """Thin QR of L̃ = [L; σ I_m] (§3.1): Q ((n+m) × m, orthonormal columns) and R
    (m × m, upper triangular, positive diagonal) with L̃ = Q R."""
    m = L.shape[1]
    eye = torch.eye(m, dtype=L.dtype, device=L.device)
    Q, R = torch.linalg.qr(torch.cat([L, sigma * eye], 0), mode="reduced")
    s = torch.where(torch.diagonal(R) < 0, -1.0, 1.0).to(R.dtype)
    return Q * s, R * s[:, None]


class CholQRFactors:
    """L, Q, R of the augmented partial Cholesky for the pivot set ``pivots`` (§3.1),
    with room for ``capacity`` pivots, plus Qᵀỹ (ỹ = [y; 0]) and the residual diagonal
    diag(K − L Lᵀ). Hyperparameters are fixed: build a new object when they change.

    Attributes: ``k`` (current rank), ``pivots`` (list, in factor order), ``L``
    (n × k view), ``Q`` ((n+k) × k view), ``R`` (k × k view), ``qy`` (Qᵀỹ, k),
    ``resid_diag`` (n), ``sigma`` (σ, a 0-d tensor).
    """

    def __init__(self, kernel, X: torch.Tensor, y: torch.Tensor, pivots, noise,
                 capacity: int | None = None) -> None:
        n = X.shape[0]
        piv = check_pivots(pivots, n, allow_empty=True)
        cap = max(len(piv), int(capacity) if capacity is not None else len(piv), 1)
        self.kernel, self.X, self.y, self.n, self.capacity = kernel, X, y, n, cap
        dt, dev = X.dtype, X.device
        with torch.no_grad():
            self.sigma = torch.as_tensor(noise, dtype=dt, device=dev).detach().sqrt()
            self.kdiag = kernel.diag(X).detach()
            L = (partial_cholesky(kernel, X, piv).detach() if piv
                 else X.new_zeros(n, 0))
            Q, R = augmented_qr(L, self.sigma)
        k = len(piv)
        self._Lt = torch.zeros(cap, n, dtype=dt, device=dev)
        self._Qt = torch.zeros(cap, n + cap, dtype=dt, device=dev)
        self._R = torch.zeros(cap, cap, dtype=dt, device=dev)
        self._qy = torch.zeros(cap, dtype=dt, device=dev)
        self._Lt[:k] = L.mT
        self._Qt[:k, : n + k] = Q.mT
        self._R[:k, :k] = R
        self._qy[:k] = Q[:n].mT @ y
        self.resid_diag = self.kdiag - (L * L).sum(1)
        self.pivots = piv
        self.k = k
        #: bumped by every change of the factors (add, remove, pivot permutation), so
        #: that caches built on them (the information pivots') can tell they are stale
        self.version = 0
        #: after :meth:`remove`: Q[:n, :k]ᵀ ℓ of the removed column ℓ (= R's last column
        #: before the drop, since Q's augmented row n+k vanishes on the kept columns)
        self.removed_r = None

    # -- views ------------------------------------------------------------------------
    @property
    def L(self) -> torch.Tensor:
        return self._Lt[: self.k].mT

    @property
    def Q(self) -> torch.Tensor:
        return self._Qt[: self.k, : self.n + self.k].mT

    @property
    def R(self) -> torch.Tensor:
        return self._R[: self.k, : self.k]

    @property
    def qy(self) -> torch.Tensor:
        return self._qy[: self.k]

    def log_det_R(self) -> torch.Tensor:
        """log |R| = Σ log R_pp (R has a positive diagonal)."""
        return torch.log(torch.diagonal(self.R)).sum()

    def trace_residual(self) -> torch.Tensor:
        """tr(K − L Lᵀ) = tr K − ‖L‖²_F (the bracket of eq. 9): the sum of the residual
        diagonal, kept up to date by every add / remove (O(n))."""
        return self.resid_diag.sum()

    def kernel_column(self, j: int) -> torch.Tensor:
        with torch.no_grad():
            return self.kernel(self.X, self.X[j : j + 1])[:, 0]

    def residual_column(self, j: int, kcol: torch.Tensor | None = None) -> torch.Tensor:
        """(K − L Lᵀ)[:, j] in O(kn) from the single kernel column K[:, j]."""
        kcol = self.kernel_column(j) if kcol is None else kcol
        return kcol - self._Lt[: self.k].mT @ self._Lt[: self.k, j]

    def new_column(self, j: int, kcol: torch.Tensor | None = None,
                   rtol: float = 1e-12) -> torch.Tensor | None:
        """ℓ = (K − K̂)[:, j] / √(K − K̂)[j, j] (eq. 13), with exact zeros in the rows of
        the current pivots; None when the residual (K − K̂)[j, j] is at most
        ``rtol`` · K[j, j] (j is numerically in the span of the pivots)."""
        c = self.residual_column(j, kcol)
        d = c[j]
        if not bool(d > rtol * self.kdiag[j].clamp_min(1e-300)):
            return None
        ell = c / d.sqrt()
        if self.k:
            ell[torch.tensor(self.pivots, device=ell.device)] = 0.0
        return ell

    def gram_schmidt(self, ell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                       torch.Tensor]:
        """For ℓ̃ = [ℓ; 0; σ] (σ in the new augmented row n+k): r = Qᵀℓ̃, the residual
        w = (I − QQᵀ)ℓ̃ (length n+k+1) and ‖w‖, with one re-orthogonalisation."""
        k, n = self.k, self.n
        Qt = self._Qt[:k, : n + k + 1]  # row n+k of Q is zero: ℓ̃'s σ entry is orthogonal
        w = torch.zeros(n + k + 1, dtype=ell.dtype, device=ell.device)
        w[:n] = ell
        w[n + k] = self.sigma
        r = Qt @ w
        w = w - Qt.mT @ r
        r2 = Qt @ w
        w = w - Qt.mT @ r2
        return r + r2, w, torch.linalg.vector_norm(w)

    # -- updates ----------------------------------------------------------------------
    def add(self, j: int, ell: torch.Tensor | None = None) -> None:
        """Append pivot j (eq. 13): L̃ ← [L̃ ℓ̃], Q ← [Q q], R ← [[R, r], [0, ‖w‖]]
        with q = w / ‖w‖ by Gram–Schmidt (§3.2). O(kn)."""
        if j in self.pivots:
            raise ValueError(f"index {j} is already a pivot")
        if not 0 <= j < self.n:
            raise ValueError(f"index {j} is outside [0, {self.n})")
        if self.k >= self.capacity:
            raise ValueError(f"the factors are full (capacity {self.capacity})")
        ell = self.new_column(j) if ell is None else ell
        if ell is None:
            raise ValueError(f"point {j} is numerically in the span of the pivots "
                             "(residual variance ~ 0): it cannot be added")
        k, n = self.k, self.n
        r, w, rho = self.gram_schmidt(ell)
        self._Lt[k] = ell
        self._Qt[k, : n + k + 1] = w / rho
        self._R[:k, k] = r
        self._R[k, k] = rho
        self._qy[k] = self._Qt[k, :n] @ self.y
        self.resid_diag = self.resid_diag - ell * ell
        self.pivots.append(int(j))
        self.k = k + 1
        self.version += 1

    def swap_adjacent(self, p: int) -> None:
        """Exchange pivots p and p+1 keeping L lower trapezoidal, σI in place and R
        upper triangular (Bach & Jordan 2005, appendix, for the augmented L̃). O(n+k)."""
        k, n = self.k, self.n
        b = self.pivots[p + 1]
        Lt, Qt, R = self._Lt, self._Qt, self._R
        # L ← L G on columns p, p+1, G = [[c, s], [s, −c]]: the new column p is the
        # Cholesky column of pivot b, the new column p+1 vanishes in row b.
        c, s = Lt[p, b], Lt[p + 1, b]
        h = torch.hypot(c, s)
        c, s = c / h, s / h
        G = torch.stack([torch.stack([c, s]), torch.stack([s, -c])])
        Lt[p : p + 2] = G @ Lt[p : p + 2]
        Lt[p + 1, b] = 0.0
        # L̃ ← diag(I, G) L̃ G keeps σI; so Q ← diag(I, G) Q and R ← R G.
        Qt[:k, n + p : n + p + 2] = Qt[:k, n + p : n + p + 2] @ G
        R[: p + 2, p : p + 2] = R[: p + 2, p : p + 2] @ G
        # Givens J on rows p, p+1 of R zeroes R[p+1, p]; Q ← Q Jᵀ, Qᵀỹ ← J Qᵀỹ.
        a, e = R[p, p], R[p + 1, p]
        h = torch.hypot(a, e)
        J0, J1 = torch.stack([a / h, e / h]), torch.stack([-e / h, a / h])
        J1 = torch.where(J1 @ R[p : p + 2, p + 1] < 0, -J1, J1)  # keep R[p+1, p+1] > 0
        J = torch.stack([J0, J1])
        R[p : p + 2, p:k] = J @ R[p : p + 2, p:k]
        R[p + 1, p] = 0.0
        Qt[p : p + 2, : n + k] = J @ Qt[p : p + 2, : n + k]
        self._qy[p : p + 2] = J @ self._qy[p : p + 2]
        self.pivots[p], self.pivots[p + 1] = self.pivots[p + 1], self.pivots[p]
        self.version += 1

    def move_to_last(self, p: int, riders=()) -> None:
        """Permute pivot p to the last position: the k − 1 − p adjacent transpositions
        of :meth:`swap_adjacent`, with their rotations found on the small blocks first
        and applied to L and Q in one sweep (:func:`gpscale.linalg.qr_update.move_to_last`).
        O((k − p)(n + k)). ``riders`` (rows = Qᵀ X) are rotated with Qᵀ."""
        from .qr_update import move_to_last

        move_to_last(self, p, riders)
        self.version += 1

    def remove(self, p: int, riders=()) -> tuple[int, torch.Tensor]:
        """Downdate (§3.2): remove the pivot at position ``p``; returns its index and
        its last Cholesky column ℓ (so that it can be re-added as is). O(kn).
        ``riders``: tensors with rows Qᵀ X, rotated with Q and their row k−1 zeroed, so
        that they hold Q[:, :k−1]ᵀ X afterwards; :attr:`removed_r` then holds
        Q[:n, :k−1]ᵀ ℓ."""
        if not 0 <= p < self.k:
            raise ValueError(f"position {p} is outside [0, {self.k})")
        self.move_to_last(p, riders)
        k, n = self.k - 1, self.n
        ell = self._Lt[k].clone()
        self.removed_r = self._R[:k, k].clone()
        for rows in riders:
            rows[k] = 0.0
        self.resid_diag = self.resid_diag + ell * ell
        self._Lt[k] = 0.0
        self._Qt[k] = 0.0
        self._Qt[:k, n + k] = 0.0  # row n+k of L̃[:, :k] is zero, so is that of Q
        self._R[:, k] = 0.0
        self._R[k, :] = 0.0
        self._qy[k] = 0.0
        self.k = k
        self.version += 1
        return self.pivots.pop(), ell

    def keep_last(self) -> dict:
        """What :meth:`remove` of the last pivot zeroes (its index, its rows of L and Q,
        Q's column, R's column, its entry of Qᵀỹ, the residual diagonal), O(n + k), so
        that :meth:`restore_last` can put it back exactly."""
        k, n = self.k - 1, self.n
        return {"i": self.pivots[k], "L": self._Lt[k].clone(),
                "Qrow": self._Qt[k, : n + k + 1].clone(), "Qcol": self._Qt[:k, n + k].clone(),
                "R": self._R[: k + 1, k].clone(), "qy": self._qy[k].clone(),
                "resid": self.resid_diag}

    def restore_last(self, kept: dict) -> None:
        """Undo :meth:`remove` of the last pivot from what :meth:`keep_last` kept before
        it: the factors as they were, bit for bit, in O(n + k) (no Gram–Schmidt)."""
        k, n = self.k, self.n
        self._Lt[k] = kept["L"]
        self._Qt[k, : n + k + 1] = kept["Qrow"]
        self._Qt[:k, n + k] = kept["Qcol"]
        self._R[: k + 1, k] = kept["R"]
        self._qy[k] = kept["qy"]
        self.resid_diag = kept["resid"]
        self.pivots.append(kept["i"])
        self.k = k + 1
        self.version += 1

    def position(self, j: int) -> int:
        """Position of index j among the pivots (ValueError if it is not one)."""
        try:
            return self.pivots.index(int(j))
        except ValueError:
            raise ValueError(f"index {j} is not a pivot") from None

