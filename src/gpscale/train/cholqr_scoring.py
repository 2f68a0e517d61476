"""CholQR candidate scoring (Cao, Brubaker, Fleet & Hertzmann 2013, §3.1, §3.3).

- :func:`factor_objective`: F (or the DTC E) from the factors, eqs. (9), (11), (12);
- :func:`exact_gain`: the exact decrease ΔF = F(I) − F(I ∪ {j}) of adding one
  candidate j to the (down-dated) set I, eqs. (14)–(16), O(kn);
- :class:`InfoPivots`: z "information pivots" whose partial Cholesky factor L_z of
  the residual K − K̂ ranks all n − k candidates approximately (§3.3.1), from a cache
  that each swap updates in O(zn + zk) (footnote 2) and the scores in O(z²n); the
  pivots are drawn at random and can be redrawn at any time (§3.3.2), or (Fig. 3(c)/(f)'s
  variants) chosen greedily as the pivots of a pivoted Cholesky of the residual
  ("OI", :func:`greedy_residual_pivots`), or grown by :meth:`InfoPivots.grow` ("AA").

All functions work on a :class:`~gpscale.linalg.pivchol.CholQRFactors` (fixed
hyperparameters) and never form an n × n matrix.
"""

from __future__ import annotations

import math

import torch

from ..linalg.pivchol import CholQRFactors
from ..params import LOG_2PI

#: a candidate whose residual variance (K − K̂)[j, j] is below this fraction of K[j, j]
#: is treated as lying in the span of the inducing set (its ℓ_j would be ill-determined)
MIN_RESIDUAL = 1e-8

#: how the information pivots are chosen: at random (§3.3.2, the paper's CholQR-z16),
#: optimised as in CSI ("oi", §4.1), or random and adaptively grown ("aa", §4.1; the rule
#: is ours, :class:`gpscale.train.cholqr._Swapper`)
INFO_PIVOTS = ("random", "oi", "aa")


def factor_objective(f: CholQRFactors, objective: str = "vfe") -> float:
    """½(E_D + E_C [+ E_V]) + (n/2) log 2π for the factors' pivot set, with
    E_D = σ⁻²(‖y‖² − ‖Qᵀỹ‖²) (eq. 11), E_C = (n − k) log σ² + 2 log|R| (eq. 12),
    E_V = σ⁻² tr(K − LLᵀ) (eq. 9); the same value as :meth:`SparseGP.objective`."""
    s2 = f.sigma**2
    qy = f.qy
    E_D = (f.y @ f.y - qy @ qy) / s2
    E_C = (f.n - f.k) * torch.log(s2) + 2.0 * f.log_det_R()
    total = E_D + E_C
    if objective == "vfe":
        total = total + f.trace_residual() / s2
    return float(0.5 * total + 0.5 * f.n * LOG_2PI)


def gains_from_terms(ell2: torch.Tensor, yw: torch.Tensor, w2: torch.Tensor,
                     s2: torch.Tensor, objective: str) -> torch.Tensor:
    """ΔF = ½(ΔE_D + ΔE_C [+ ΔE_V]) from ‖ℓ‖², ỹᵀw and ‖w‖², w = (I − QQᵀ)ℓ̃:
    ΔE_D = σ⁻²(ỹᵀw)²/‖w‖² (14), ΔE_C = log σ² − log‖w‖² (15), ΔE_V = σ⁻²‖ℓ‖² (16)."""
    gain = yw * yw / (w2 * s2) + torch.log(s2) - torch.log(w2)
    if objective == "vfe":
        gain = gain + ell2 / s2
    return 0.5 * gain


def exact_gain(f: CholQRFactors, j: int, objective: str = "vfe",
               ell: torch.Tensor | None = None) -> tuple[float, torch.Tensor | None]:
    """Exact ΔF = F(I) − F(I ∪ {j}) (eqs. 14–16) for the factors' current set I, and the
    new Cholesky column ℓ_j of eq. (13) (None, with ΔF = −inf, when j is numerically in
    the span of I). One kernel column and one product with Q: O(kn).

    For ℓ̃ = [ℓ; 0; σ] the σ entry lies in a row where Q is zero, so r = Qᵀℓ̃ = Q[:n]ᵀℓ,
    ‖w‖² = ‖ℓ‖² + σ² − ‖r‖² ≥ σ² and ỹᵀw = yᵀℓ − (Qᵀỹ)ᵀr: the gain needs one pass
    over Q, not :meth:`CholQRFactors.gram_schmidt`'s four (q itself is only formed
    when the candidate is accepted, by ``f.add``)."""
    ell = f.new_column(j, rtol=MIN_RESIDUAL) if ell is None else ell
    if ell is None:
        return float("-inf"), None
    n = f.n
    s2 = f.sigma**2
    r = f.Q[:n].mT @ ell
    ell2 = ell @ ell
    w2 = (ell2 + s2 - r @ r).clamp_min(s2)
    yw = ell @ f.y - f.qy @ r
    gain = gains_from_terms(ell2, yw, w2, s2, objective)
    return float(gain), ell


def greedy_residual_pivots(f: CholQRFactors, count: int, rtol: float = MIN_RESIDUAL,
                           exclude=()) -> tuple[list[int], torch.Tensor]:
    """The first ``count`` pivots of a pivoted Cholesky of the residual K − K̂ (largest
    remaining residual diagonal first, as CSI's look-ahead chooses them, Bach & Jordan
    2005), among the points that are neither inducing nor in ``exclude``; stops early
    when no residual diagonal exceeds rtol · K[j, j]. Returns the pivots J and their
    residual columns (K − K̂)[:, J] (n × |J|). One kernel column a pivot:
    O(count · (kn + count · n))."""
    n = f.n
    d = f.resid_diag.clone()
    out = torch.zeros(n, 0, dtype=d.dtype, device=d.device)
    blocked = torch.zeros(n, dtype=torch.bool, device=d.device)
    blocked[list(set(f.pivots) | {int(j) for j in exclude})] = True
    floor = rtol * f.kdiag.clamp_min(1e-300)
    J: list[int] = []
    cols, G = [], []
    for _ in range(int(count)):
        score = torch.where(blocked | ~(d > floor), torch.full_like(d, -math.inf), d)
        j = int(torch.argmax(score))
        if not bool(torch.isfinite(score[j])):
            break
        c = f.residual_column(j)
        g = c - torch.stack(G, 1) @ torch.stack([h[j] for h in G]) if G else c
        g = g / g[j].clamp_min(1e-300).sqrt()
        d = d - g * g
        blocked[j] = True
        J.append(j)
        cols.append(c)
        G.append(g)
    return J, (torch.stack(cols, 1) if cols else out)


class InfoPivots:
    """z information pivots J (§3.3.1): L_z is the partial Cholesky factor of the
    residual K − K̂ with pivots J, so that (K − K̂) ≈ L_z L_zᵀ and the new column of a
    candidate j, ℓ_j = (K − K̂)[:, j] / √(K − K̂)[j, j], is approximated by
    L_z a_j / ‖a_j‖ with a_j = L_z[j, :]ᵀ.

    The scores are cached as the paper's footnote 2 asks: the residual columns
    R_z = (K − K̂)[:, J] (n × z) and P = Q[:n]ᵀ R_z (k × z) are kept, and a swap changes
    them by rank-one terms: removing a pivot with column ℓ adds ℓ ℓ[J]ᵀ to R_z, adding
    one subtracts it, and P follows with Q's rotations and the known Q[:n]ᵀ ℓ (a column
    of R). That is O(zn + zk) per up/down-date (:meth:`remove`, :meth:`add`) instead of
    the O(zkn) of rebuilding R_z and Q[:n]ᵀ L_z; the scores themselves then need only
    L_z = R_z T and Q[:n]ᵀ L_z = P T with the z × z transform T (:meth:`transform`),
    O(z²n) for all n candidates. Redrawing the pivots (:meth:`refresh`, §3.3.2) costs
    O(zkn), replacing one (:meth:`replace`) O(kn). Changes of the factors made
    without these methods are noticed (``CholQRFactors.version``) and the cache is
    rebuilt from scratch.

    ``select``: ``"random"`` (§3.3.2) and ``"aa"`` draw the pivots at random;
    ``"oi"`` takes the greedy residual pivots (:func:`greedy_residual_pivots`, O(zkn),
    the cost of a random redraw) at every :meth:`refresh`, and :meth:`replace` takes the
    point of largest residual diagonal left after the other pivots (O(z²n + zkn))."""

    def __init__(self, f: CholQRFactors, z: int, generator: torch.Generator,
                 rtol: float = MIN_RESIDUAL, select: str = "random") -> None:
        if select not in INFO_PIVOTS:
            raise ValueError(f"select must be one of {INFO_PIVOTS}, got {select!r}")
        self.z, self.gen, self.rtol, self.select = int(z), generator, rtol, select
        self._f, self._version, self._undo = None, -1, None
        self.refresh(f)

    def _draw(self, f: CholQRFactors, count: int, avoid: set[int]) -> list[int]:
        pool_mask = torch.ones(f.n, dtype=torch.bool)
        pool_mask[list(avoid | set(f.pivots))] = False
        pool = torch.nonzero(pool_mask)[:, 0]
        perm = torch.randperm(pool.numel(), generator=self.gen)[:count]
        return pool[perm].tolist()

    def _index(self, f: CholQRFactors) -> torch.Tensor:
        return torch.tensor(self.J, dtype=torch.long, device=f.X.device)

    def refresh(self, f: CholQRFactors) -> None:
        """Redraw all z pivots uniformly among the non-inducing points (§3.3.2); for
        ``select="oi"``, choose them greedily for the current inducing set."""
        if self.select == "oi":
            J, Rz = greedy_residual_pivots(f, self.z, self.rtol)
            self.J = J
            self._rebuild_from_residual(f, Rz)
            return
        self.set_pivots(f, self._draw(f, self.z, set()))

    def set_pivots(self, f: CholQRFactors, J: list[int]) -> None:
        """Use the pivots J and rebuild the cache from scratch: R_z = K[:, J] − L L[J]ᵀ
        and P = Q[:n]ᵀ R_z, O(zkn)."""
        self.J = [int(j) for j in J]
        with torch.no_grad():
            K_J = (f.kernel(f.X, f.X[self._index(f)]).detach() if self.J
                   else f.X.new_zeros(f.n, 0))
        self._rebuild(f, K_J)

    def _rebuild(self, f: CholQRFactors, K_J: torch.Tensor) -> None:
        idx = self._index(f)
        Lt = f.L.mT
        self._rebuild_from_residual(f, K_J - Lt.mT @ Lt[:, idx])

    def _rebuild_from_residual(self, f: CholQRFactors, Rz: torch.Tensor) -> None:
        k = f.k
        self.Rz = Rz
        self._P = f.X.new_zeros(f.capacity, len(self.J))
        self._P[:k] = f.Q[: f.n].mT @ self.Rz
        self._f, self._version = f, f.version

    def _sync(self, f: CholQRFactors) -> None:
        if self._f is not f or self._version != f.version:
            self.set_pivots(f, self.J)

    def replace(self, f: CholQRFactors, j: int) -> None:
        """Pivot j has entered the inducing set: draw a replacement for it (§3.3.1);
        its residual column and row of P cost O(kn)."""
        if j not in self.J:
            return
        self._sync(f)
        t = self.J.index(j)
        new = self._next_greedy(f) if self.select == "oi" else self._draw(f, 1, set(self.J))
        keep = [s for s in range(len(self.J)) if s != t]
        if not new:
            del self.J[t]
            self.Rz, self._P = self.Rz[:, keep], self._P[:, keep]
            return
        self.J[t] = new[0]
        self.Rz[:, t] = f.residual_column(new[0])
        self._P[: f.k, t] = f.Q[: f.n].mT @ self.Rz[:, t]

    def _next_greedy(self, f: CholQRFactors) -> list[int]:
        """The point of largest residual diagonal once the current pivots' L_z is taken
        out, diag(K − K̂ − L_z L_zᵀ), among the non-inducing non-pivots ([] when none is
        above rtol · K[j, j]): the next pivot of the greedy residual Cholesky. O(z²n)."""
        A = self.residual_factor(f)
        d = f.resid_diag - (A * A).sum(1)
        ok = d > self.rtol * f.kdiag.clamp_min(1e-300)
        ok[torch.tensor(self.J + f.pivots, dtype=torch.long, device=ok.device)] = False
        if not bool(ok.any()):
            return []
        return [int(torch.argmax(torch.where(ok, d, torch.full_like(d, -math.inf))))]

    def grow(self, f: CholQRFactors, count: int) -> list[int]:
        """Add ``count`` pivots drawn at random among the non-inducing non-pivots (fewer
        when fewer are left): their residual columns and rows of P from one n × count
        kernel block, O(count · kn); z grows with them. Returns the pivots added."""
        self._sync(f)
        new = self._draw(f, int(count), set(self.J))
        if not new:
            return []
        with torch.no_grad():
            K_new = f.kernel(f.X, f.X[torch.tensor(new, device=f.X.device)]).detach()
        Lt = f.L.mT
        R_new = K_new - Lt.mT @ Lt[:, torch.tensor(new, device=f.X.device)]
        P_new = f.X.new_zeros(f.capacity, len(new))
        P_new[: f.k] = f.Q[: f.n].mT @ R_new
        self.J = self.J + new
        self.Rz = torch.cat([self.Rz, R_new], 1)
        self._P = torch.cat([self._P, P_new], 1)
        self.z = len(self.J)
        return new

    # -- the factors' up/down-dates, with the cache following in O(zn + zk) -------------
    def remove(self, f: CholQRFactors, p: int) -> tuple[int, torch.Tensor]:
        """``f.remove(p)`` (§3.2 downdate) with R_z ← R_z + ℓℓ[J]ᵀ and P rotated with Q,
        its last row dropped and Q[:n]ᵀℓ ℓ[J]ᵀ added. What the drop zeroes (the last
        row and column of the permuted factors, O(n + k)) is kept, so that
        :meth:`undo_remove` can put the pivot back exactly."""
        synced = self._f is f and self._version == f.version
        riders = [self._P] if synced else ()
        f.move_to_last(p, riders)
        self._undo = {"kept": f.keep_last(), "synced": synced,
                      "P": self._P.clone() if synced else None, "Rz": self.Rz}
        i, ell = f.remove(f.k - 1, riders)  # no rotations left: the pivot is last
        self._undo["version"] = f.version
        if synced:
            lJ = ell[self._index(f)]
            self.Rz = self.Rz + torch.outer(ell, lJ)  # a new tensor: the old one is kept
            self._P[: f.k].addr_(f.removed_r, lJ)
            self._version = f.version
        return i, ell

    def undo_remove(self, f: CholQRFactors) -> None:
        """Put back the pivot that :meth:`remove` just took out, at the last position:
        the factors (and the cache) as they were after its permutation to the end,
        bit for bit, in O(n + k) instead of re-adding it by Gram–Schmidt (O(kn))."""
        u, self._undo = self._undo, None
        if u is None or f.version != u["version"]:
            raise RuntimeError("undo_remove must follow remove, with no change between")
        f.restore_last(u["kept"])
        if u["synced"] and self._f is f and self._version == u["version"]:
            self._P, self.Rz = u["P"], u["Rz"]
            self._version = f.version

    def add(self, f: CholQRFactors, j: int, ell: torch.Tensor | None = None) -> None:
        """``f.add(j, ell)`` (§3.2 update) with R_z ← R_z − ℓℓ[J]ᵀ, P's rows minus
        (Q[:n]ᵀℓ) ℓ[J]ᵀ and a new row qᵀ R_z for the new column q of Q."""
        synced = self._f is f and self._version == f.version
        f.add(j, ell)
        if synced:
            k = f.k - 1
            ell = f.L[:, k]
            lJ = ell[self._index(f)]
            self.Rz.addr_(ell, lJ, alpha=-1.0)
            self._P[:k].addr_(f.R[:k, k], lJ, alpha=-1.0)
            self._P[k] = f.Q[: f.n, k] @ self.Rz
            self._version = f.version

    # -- scores ---------------------------------------------------------------------------
    def transform(self, f: CholQRFactors) -> torch.Tensor:
        """T (z × z) with L_z = R_z T: T = C⁻ᵀ for C = chol(R_z[J]) when every pivot
        clears the threshold rtol · K[j, j] after the ones before it (C's squared
        diagonal holds those residuals). A pivot below it from the start (a point in the
        span of the inducing set, e.g. the duplicate of one) gets a zero column at once,
        since residuals only shrink; otherwise the columns one by one, O(z³)."""
        self._sync(f)
        z = len(self.J)
        idx = self._index(f)
        B = self.Rz[idx]
        T = B.new_zeros(z, z)
        if not z:
            return T
        floor = self.rtol * f.kdiag[idx].clamp_min(1e-300)
        live = torch.nonzero(torch.diagonal(B) > floor).flatten()
        C, info = torch.linalg.cholesky_ex(B[live][:, live])
        if int(info) == 0 and bool((torch.diagonal(C) ** 2 > floor[live]).all()):
            eye = torch.eye(live.numel(), dtype=B.dtype, device=B.device)
            T[live[:, None], live[None, :]] = torch.linalg.solve_triangular(
                C, eye, upper=False).mT
            return T
        return self._transform_by_columns(B, floor)

    @staticmethod
    def _transform_by_columns(B: torch.Tensor, floor: torch.Tensor) -> torch.Tensor:
        """Column t of L_z is (R_z[:, t] − L_z[:, :t] L_z[j_t, :t]ᵀ)/√d_t, d_t the
        residual left at j_t, or zero when d_t is below the floor; so
        T[:, t] = (e_t − T[:, :t] L_z[j_t, :t]ᵀ)/√d_t, with L_z[J] = B T."""
        z = B.shape[0]
        T, LJ = torch.zeros_like(B), torch.zeros_like(B)
        for t in range(z):
            c = B[:, t] - LJ[:, :t] @ LJ[t, :t]
            d = c[t]
            if bool(d > floor[t]):
                e = torch.zeros_like(c)
                e[t] = 1.0
                T[:, t] = (e - T[:, :t] @ LJ[t, :t]) / d.sqrt()
                LJ[:, t] = c / d.sqrt()
        return T

    def residual_factor(self, f: CholQRFactors) -> torch.Tensor:
        """L_z (n × z): partial Cholesky of K − LLᵀ with pivots J (a pivot whose
        residual variance is below rtol · K[j, j] gets a zero column), R_z T. O(z²n)."""
        return self.Rz @ self.transform(f)

    def approx_gains(self, f: CholQRFactors, objective: str = "vfe",
                     exclude: list[int] | None = None) -> torch.Tensor:
        """Approximate ΔF (eqs. 14–16 with ℓ_j ≈ L_z a_j/‖a_j‖) for every point, −inf
        for the pivots, ``exclude`` and points the information pivots do not see.
        Uses diag(L_z G L_zᵀ) with G = L_zᵀL_z, yᵀL_z, and M = Q[:n]ᵀ L_z = P T
        (§3.3.1, footnote 2): O(z²n + z²k) for all n candidates from the cache."""
        k = f.k
        T = self.transform(f)
        A = self.Rz @ T
        a2 = (A * A).sum(1)
        M = self._P[:k] @ T                                    # Q[:n]ᵀ L_z, k × z
        G, H = A.mT @ A, M.mT @ M
        inv_a = torch.where(a2 > 0, a2, torch.ones_like(a2)).rsqrt()
        ell2 = ((A @ G) * A).sum(1) * inv_a**2                 # ‖ℓ_j‖²
        r2 = ((A @ H) * A).sum(1) * inv_a**2                   # ‖Q[:n]ᵀ ℓ_j‖²
        yw = (A @ (A.mT @ f.y - M.mT @ f.qy)) * inv_a          # yᵀℓ_j − (Qᵀỹ)ᵀ(Qᵀℓ̃_j)
        s2 = f.sigma**2
        w2 = (ell2 + s2 - r2).clamp_min(s2)                    # ‖w‖² ≥ σ² exactly
        gain = gains_from_terms(ell2, yw, w2, s2, objective)
        valid = a2 > self.rtol * f.kdiag.clamp_min(1e-300)
        if f.k:
            valid[torch.tensor(f.pivots, device=valid.device)] = False
        if exclude:
            valid[torch.tensor(exclude, device=valid.device)] = False
        return torch.where(valid, gain, torch.full_like(gain, float("-inf")))
