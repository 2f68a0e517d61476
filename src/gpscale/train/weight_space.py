"""The weight-space ML-II objective of Shoham & Avron (§2.2, §3) and its minibatch pieces.

For a finite feature map φ_α: X → R^d with Z = (φ_α(x_1), …, φ_α(x_n))ᵀ, the GP
covariance is K = ZZᵀ + σ²I, and (§2.2, Appendix B: yᵀ(ZZᵀ + σ²I)⁻¹y = min_w …)

    l(θ) = ‖Zw − y‖²/σ² + ‖w‖² + log|F(θ)| + (n − d) log σ²,   F = ZᵀZ + σ²I,

θ = (w, α, σ²), so that min_w l(θ) = yᵀK⁻¹y + log|K| = 2·NLML − n log 2π.
§3 splits it into per-row terms

    g_i(θ) = (φ_iᵀw − y_i)²/σ² + ‖w‖²/n + (n − d) log σ² / n,   F_i(θ) = φ_iφ_iᵀ + σ²I/n,

so that l(θ) = Σ_i g_i(θ) + h(Σ_i F_i(θ)), h(A) = log|A|. Everything here takes a
batch's features ``phi`` (|S| x d) and returns the batch sums; the exact value of l
comes from the streaming statistics (ZᵀZ, Zᵀy, yᵀy) of :class:`FeatureGP`.
"""

from __future__ import annotations

import torch

from ..linalg import robust_cholesky, robust_eigh


def _check_batch(phi: torch.Tensor, y: torch.Tensor, n: int) -> None:
    if phi.ndim != 2 or y.shape != (phi.shape[0],):
        raise ValueError(f"phi must be (b, d) and y (b,); got phi {tuple(phi.shape)}, "
                         f"y {tuple(y.shape)}")
    if n < phi.shape[0]:
        raise ValueError(f"n={n} (training rows) is smaller than the batch ({phi.shape[0]})")


def g_terms(phi: torch.Tensor, y: torch.Tensor, w: torch.Tensor, noise: torch.Tensor,
            n: int) -> torch.Tensor:
    """Per-row g_i(θ) of §3 for the batch rows: (φ_iᵀw − y_i)²/σ² + ‖w‖²/n + (n−d) log σ²/n."""
    _check_batch(phi, y, n)
    d = phi.shape[1]
    r = phi @ w - y
    return r * r / noise + (w @ w) / n + (n - d) * torch.log(noise) / n


def batch_F(phi: torch.Tensor, noise: torch.Tensor, n: int) -> torch.Tensor:
    """Σ_{i∈S} F_i(θ) = Φ_SᵀΦ_S + (|S|/n) σ² I (§3)."""
    d = phi.shape[1]
    eye = torch.eye(d, dtype=phi.dtype, device=phi.device)
    return phi.mT @ phi + (phi.shape[0] / n) * noise * eye


def logdet(A: torch.Tensor) -> torch.Tensor:
    """h(A) = log|A| of a symmetric positive definite A, by (robust) Cholesky."""
    return 2.0 * torch.log(torch.diagonal(robust_cholesky(A))).sum()


def objective_dense(phi: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
                    noise: torch.Tensor) -> torch.Tensor:
    """l(θ) of §2.2 from the full feature matrix Z = ``phi`` (n x d): a dense reference."""
    n = phi.shape[0]
    return g_terms(phi, y, w, noise, n).sum() + logdet(batch_F(phi, noise, n))


def objective_from_statistics(gram: torch.Tensor, proj: torch.Tensor, yy: torch.Tensor,
                              n: int, w: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Exact l(θ) from the sufficient statistics ZᵀZ, Zᵀy, yᵀy (one streaming pass):
    ‖Zw − y‖² = wᵀZᵀZw − 2wᵀZᵀy + yᵀy."""
    d = gram.shape[0]
    resid = w @ (gram @ w) - 2.0 * (w @ proj) + yy
    eye = torch.eye(d, dtype=gram.dtype, device=gram.device)
    return (resid / noise + w @ w + logdet(gram + noise * eye)
            + (n - d) * torch.log(noise))


def optimal_w(gram: torch.Tensor, proj: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """argmin_w l(θ) = F⁻¹Zᵀy, F = ZᵀZ + σ²I (Cholesky solve)."""
    eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    L = robust_cholesky(gram + noise * eye)
    return torch.cholesky_solve(proj[:, None], L)[:, 0]


def exact_objective(model, w: torch.Tensor) -> torch.Tensor:
    """l(θ) of a :class:`FeatureGP` (features α, noise σ²) at weights ``w``, from one
    streaming statistics pass (no gradient)."""
    with torch.no_grad():
        gram, proj, yy = model.statistics()
        return objective_from_statistics(gram, proj, yy, model.n, w, model.noise)


# -- MINIMAX (§3.1) -------------------------------------------------------------------------
def psi_batch(phi: torch.Tensor, y: torch.Tensor, n: int, w: torch.Tensor,
              noise: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
              mu: float) -> torch.Tensor:
    """Σ_{i∈S} ψ(ζ, B; x_i, μ) of Eq. (3.3), ζ = (θ, A):

        ψ_i = g_i(θ) + h(A)/n + μ ⟨B, A/n − F_i(θ)⟩ / ‖A‖.

    ⟨B, Σ_S F_i⟩ = Σ_S φ_iᵀBφ_i + (|S|/n) σ² tr B is formed in O(|S| d²) without F_i.
    Summed over all n rows this is Ψ(ζ, B) = g + h(A) + μ⟨B, A − F⟩/‖A‖ (Eq. 3.2).
    """
    s = phi.shape[0]
    frac = s / n
    BF = ((phi @ B) * phi).sum() + frac * noise * torch.diagonal(B).sum()
    penalty = (frac * (B * A).sum() - BF) / torch.linalg.matrix_norm(A)
    return g_terms(phi, y, w, noise, n).sum() + frac * logdet(A) + mu * penalty


def psi_full(phi: torch.Tensor, y: torch.Tensor, w: torch.Tensor, noise: torch.Tensor,
             A: torch.Tensor, B: torch.Tensor, mu: float) -> torch.Tensor:
    """Ψ(ζ, B) = g(θ) + h(A) + μ⟨B, A − F(θ)⟩/‖A‖ (Eq. 3.2), dense reference."""
    n = phi.shape[0]
    F = batch_F(phi, noise, n)
    return (g_terms(phi, y, w, noise, n).sum() + logdet(A)
            + mu * (B * (A - F)).sum() / torch.linalg.matrix_norm(A))


def grad_B(phi: torch.Tensor, n: int, noise: torch.Tensor, A: torch.Tensor,
           mu: float) -> torch.Tensor:
    """∇_B of (n/|S|) Σ_{i∈S} ψ_i: μ (A − (n/|S|) Σ_S F_i) / ‖A‖ (unbiased for ∇_B Ψ)."""
    s = phi.shape[0]
    F_hat = (n / s) * batch_F(phi, noise, n)
    return mu * (A - F_hat) / torch.linalg.matrix_norm(A)


def project_A(A: torch.Tensor, noise: float | torch.Tensor,
              a_max: float | None = None) -> torch.Tensor:
    """Euclidean (Frobenius) projection onto {A = Aᵀ, σ²I ⪯ A ⪯ a_max I}: symmetrise,
    then clip the eigenvalues to [σ², a_max] (§3.1, Ω₁).

    There is no shortcut for an A already inside: along a MINIMAX run the clipped
    eigenvalues sit on the bound σ², and a step typically pushes some of them below
    it, so nearly every projection clips."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {tuple(A.shape)}")
    sym = 0.5 * (A + A.mT)
    lam, U = robust_eigh(sym)
    lam = lam.clamp(min=float(noise), max=a_max)
    return (U * lam) @ U.mT


def project_B(B: torch.Tensor, radius: float = 1.0) -> torch.Tensor:
    """Projection onto Ω₂ = {‖B‖_F ≤ radius} (§3.1): rescale when outside."""
    norm = torch.linalg.matrix_norm(B)
    return B * (radius / norm) if norm > radius else B


# -- SCGD (§3.2) and BSGD (§4.2) ----------------------------------------------------------
def scgd_batch(phi: torch.Tensor, y: torch.Tensor, n: int, w: torch.Tensor,
               noise: torch.Tensor, F_tilde: torch.Tensor, return_estimate: bool = False):
    """(n/|S|) Σ_{i∈S} [g_i(θ) + ⟨F̃⁻¹, F_i(θ)⟩] (§3.2) with F̃ held fixed: its gradient is
    the SCGD direction; with F̃ = F(θ) it is unbiased for ∇l(θ) (exact for S = all rows).
    ⟨F̃⁻¹, Σ_S F_i⟩ = ‖L⁻¹Φ_Sᵀ‖² + (|S|/n) σ² ‖L⁻¹‖², F̃ = LLᵀ (triangular solves).
    ``return_estimate``: also return (n/|S|) Σ_S g_i + log|F̃| (no gradient), the
    batch's estimate of l(θ)."""
    s = phi.shape[0]
    L = robust_cholesky(F_tilde.detach())
    V = torch.linalg.solve_triangular(L, phi.mT, upper=False)
    eye = torch.eye(L.shape[0], dtype=L.dtype, device=L.device)
    tr_inv = torch.linalg.solve_triangular(L, eye, upper=False).square().sum()
    inner = V.square().sum() + (s / n) * noise * tr_inv
    g_sum = g_terms(phi, y, w, noise, n).sum()
    loss = (n / s) * (g_sum + inner)
    if not return_estimate:
        return loss
    est = (n / s) * g_sum.detach() + 2.0 * torch.log(torch.diagonal(L)).sum()
    return loss, est


def bsgd_batch(phi: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """BSGD's batch loss (Chen et al. 2020; §4.2): l(θ; S) = y_Sᵀ(K_SS + σ²I)⁻¹y_S +
    log|K_SS + σ²I|, K_SS = Φ_SΦ_Sᵀ — a small exact GP on the batch, O(b³ + b²d)."""
    K = phi @ phi.mT + noise * torch.eye(phi.shape[0], dtype=phi.dtype, device=phi.device)
    L = robust_cholesky(K)
    beta = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
    return beta @ beta + 2.0 * torch.log(torch.diagonal(L)).sum()
