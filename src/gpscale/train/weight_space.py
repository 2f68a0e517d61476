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


def logdet(A: torch.Tensor, eig: tuple[torch.Tensor, torch.Tensor] | None = None,
           known: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """h(A) = log|A| of a symmetric positive definite A, by (robust) Cholesky; or, when
    ``eig`` = (λ, U) with A = U diag(λ) Uᵀ is known, from it (:class:`_SpectralLogdet`);
    or, when ``known`` = (log|A|, A⁻¹) is at hand, from that (:class:`_KnownLogdet`)."""
    if known is not None:
        return _KnownLogdet.apply(A, *known)
    if eig is not None:
        return _SpectralLogdet.apply(A, *eig)
    return 2.0 * torch.log(torch.diagonal(robust_cholesky(A))).sum()


class _KnownLogdet(torch.autograd.Function):
    """log|A| with gradient A⁻¹ (∂ log|A| / ∂A = A⁻ᵀ = A⁻¹ for symmetric A), both
    computed beforehand (MINIMAX's projection, :func:`project_A_factored`)."""

    @staticmethod
    def forward(ctx, A, value, inverse):
        ctx.save_for_backward(inverse)
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        return grad * inverse, None, None


class _SpectralLogdet(torch.autograd.Function):
    """log|A| = Σ log λ_k with gradient A⁻¹ = U diag(1/λ) Uᵀ, for an A whose
    eigendecomposition is already at hand (MINIMAX's projection computes it): one
    matrix product instead of a Cholesky factor and its inverse."""

    @staticmethod
    def forward(ctx, A, lam, U):
        ctx.save_for_backward(lam, U)
        return torch.log(lam).sum()

    @staticmethod
    def backward(ctx, grad):
        lam, U = ctx.saved_tensors
        return grad * ((U / lam) @ U.mT), None, None


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
              mu: float, eig: tuple[torch.Tensor, torch.Tensor] | None = None,
              known: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Σ_{i∈S} ψ(ζ, B; x_i, μ) of Eq. (3.3), ζ = (θ, A):

        ψ_i = g_i(θ) + h(A)/n + μ ⟨B, A/n − F_i(θ)⟩ / ‖A‖.

    ⟨B, Σ_S F_i⟩ = Σ_S φ_iᵀBφ_i + (|S|/n) σ² tr B is formed in O(|S| d²) without F_i.
    Summed over all n rows this is Ψ(ζ, B) = g + h(A) + μ⟨B, A − F⟩/‖A‖ (Eq. 3.2).
    ``eig``: A's eigendecomposition (λ, U), when known; h(A) is then taken from it;
    ``known``: (log|A|, A⁻¹), when known (:func:`project_A_factored`), likewise.
    """
    s = phi.shape[0]
    frac = s / n
    BF = ((phi @ B) * phi).sum() + frac * noise * torch.diagonal(B).sum()
    penalty = (frac * (B * A).sum() - BF) / torch.linalg.matrix_norm(A)
    return g_terms(phi, y, w, noise, n).sum() + frac * logdet(A, eig, known) + mu * penalty


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
              a_max: float | None = None, return_eig: bool = False):
    """Euclidean (Frobenius) projection onto {A = Aᵀ, σ²I ⪯ A ⪯ a_max I}: symmetrise,
    then clip the eigenvalues to [σ², a_max] (§3.1, Ω₁).

    ``return_eig``: return (A, (λ, U)), the projected A with its eigendecomposition,
    for the next step's log|A|. MINIMAX's default step uses :func:`project_A_factored`
    (the same projection, cheaper around it); this full form is its ``"eigh"`` option."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {tuple(A.shape)}")
    sym = 0.5 * (A + A.mT)
    lam, U = robust_eigh(sym)
    lam = lam.clamp(min=float(noise), max=a_max)
    projected = (U * lam) @ U.mT
    return (projected, (lam, U)) if return_eig else projected


def project_A_factored(A: torch.Tensor, noise: float | torch.Tensor,
                       a_max: float | None = None, test_inside: bool = True
                       ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], bool]:
    """:func:`project_A` (§3.1, Ω₁) returning (P, (log|P|, P⁻¹), clipped): the projection
    with the log-determinant and inverse the next step's h(A) = log|A| needs.

    Inside test (``test_inside``): when A − σ²I (and a_max I − A) has a Cholesky factor,
    A is inside Ω₁, the clip changes nothing and P = A; log|P| and P⁻¹ then come from P's
    own Cholesky factor (about d³ flops in all instead of an eigendecomposition's ~9d³).
    Otherwise P = U clip(Λ) Uᵀ by one eigendecomposition, formed as
    A + U_c (clip(λ_c) − λ_c) U_cᵀ over the k clipped eigenpairs when k ≤ d/2 (2d²k
    flops, not 2d³), and P⁻¹ = I/σ² + U_r (1/λ_r − 1/σ²) U_rᵀ over the r eigenvalues
    above σ² (λ ascending: the clipped ones are U's first and last columns)."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {tuple(A.shape)}")
    sym = 0.5 * (A + A.mT)
    d = sym.shape[0]
    lower = float(noise)
    if test_inside:
        eye = torch.eye(d, dtype=sym.dtype, device=sym.device)
        inside = bool(torch.linalg.cholesky_ex(sym - lower * eye)[1] == 0)
        if inside and a_max is not None:
            inside = bool(torch.linalg.cholesky_ex(a_max * eye - sym)[1] == 0)
        if inside:
            L, info = torch.linalg.cholesky_ex(sym)
            if int(info) == 0:  # sym ⪰ σ²I ≻ 0 in exact arithmetic: fails only by rounding
                value = 2.0 * torch.log(torch.diagonal(L)).sum()
                return sym, (value, torch.cholesky_inverse(L)), False
    lam, U = robust_eigh(sym)
    clipped = lam.clamp(min=lower, max=a_max)
    low = int((lam < lower).sum())
    high = 0 if a_max is None else int((lam > a_max).sum())
    if low + high <= d // 2:
        projected = sym.clone()
        for cols in (slice(0, low), slice(d - high, d)):
            Uc = U[:, cols]
            projected.addmm_(Uc * (clipped[cols] - lam[cols]), Uc.mT)
    else:
        projected = (U * clipped) @ U.mT
    Ur = U[:, low:]
    inverse = (Ur * (1.0 / clipped[low:] - 1.0 / lower)) @ Ur.mT
    inverse.diagonal().add_(1.0 / lower)
    return projected, (torch.log(clipped).sum(), inverse), low + high > 0


def project_B(B: torch.Tensor, radius: float = 1.0) -> torch.Tensor:
    """Projection onto Ω₂ = {‖B‖_F ≤ radius} (§3.1): rescale when outside."""
    norm = torch.linalg.matrix_norm(B)
    return B * (radius / norm) if norm > radius else B


# -- SCGD (§3.2) and BSGD (§4.2) ----------------------------------------------------------
def scgd_batch(phi: torch.Tensor, y: torch.Tensor, n: int, w: torch.Tensor,
               noise: torch.Tensor, F_tilde: torch.Tensor | TrackedF,
               return_estimate: bool = False):
    """(n/|S|) Σ_{i∈S} [g_i(θ) + ⟨F̃⁻¹, F_i(θ)⟩] (§3.2) with F̃ held fixed: its gradient is
    the SCGD direction; with F̃ = F(θ) it is unbiased for ∇l(θ) (exact for S = all rows).
    ⟨F̃⁻¹, Σ_S F_i⟩ = tr(Φ_S F̃⁻¹ Φ_Sᵀ) + (|S|/n) σ² tr F̃⁻¹: triangular solves with the
    Cholesky factor of a d x d F̃, or through :class:`TrackedF`'s low-rank form.
    ``return_estimate``: also return (n/|S|) Σ_S g_i + log|F̃| (no gradient), the
    batch's estimate of l(θ)."""
    s = phi.shape[0]
    quad, tr_inv, logdet_F = F_tilde.terms(phi) if isinstance(F_tilde, TrackedF) \
        else _dense_terms(phi, F_tilde)
    inner = quad + (s / n) * noise * tr_inv
    g_sum = g_terms(phi, y, w, noise, n).sum()
    loss = (n / s) * (g_sum + inner)
    if not return_estimate:
        return loss
    return loss, (n / s) * g_sum.detach() + logdet_F.detach()


class TrackedF:
    """SCGD's tracker of F(θ) with a fixed rate b (§3.2; the paper's b = 0.9),

        F̃_t = (1 − b) F̃_{t−1} + b F̂_t,   F̂_t = (n/|S_t|) Φ_tᵀΦ_t + σ_t² I,

    held so that a step costs O(r² d) instead of the O(d³) of a d x d Cholesky: unrolled,
    F̃_t = w₀ F̃_0 + a I + Σ_k c_k Φ_kᵀΦ_k with w₀ = (1 − b)^t, a = Σ_k b(1 − b)^{t−k} σ_k²
    and c_k = b(1 − b)^{t−k} n/|S_k|. A batch (and F̃_0) is dropped once its weight is
    below ``drop`` times a new batch's (b = 0.9, drop = 1e-13: after 13 steps), so
    F̃ = a I + UᵀCU with U the r = 13|S| kept rows; F̃⁻¹ by Woodbury through the r x r
    M = aI + C^½UUᵀC^½ (UUᵀ kept up to date block by block: |S| r d per step) and
    log|F̃| = (d − r) log a + log|M| (the determinant lemma). While F̃_0 still weighs
    (the first steps), or when r ≥ d, the terms come from F̃ itself, densely."""

    def __init__(self, F0: torch.Tensor, b: float, drop: float = 1e-13) -> None:
        if not 0 < b <= 1:
            raise ValueError(f"b must lie in (0, 1], got {b!r}")
        self.b, self.drop = float(b), float(drop)
        self.F0, self.w0, self.a = F0.detach(), 1.0, 0.0
        d = F0.shape[0]
        self.U = F0.new_zeros(0, d)
        self.G = F0.new_zeros(0, 0)
        self.c = F0.new_zeros(0)

    def update(self, phi: torch.Tensor, noise: torch.Tensor | float, n: int) -> None:
        """F̃ ← (1 − b) F̃ + b F̂ for the batch features ``phi`` (no gradient)."""
        phi = phi.detach()
        s, b = phi.shape[0], self.b
        new = b * n / s
        self.w0 *= 1.0 - b
        if self.F0 is not None and self.w0 < self.drop:
            self.F0 = None
        self.a = (1.0 - b) * self.a + b * float(noise)
        c = self.c * (1.0 - b)
        keep = c >= self.drop * new
        U, G = self.U[keep], self.G[keep][:, keep]
        cross = phi @ U.mT
        self.G = torch.cat([torch.cat([G, cross.mT], 1),
                            torch.cat([cross, phi @ phi.mT], 1)], 0)
        self.U = torch.cat([U, phi], 0)
        self.c = torch.cat([c[keep], c.new_full((s,), new)])

    def matrix(self) -> torch.Tensor:
        """F̃ as a d x d matrix."""
        F = (self.U.mT * self.c) @ self.U
        F.diagonal().add_(self.a)
        return F if self.F0 is None else F.add_(self.F0, alpha=self.w0)

    def terms(self, phi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(tr(Φ F̃⁻¹ Φᵀ), tr F̃⁻¹, log|F̃|): the first differentiable in ``phi``."""
        d, r = self.U.shape[1], self.U.shape[0]
        if self.F0 is not None or r >= d or self.a <= 0:
            return _dense_terms(phi, self.matrix())
        root = self.c.sqrt()
        M = root[:, None] * self.G * root
        M.diagonal().add_(self.a)
        R = robust_cholesky(M)
        Z = torch.linalg.solve_triangular(R, root[:, None] * (self.U @ phi.mT), upper=False)
        quad = (phi.square().sum() - Z.square().sum()) / self.a
        eye = torch.eye(r, dtype=R.dtype, device=R.device)
        tr_M_inv = torch.linalg.solve_triangular(R, eye, upper=False).square().sum()
        tr_inv = (d - r) / self.a + tr_M_inv
        logdet = (d - r) * torch.log(R.new_tensor(self.a)) \
            + 2.0 * torch.log(torch.diagonal(R)).sum()
        return quad, tr_inv, logdet


def _dense_terms(phi: torch.Tensor, F: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:meth:`TrackedF.terms` from F̃ itself (triangular solves with its Cholesky)."""
    L = robust_cholesky(F.detach())
    V = torch.linalg.solve_triangular(L, phi.mT, upper=False)
    eye = torch.eye(L.shape[0], dtype=L.dtype, device=L.device)
    tr_inv = torch.linalg.solve_triangular(L, eye, upper=False).square().sum()
    return V.square().sum(), tr_inv, 2.0 * torch.log(torch.diagonal(L)).sum()


def bsgd_batch(phi: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """BSGD's batch loss (Chen et al. 2020; §4.2): l(θ; S) = y_Sᵀ(K_SS + σ²I)⁻¹y_S +
    log|K_SS + σ²I|, K_SS = Φ_SΦ_Sᵀ — a small exact GP on the batch, O(b³ + b²d)."""
    K = phi @ phi.mT + noise * torch.eye(phi.shape[0], dtype=phi.dtype, device=phi.device)
    L = robust_cholesky(K)
    beta = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
    return beta @ beta + 2.0 * torch.log(torch.diagonal(L)).sum()
