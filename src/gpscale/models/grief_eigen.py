"""GP-GRIEF-I's re-weighted kernel with the weights on the eigenfunctions themselves
(Evans & Nair 2018, eqs. 16-18): k̃(x, z) = Σᵢ wᵢ φᵢ(x) φᵢ(z), K̃ = Φ W Φᵀ, W = diag(w).

Two exact forms of −LML and its p + 1 derivatives (the dual only for n < p, and by
default only where it costs less, :func:`dual_is_cheaper`):

* **n ≥ p, primal (eq. 18)**: P = σ²W⁻¹ + A (A = ΦᵀΦ, r = Φᵀy), β = P⁻¹r,
  yᵀ(K̃+σ²I)⁻¹y = (yᵀy − rᵀβ)/σ², log|K̃+σ²I| = log|P| + Σ log wᵢ + (n − p) log σ²;
  ∂/∂wᵢ = ½[1/wᵢ − (βᵢ² + σ²P⁻¹ᵢᵢ)/wᵢ²],
  ∂/∂σ² = ½[−(yᵀy − rᵀβ)/σ⁴ + Σ βᵢ²/(σ²wᵢ) + Σ P⁻¹ᵢᵢ/wᵢ + (n − p)/σ²];  O(p³).
* **n < p, dual**: with B (k × p) and ỹ such that Φ = U B for some U with orthonormal
  columns and ỹ = Uᵀy (B = Φ, U = I, or from A = ṼΣ̃²Ṽᵀ: B = Σ̃Ṽᵀ, ỹ = Σ̃⁻¹Ṽᵀr,
  k = rank Φ), C = BWBᵀ + σ²I (k × k), α = C⁻¹ỹ, ρ = yᵀy − ỹᵀỹ:
  −LML = ½[ρ/σ² + ỹᵀα + log|C| + (n − k) log σ² + n log 2π];
  ∂/∂wᵢ = ½[(BᵀC⁻¹B)ᵢᵢ − (Bᵀα)ᵢ²],
  ∂/∂σ² = ½[−ρ/σ⁴ + tr C⁻¹ − αᵀα + (n − k)/σ²];  O(k²p + k³).

Predictions of one draw (w, σ²), both forms the weight posterior N(P⁻¹r, σ²P⁻¹):
mean φ*ᵀWBᵀα = φ*ᵀβ, variance φ*ᵀWφ* − ‖L⁻¹BWφ*‖² = σ²‖L_P⁻¹φ*‖².
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..features.grief import GriefFeatures
from ..params import LOG_2PI
from ..validation import as_matrix
from .base import GPModel, MeanAndVariance, dtype_name, no_data

FORMS = ("primal", "dual")


def dual_is_cheaper(k: int, p: int) -> bool:
    """Whether the dual form (k × k) costs less than the primal (p × p) per evaluation:
    ≈ 2k²p + ⅔k³ flops (BWBᵀ, L⁻¹B, the factor and L⁻¹) against ≈ ⅔p³, i.e.
    3k²p + k³ < p³ (k below about 0.53 p)."""
    return 3 * k * k * p + k**3 < p**3


class ReweightedGrief:
    """−LML of y under Φ diag(w) Φᵀ + σ²I and its gradient (eqs. 16-18), in the primal
    (P, n ≥ p) or dual (k × k, n < p) form of the module docstring."""

    def __init__(self, form: str, M: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                 n: int, p: int) -> None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        # primal: M = A, b = r, c = yᵀy; dual: M = B (k × p), b = ỹ, c = ρ
        self.form, self.M, self.b, self.c, self.n, self.p = form, M, b, c, int(n), int(p)

    @classmethod
    def from_features(cls, phi: torch.Tensor, y: torch.Tensor,
                      form: str | None = None) -> ReweightedGrief:
        """From Φ (n × p) and y: dual with B = Φ (the n × n Cholesky of ΦWΦᵀ + σ²I)
        when n < p, primal otherwise (or as ``form`` says)."""
        n, p = phi.shape
        if form not in (None, *FORMS):
            raise ValueError(f"form must be one of {FORMS} or None, got {form!r}")
        form = form or ("dual" if n < p else "primal")
        if form == "dual":
            return cls("dual", phi, y, y.new_zeros(()), n, p)
        return cls("primal", phi.mT @ phi, phi.mT @ y, y @ y, n, p)

    @classmethod
    def from_statistics(cls, gram: torch.Tensor, proj: torch.Tensor, yy: torch.Tensor,
                        n: int, form: str | None = None,
                        rtol: float = 1e-12) -> ReweightedGrief:
        """From A = ΦᵀΦ, r = Φᵀy, yᵀy and n (Φ never held). Dual when n < p: one
        eigendecomposition A = ṼΣ̃²Ṽᵀ gives B = Σ̃Ṽᵀ and ỹ = Σ̃⁻¹Ṽᵀr on the k = rank Φ
        directions above ``rtol``·σ̃²_max (Φ = ŨB with Ũ = ΦṼΣ̃⁻¹). ``form`` None: dual
        when n < p and it is the cheaper (:func:`dual_is_cheaper`), else primal."""
        gram, proj = gram.detach(), proj.detach()
        yy = torch.as_tensor(yy, dtype=gram.dtype, device=gram.device)
        p = gram.shape[0]
        if form not in (None, *FORMS):
            raise ValueError(f"form must be one of {FORMS} or None, got {form!r}")
        if form == "primal" or (form is None and n >= p):
            return cls("primal", gram, proj, yy, n, p)
        sv2, V = torch.linalg.eigh(0.5 * (gram + gram.mT))
        keep = sv2 > rtol * sv2.max().clamp_min(torch.finfo(sv2.dtype).tiny)
        k = int(keep.sum())
        if form is None and not dual_is_cheaper(k, p):
            return cls("primal", gram, proj, yy, n, p)
        sv, V = sv2[keep].sqrt(), V[:, keep]
        yt = (V.mT @ proj) / sv
        return cls("dual", sv[:, None] * V.mT, yt, (yy - yt @ yt).clamp_min(0.0), n, p)

    @property
    def k(self) -> int:
        """The size of the matrix factorised per evaluation (p primal, k dual)."""
        return self.M.shape[0]

    def _factor(self, w: torch.Tensor, noise: torch.Tensor) -> torch.Tensor | None:
        """Cholesky factor of P (primal) or C (dual); None where it fails."""
        if self.form == "primal":
            mat = self.M + torch.diag(noise / w)
        else:
            B = self.M
            mat = (B * w) @ B.mT
            mat.diagonal().add_(noise)
        L, info = torch.linalg.cholesky_ex(mat)
        return None if int(info) != 0 else L

    @torch.no_grad()
    def nlml_and_grad(self, w: torch.Tensor, noise: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(−LML, ∂/∂w, ∂/∂σ²); −LML = inf (zero gradient) where the factor fails."""
        w = torch.as_tensor(w, dtype=self.M.dtype, device=self.M.device)
        noise = torch.as_tensor(noise, dtype=self.M.dtype, device=self.M.device)
        if w.shape != (self.p,):
            raise ValueError(f"w has shape {tuple(w.shape)}; this kernel has p = {self.p}")
        L = self._factor(w, noise)
        if L is None:
            return (torch.tensor(math.inf, dtype=w.dtype, device=w.device),
                    torch.zeros_like(w), torch.zeros_like(noise))
        logdet_f = 2.0 * torch.log(L.diagonal()).sum()
        eye = torch.eye(self.k, dtype=w.dtype, device=w.device)
        if self.form == "primal":
            beta = torch.cholesky_solve(self.b[:, None], L)[:, 0]
            resid = self.c - self.b @ beta  # yᵀy − rᵀβ = σ² yᵀ(K̃+σ²I)⁻¹y
            Linv = torch.linalg.solve_triangular(L, eye, upper=False)
            pinv_diag = (Linv * Linv).sum(0)  # diag P⁻¹
            m = self.n - self.p
            value = 0.5 * (resid / noise + logdet_f + torch.log(w).sum()
                           + m * torch.log(noise) + self.n * LOG_2PI)
            g_w = 0.5 * (1.0 / w - (beta * beta + noise * pinv_diag) / (w * w))
            g_noise = 0.5 * (-resid / noise**2 + (beta * beta / w).sum() / noise
                             + (pinv_diag / w).sum() + m / noise)
            return value, g_w, g_noise
        B, yt = self.M, self.b
        alpha = torch.cholesky_solve(yt[:, None], L)[:, 0]
        G = torch.linalg.solve_triangular(L, B, upper=False)  # L⁻¹B
        Linv = torch.linalg.solve_triangular(L, eye, upper=False)
        u = B.mT @ alpha
        m = self.n - self.k
        value = 0.5 * (self.c / noise + yt @ alpha + logdet_f + m * torch.log(noise)
                       + self.n * LOG_2PI)
        g_w = 0.5 * ((G * G).sum(0) - u * u)
        g_noise = 0.5 * (-self.c / noise**2 + (Linv * Linv).sum() - alpha @ alpha
                         + m / noise)
        return value, g_w, g_noise

    @torch.no_grad()
    def predict(self, phi_new: torch.Tensor, w: torch.Tensor, noise: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of f at new points from their features Φ* for one draw."""
        L = self._factor(w, noise)
        if L is None:
            raise ValueError("the kernel matrix of this draw is not positive definite")
        if self.form == "primal":
            beta = torch.cholesky_solve(self.b[:, None], L)[:, 0]
            H = torch.linalg.solve_triangular(L, phi_new.mT, upper=False)
            return phi_new @ beta, noise * (H * H).sum(0)
        B = self.M
        alpha = torch.cholesky_solve(self.b[:, None], L)[:, 0]
        Pw = phi_new * w  # rows φ*ᵀW
        H = torch.linalg.solve_triangular(L, B @ Pw.mT, upper=False)
        var = (Pw * phi_new).sum(1) - (H * H).sum(0)
        return Pw @ (B.mT @ alpha), var.clamp_min(0.0)


def draws_summary(posterior: Any, basis: str) -> str:
    """The summary of a GRIEF-I posterior (MCMC draws of the weights ``w`` and the noise,
    over fixed base lengthscales and signal variance ``scale``); ``basis`` says what the
    weights sit on."""
    ls = posterior.features.lengthscale.detach().reshape(-1).cpu()
    w, noise, k = posterior.w.mean(0).cpu(), posterior.noise, posterior.num_samples
    return "\n".join([
        f"GP-GRIEF-I posterior: {k} draws, {basis}",
        f"  base lengthscales (fixed): {[round(float(v), 4) for v in ls]}",
        f"  signal variance s₀ (fixed): {float(posterior.scale):.5g}",
        f"  noise σ²: mean {float(noise.mean()):.5g}, "
        f"std {float(noise.std()) if k > 1 else 0.0:.3g}",
        f"  weights w (posterior means): min {float(w.min()):.4g}, "
        f"median {float(w.median()):.4g}, max {float(w.max()):.4g}",
    ])


class ReweightedGriefPosterior(GPModel):
    """GP-GRIEF-I predictive model with the weights on the eigenfunctions (eq. 16):
    the MCMC draws (wₛ, σ²ₛ) of s₀ Φ diag(w) Φᵀ + σ²I (Φ the GRIEF features, s₀ the
    initialised signal variance), averaged as a Gaussian mixture:
    mean = (1/S) Σₛ μₛ, var = (1/S) Σₛ (vₛ + μₛ²) − mean².

    Holds ΦᵀΦ, Φᵀy, yᵀy and n (never the rows; the dual form is rebuilt from them,
    :meth:`ReweightedGrief.from_statistics`) and the draws, as buffers."""

    def __init__(self, features, scale: torch.Tensor, gram: torch.Tensor,
                 proj: torch.Tensor, yy: torch.Tensor, w: torch.Tensor,
                 noise: torch.Tensor, n: int) -> None:
        super().__init__()
        self.features, self._n = features, int(n)
        self.register_buffer("scale", torch.as_tensor(scale, dtype=w.dtype, device=w.device))
        self.register_buffer("gram", gram)  # A = s₀ΦᵀΦ
        self.register_buffer("proj", proj)  # r = √s₀ Φᵀy
        self.register_buffer("yy", torch.as_tensor(yy, dtype=w.dtype, device=w.device))
        self.register_buffer("w", w)  # (S, p) weight draws
        self.register_buffer("noise", noise)  # (S,) σ² draws

    @property
    def likelihood(self) -> ReweightedGrief:
        """The eq. 16-18 likelihood on the statistics held (rebuilt on each call, so
        it always follows the buffers, e.g. after ``load_state_dict``)."""
        return ReweightedGrief.from_statistics(self.gram, self.proj, self.yy, self.n)

    @property
    def n(self) -> int:
        return self._n

    def freeze(self) -> ReweightedGriefPosterior:
        """Nothing to let go of: the posterior holds statistics and draws, never rows."""
        return self

    @property
    def num_samples(self) -> int:
        return self.w.shape[0]

    @property
    def rank(self) -> int:
        """p, the number of weighted eigenfunctions."""
        return self.w.shape[1]

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Mean over the draws of the −LML of the training data (eq. 18, from the
        statistics held, so no ``data``)."""
        no_data(self, data)
        lik = self.likelihood
        return torch.stack([lik.nlml_and_grad(w, s)[0]
                            for w, s in zip(self.w, self.noise)]).mean()

    @torch.no_grad()
    def predict(self, X_new: torch.Tensor, *, include_noise: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """Mixture mean and variance at ``X_new`` over all kept draws."""
        X_new = as_matrix(X_new, "X_new", self.w.dtype, self.w.device)
        phi = torch.cat([self.features(X_new[s: s + block])
                         for s in range(0, X_new.shape[0], block)]) * self.scale.sqrt()
        lik = self.likelihood
        mean = torch.zeros(phi.shape[0], dtype=phi.dtype, device=phi.device)
        second = torch.zeros_like(mean)
        for w, s in zip(self.w, self.noise):
            mu, var = lik.predict(phi, w, s)
            mean += mu
            second += var + mu * mu + (s if include_noise else 0.0)
        mean /= self.num_samples
        return MeanAndVariance(mean, (second / self.num_samples - mean * mean).clamp_min(0.0))

    def summary(self) -> str:
        return draws_summary(self, f"p = {self.rank} weighted eigenfunctions (eq. 16)")

    def to_config(self) -> dict[str, Any]:
        f = self.features
        return {"dtype": dtype_name(self.w), "num_features": f.num_features,
                "kernel": f.kernel, "m_bar": f.m_bar, "grid": f.grid_kind,
                "eig_floor": f.eig_floor, "gap_tol": f.gap_tol, "n": self.n}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Any = None) -> ReweightedGriefPosterior:
        dtype = getattr(torch, str(config["dtype"]))
        feats = GriefFeatures.from_grid_buffer(
            state["features.grid"].to(dtype), config["num_features"], m_bar=config["m_bar"],
            kernel=config["kernel"], grid=config.get("grid", "uniform"),
            eig_floor=config["eig_floor"], gap_tol=config["gap_tol"], dtype=dtype)
        feats.raw_lengthscale.requires_grad_(False)
        z = {k: torch.zeros_like(v, dtype=dtype) for k, v in state.items()}  # shapes only
        return cls(feats, z["scale"], z["gram"], z["proj"], z["yy"], z["w"], z["noise"],
                   n=config["n"])
