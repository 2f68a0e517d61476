"""CholQR candidate scoring (Cao, Brubaker, Fleet & Hertzmann 2013, §3.1, §3.3).

- :func:`factor_objective`: F (or the DTC E) from the factors, eqs. (9), (11), (12);
- :func:`exact_gain`: the exact decrease ΔF = F(I) − F(I ∪ {j}) of adding one
  candidate j to the (down-dated) set I, eqs. (14)–(16), O(kn);
- :class:`InfoPivots`: z "information pivots" whose partial Cholesky factor L_z of
  the residual K − K̂ ranks all n − k candidates approximately in O(zkn) (§3.3.1);
  the pivots are drawn at random and can be redrawn at any time (§3.3.2).

All functions work on a :class:`~gpscale.linalg.pivchol.CholQRFactors` (fixed
hyperparameters) and never form an n × n matrix.
"""

from __future__ import annotations

import torch

from ..linalg.pivchol import CholQRFactors
from ..params import LOG_2PI

#: a candidate whose residual variance (K − K̂)[j, j] is below this fraction of K[j, j]
#: is treated as lying in the span of the inducing set (its ℓ_j would be ill-determined)
MIN_RESIDUAL = 1e-8


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
    the span of I). One kernel column and one Gram–Schmidt step: O(kn)."""
    ell = f.new_column(j, rtol=MIN_RESIDUAL) if ell is None else ell
    if ell is None:
        return float("-inf"), None
    _, w, rho = f.gram_schmidt(ell)
    s2 = f.sigma**2
    gain = gains_from_terms(ell @ ell, w[: f.n] @ f.y, rho * rho, s2, objective)
    return float(gain), ell


class InfoPivots:
    """z information pivots J (§3.3.1): L_z is the partial Cholesky factor of the
    residual K − K̂ with pivots J, so that (K − K̂) ≈ L_z L_zᵀ and the new column of a
    candidate j, ℓ_j = (K − K̂)[:, j] / √(K − K̂)[j, j], is approximated by
    L_z a_j / ‖a_j‖ with a_j = L_z[j, :]ᵀ. The kernel columns K[:, J] are cached
    (hyperparameters are fixed for the lifetime of the object)."""

    def __init__(self, f: CholQRFactors, z: int, generator: torch.Generator,
                 rtol: float = MIN_RESIDUAL) -> None:
        self.z, self.gen, self.rtol = int(z), generator, rtol
        self.refresh(f)

    def _draw(self, f: CholQRFactors, count: int, avoid: set[int]) -> list[int]:
        pool_mask = torch.ones(f.n, dtype=torch.bool)
        pool_mask[list(avoid | set(f.pivots))] = False
        pool = torch.nonzero(pool_mask)[:, 0]
        perm = torch.randperm(pool.numel(), generator=self.gen)[:count]
        return pool[perm].tolist()

    def refresh(self, f: CholQRFactors) -> None:
        """Redraw all z pivots uniformly among the non-inducing points (§3.3.2)."""
        self.J = self._draw(f, self.z, set())
        idx = torch.tensor(self.J, dtype=torch.long, device=f.X.device)
        with torch.no_grad():
            self.K_J = f.kernel(f.X, f.X[idx]) if self.J else f.X.new_zeros(f.n, 0)

    def replace(self, f: CholQRFactors, j: int) -> None:
        """Pivot j has entered the inducing set: draw a replacement for it (§3.3.1)."""
        if j not in self.J:
            return
        t = self.J.index(j)
        new = self._draw(f, 1, set(self.J))
        if not new:
            del self.J[t]
            self.K_J = torch.cat([self.K_J[:, :t], self.K_J[:, t + 1:]], 1)
            return
        self.J[t] = new[0]
        self.K_J[:, t] = f.kernel_column(new[0])

    def residual_factor(self, f: CholQRFactors) -> torch.Tensor:
        """L_z (n × z): partial Cholesky of K − LLᵀ with pivots J; a pivot whose
        residual variance is below rtol · K[j, j] gets a zero column. O(zkn + z²n).

        Computed blockwise: a pivot whose residual is already below the threshold
        before any other pivot (a point in the span of the inducing set, e.g. the
        duplicate of one) gets its zero column at once, since residuals only shrink;
        the rest is L_z = (K − LLᵀ)[:, J'] C⁻ᵀ with C = chol((K − LLᵀ)[J', J']), the
        column-by-column factor when each of them still clears the threshold after the
        ones before it (C's squared diagonal holds those residuals). Otherwise column
        by column."""
        k = f.k
        idx = torch.tensor(self.J, dtype=torch.long, device=f.X.device)
        Rz = self.K_J - f._Lt[:k].mT @ f._Lt[:k][:, idx]
        if not self.J:
            return Rz
        floor = self.rtol * f.kdiag[idx].clamp_min(1e-300)
        live = torch.nonzero(torch.diagonal(Rz[idx]) > floor).flatten()
        R_live = Rz[:, live]
        C, info = torch.linalg.cholesky_ex(R_live[idx[live]])
        if int(info) == 0 and bool((torch.diagonal(C) ** 2 > floor[live]).all()):
            out = torch.zeros_like(Rz)
            out[:, live] = torch.linalg.solve_triangular(C, R_live.mT, upper=False).mT
            return out
        return self._residual_factor_by_columns(f, Rz)

    def _residual_factor_by_columns(self, f: CholQRFactors, Rz: torch.Tensor) -> torch.Tensor:
        Lz = torch.zeros_like(Rz)
        for t, jt in enumerate(self.J):
            c = Rz[:, t] - Lz[:, :t] @ Lz[jt, :t]
            d = c[jt]
            if bool(d > self.rtol * f.kdiag[jt].clamp_min(1e-300)):
                Lz[:, t] = c / d.sqrt()
        return Lz

    def approx_gains(self, f: CholQRFactors, objective: str = "vfe",
                     exclude: list[int] | None = None) -> torch.Tensor:
        """Approximate ΔF (eqs. 14–16 with ℓ_j ≈ L_z a_j/‖a_j‖) for every point, −inf
        for the pivots, ``exclude`` and points the information pivots do not see.
        Uses diag(L_z G L_zᵀ) with G = L_zᵀL_z, yᵀL_z, and M = Q[:n]ᵀ L_z (§3.3.1):
        O(zkn + z²n) for all n candidates."""
        n, k = f.n, f.k
        A = self.residual_factor(f)
        a2 = (A * A).sum(1)
        M = f._Qt[:k, :n] @ A                                  # Q[:n]ᵀ L_z, k × z
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
