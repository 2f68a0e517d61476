"""Re-weighted eigenfunction kernel in O(p) per evaluation (Evans & Nair 2018, §5).

The re-weighted GRIEF kernel k̃(x, z) = Σᵢ wᵢ φᵢ(x) φᵢ(z) (eq. 16) gives
K̃ = Φ W Φᵀ, W = diag(w) (eq. 17). From A = ΦᵀΦ, r = Φᵀy and yᵀy its LML needs
P = σ² W⁻¹ + A (eq. 18): O(p³) per evaluation (``FeatureGP(weights="diag")``).

§5: with the SVD Φ = Ũ Σ̃ Ṽᵀ (p̃ ≤ min(n, p) non-zero singular values, found here
from the eigendecomposition of the streamed A = Ṽ Σ̃² Ṽᵀ, so Φ is never held), the
transformed basis φ̃ = Σ̃⁻¹ Ṽᵀ φ is orthonormal on the training set: A becomes I,
P diagonal, and with a general diagonal Ã = diag(a) (a = 1 for the paper's
normalised basis, a = Σ̃² for the merely rotated one, ``normalize=False``):

    Dᵢ = σ² + aᵢ wᵢ,   cᵢ = r̃ᵢ² / aᵢ,   ρ = yᵀy − Σᵢ cᵢ   (residual of projecting y)
    −LML = ½ [ρ/σ² + Σᵢ cᵢ/Dᵢ + Σᵢ log Dᵢ + (n − p̃) log σ² + n log 2π]

which is eq. 18 (yᵀ(K̃+σ²I)⁻¹y = σ⁻²(yᵀy − r̃ᵀP⁻¹r̃), log|K̃+σ²I| = log|P| + Σ log wᵢ
+ (n − p̃) log σ²) written with diagonal P = diag(Dᵢ/wᵢ). The p+1 derivatives
(the expressions after eq. 18 with A diagonal) are

    ∂(−LML)/∂wᵢ = ½ aᵢ (1/Dᵢ − cᵢ/Dᵢ²)
    ∂(−LML)/∂σ² = ½ [−ρ/σ⁴ + Σᵢ (1/Dᵢ − cᵢ/Dᵢ²) + (n − p̃)/σ²]

all O(p̃).

Also here: :class:`GriefIPosterior` (the GRIEF-I mixture predictor over MCMC draws)
and :func:`grief_preconditioner` (§4.1, (K̃ + σ²I)⁻¹ for PCG on the exact kernel).
"""

from __future__ import annotations

from typing import Any

import torch

from ..features.grief import GriefFeatures
from ..linalg import robust_eigh, woodbury_factor
from ..params import LOG_2PI
from ..validation import as_matrix
from .base import GPModel, MeanAndVariance, dtype_name
from .grief_eigen import draws_summary


class _OrthNLML(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, noise, model):  # noqa: D102
        value, g_w, g_noise = model.nlml_and_grad(w, noise)
        ctx.save_for_backward(g_w, g_noise)
        return value

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        g_w, g_noise = ctx.saved_tensors
        return g * g_w, g * g_noise, None


class OrthogonalGrief:
    """Rotated sufficient statistics of a feature GP, for O(p) LML evaluations of the
    re-weighted kernel Φ̃ W Φ̃ᵀ + σ²I in the orthogonalised basis of §5.

    Build it with :meth:`from_statistics` (ΦᵀΦ, Φᵀy, yᵀy, n — e.g. from
    ``FeatureGP.statistics()``). ``normalize=True`` is the paper's basis
    φ̃ = Σ̃⁻¹Ṽᵀφ (ΦᵀΦ → I); ``False`` keeps φ̃ = Ṽᵀφ (ΦᵀΦ → Σ̃², so w = 1 is the
    un-weighted kernel ΦΦᵀ). Directions with σ̃² ≤ ``rtol``·σ̃²_max (round-off level
    in the eigenvalues of ΦᵀΦ) are dropped: p̃ ≤ min(n, p).
    """

    def __init__(self, V: torch.Tensor, sv2: torch.Tensor, r: torch.Tensor,
                 yy: torch.Tensor, n: int, normalize: bool = True) -> None:
        self.V, self.sv2, self.n, self.normalize = V, sv2, int(n), normalize
        self.a = torch.ones_like(sv2) if normalize else sv2
        self.r = r / sv2.sqrt() if normalize else r  # r̃ = Φ̃ᵀy
        self.c = self.r * self.r / self.a
        self.resid = (yy - self.c.sum()).clamp_min(0.0)

    @classmethod
    def from_statistics(
        cls, gram: torch.Tensor, proj: torch.Tensor, yy: torch.Tensor, n: int,
        normalize: bool = True, rtol: float = 1e-12,
    ) -> OrthogonalGrief:
        """One O(p³) eigendecomposition ΦᵀΦ = Ṽ Σ̃² Ṽᵀ (the SVD of Φ without Φ)."""
        gram, proj = gram.detach(), proj.detach()
        sv2, V = robust_eigh(0.5 * (gram + gram.mT))
        keep = sv2 > rtol * sv2.max().clamp_min(torch.finfo(sv2.dtype).tiny)
        sv2, V = sv2[keep], V[:, keep]
        return cls(V, sv2, V.mT @ proj, torch.as_tensor(yy, dtype=gram.dtype,
                                                          device=gram.device), n, normalize)

    @property
    def rank(self) -> int:
        """p̃, the number of basis functions kept."""
        return self.sv2.shape[0]

    def transform(self, phi: torch.Tensor) -> torch.Tensor:
        """Φ̃ = Φ Ṽ Σ̃⁻¹ (or Φ Ṽ): features in the orthogonalised basis."""
        out = phi @ self.V
        return out / self.sv2.sqrt() if self.normalize else out

    def scalar_weights(self, s: float | torch.Tensor) -> torch.Tensor:
        """Weights w̃ with Φ̃ diag(w̃) Φ̃ᵀ = s ΦΦᵀ on the kept subspace (GRIEF-II's
        kernel, W = s I, expressed in the rotated basis)."""
        s = torch.as_tensor(s, dtype=self.sv2.dtype, device=self.sv2.device)
        return s * self.sv2 / self.a

    def _check(self, w: torch.Tensor, noise: torch.Tensor) -> None:
        if w.shape[-1] != self.rank:
            raise ValueError(f"w has {w.shape[-1]} weights; this basis has rank {self.rank}")

    @torch.no_grad()
    def nlml_and_grad(
        self, w: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(−LML, ∂/∂w, ∂/∂σ²) in O(p̃) (module docstring; eq. 18 and its derivatives)."""
        w = torch.as_tensor(w, dtype=self.a.dtype, device=self.a.device)
        noise = torch.as_tensor(noise, dtype=self.a.dtype, device=self.a.device)
        self._check(w, noise)
        D = noise + self.a * w
        inv_D = 1.0 / D
        cD = self.c * inv_D
        m = self.n - self.rank
        value = 0.5 * (self.resid / noise + cD.sum() + torch.log(D).sum()
                       + m * torch.log(noise) + self.n * LOG_2PI)
        t = inv_D - cD * inv_D  # 1/Dᵢ − cᵢ/Dᵢ²
        g_w = 0.5 * self.a * t
        g_noise = 0.5 * (-self.resid / (noise * noise) + t.sum() + m / noise)
        return value, g_w, g_noise

    def nlml(self, w: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """−LML, differentiable in w and σ² with the analytic O(p̃) gradients."""
        noise = torch.as_tensor(noise, dtype=self.a.dtype, device=self.a.device)
        return _OrthNLML.apply(w, noise, self)

    @torch.no_grad()
    def predict(
        self, phi_new: torch.Tensor, w: torch.Tensor, noise: torch.Tensor,
        include_noise: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and variance at new points from their features Φ* (un-rotated):
        the weight posterior is N(w r̃ / D, σ² w / D) elementwise, so
        mean = Φ̃* (w r̃ / D), var = σ² Σᵢ Φ̃*ᵢ² wᵢ / Dᵢ (+ σ²)."""
        w = torch.as_tensor(w, dtype=self.a.dtype, device=self.a.device)
        noise = torch.as_tensor(noise, dtype=self.a.dtype, device=self.a.device)
        pt = self.transform(phi_new)
        D = noise + self.a * w
        mean = pt @ (w * self.r / D)
        var = noise * (pt * pt) @ (w / D)
        return mean, (var + noise if include_noise else var)


class GriefIPosterior(GPModel):
    """GP-GRIEF-I predictive model: the MCMC draws (wₛ, σ²ₛ) of the re-weighted kernel
    s₀ Φ̃ diag(w) Φ̃ᵀ (basis rotated as in §5, ``OrthogonalGrief(normalize=False)`` on
    √s₀ Φ, so w = 1 is the initialised GRIEF kernel), averaged as a Gaussian mixture:
    mean = (1/S) Σₛ μₛ, var = (1/S) Σₛ (vₛ + μₛ²) − mean².

    A module whose buffers hold everything prediction needs (the rotation, r̃, the
    draws and, when given, the training inputs the grid was built from), so that it
    saves and loads through its ``state_dict``.
    """

    def __init__(self, features, scale: torch.Tensor, V: torch.Tensor, sv2: torch.Tensor,
                 r: torch.Tensor, w: torch.Tensor, noise: torch.Tensor,
                 normalize: bool = False, X: torch.Tensor | None = None,
                 n: int | None = None) -> None:
        super().__init__()
        self.features, self.normalize = features, bool(normalize)
        self.register_buffer("scale", torch.as_tensor(scale, dtype=w.dtype, device=w.device))
        self.register_buffer("V", V)  # rotation Ṽ (p × p̃)
        self.register_buffer("sv2", sv2)  # σ̃², the kept eigenvalues of ΦᵀΦ
        self.register_buffer("r", r)  # r̃ = Φ̃ᵀy
        self.register_buffer("w", w)  # (S, p̃) weight draws
        self.register_buffer("noise", noise)  # (S,) σ² draws
        self.register_buffer("X", X)  # training inputs, while training (not saved)
        self._n = int(n) if n is not None else None if X is None else int(X.shape[0])

    @classmethod
    def from_orthogonal(cls, features, scale: torch.Tensor, orth: OrthogonalGrief,
                        w: torch.Tensor, noise: torch.Tensor,
                        X: torch.Tensor | None = None) -> GriefIPosterior:
        """The posterior over draws (w, σ²) in the basis of ``orth`` (n = ``orth.n``);
        ``X``: the training inputs, kept while training when they are in memory."""
        return cls(features, scale, orth.V, orth.sv2, orth.r, w, noise, orth.normalize, X,
                   n=orth.n)

    @property
    def n(self) -> int | None:
        return self._n

    def freeze(self) -> GriefIPosterior:
        """Nothing to let go of: the posterior holds Φ̃ᵀy and the draws, never rows read
        from a source (``gpscale.fit`` calls this after training on one)."""
        return self

    @property
    def num_samples(self) -> int:
        return self.w.shape[0]

    @property
    def rank(self) -> int:
        """p̃, the number of rotated basis functions."""
        return self.w.shape[1]

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Mean over the draws of the NLML of ``data=(X, y)``, the training data (the model
        keeps Φ̃ᵀy, not the rows). The rotated basis is orthogonal, Φ̃ᵀΦ̃ = diag(a), so with
        Dᵢ = σ² + aᵢwᵢ: NLML = ½[(yᵀy − Σ r̃ᵢ² wᵢ/Dᵢ)/σ² + (n − p̃) log σ² + Σ log Dᵢ
        + n log 2π]."""
        if data is None:
            raise ValueError("GriefIPosterior.objective needs data=(X, y), the training data")
        y = torch.as_tensor(data[1], dtype=self.w.dtype, device=self.w.device).reshape(-1)
        n, p = y.shape[0], self.rank
        a = torch.ones_like(self.sv2) if self.normalize else self.sv2
        noise = self.noise[:, None]
        D = noise + a * self.w  # (S, p̃)
        quad = (y @ y - (self.r**2 * self.w / D).sum(1)) / self.noise
        logdet = (n - p) * torch.log(self.noise) + torch.log(D).sum(1)
        return (0.5 * (quad + logdet + n * LOG_2PI)).mean()

    @torch.no_grad()
    def predict(self, X_new: torch.Tensor, *, include_noise: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """Mixture mean and variance at ``X_new`` over all kept samples."""
        X_new = as_matrix(X_new, "X_new", self.w.dtype, self.w.device)
        a = torch.ones_like(self.sv2) if self.normalize else self.sv2
        means, variances = [], []
        for s in range(0, X_new.shape[0], block):
            phi = self.features(X_new[s : s + block]) * self.scale.sqrt()
            pt = phi @ self.V
            pt = pt / self.sv2.sqrt() if self.normalize else pt
            D = self.noise[:, None] + a * self.w  # (S, p̃)
            mu = (self.w * self.r / D) @ pt.mT  # (S, b)
            var = self.noise[:, None] * ((self.w / D) @ (pt * pt).mT)
            if include_noise:
                var = var + self.noise[:, None]
            mean = mu.mean(0)
            means.append(mean)
            variances.append(((var + mu * mu).mean(0) - mean * mean).clamp_min(0.0))
        return MeanAndVariance(torch.cat(means), torch.cat(variances))

    def summary(self) -> str:
        return draws_summary(self, f"rank p̃ = {self.rank}")

    # -- persistence: draws, rotation and the grid; never the training rows -------------
    def to_config(self) -> dict[str, Any]:
        f = self.features
        return {"dtype": dtype_name(self.w), "num_features": f.num_features,
                "kernel": f.kernel, "m_bar": f.m_bar, "grid": f.grid_kind,
                "eig_floor": f.eig_floor, "gap_tol": f.gap_tol, "normalize": self.normalize,
                "n": self.n}

    def saved_state(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if k != "X"}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Any = None) -> GriefIPosterior:
        dtype = getattr(torch, str(config["dtype"]))
        feats = GriefFeatures.from_grid_buffer(
            state["features.grid"].to(dtype), config["num_features"], m_bar=config["m_bar"],
            kernel=config["kernel"], grid=config.get("grid", "uniform"),
            eig_floor=config["eig_floor"], gap_tol=config["gap_tol"], dtype=dtype)
        feats.raw_lengthscale.requires_grad_(False)
        z = {k: torch.zeros_like(v, dtype=dtype) for k, v in state.items()}  # shapes only
        X = state["X"].to(dtype) if "X" in state else None  # files of format version 1
        post = cls(feats, z["scale"], z["V"], z["sv2"], z["r"], z["w"], z["noise"],
                   normalize=config["normalize"], X=X)
        post._n = config.get("n", post._n)
        return post


def grief_preconditioner(
    features, X: torch.Tensor, noise: float | torch.Tensor,
    outputscale: float | torch.Tensor = 1.0,
):
    """Apply (K̃ + σ²I)⁻¹, K̃ = s ΦΦᵀ the GRIEF approximation of s·k on X, by Woodbury
    (§4.1): v ↦ σ⁻²(v − Φ (ΦᵀΦ + σ²/s I)⁻¹ Φᵀ v). One O(n p² + p³) set-up, then
    O(n p) per application; a preconditioner for CG solves with the exact K + σ²I
    (``gpscale.linalg.cg(..., precond=...)``)."""
    with torch.no_grad():
        phi = features(X)
        dtype, device = phi.dtype, phi.device
        noise = torch.as_tensor(noise, dtype=dtype, device=device)
        s = torch.as_tensor(outputscale, dtype=dtype, device=device)
        L = woodbury_factor(phi.mT @ phi, noise, s.reshape(1))

    def apply(V: torch.Tensor) -> torch.Tensor:
        inner = torch.cholesky_solve(phi.mT @ V if V.ndim > 1 else (phi.mT @ V)[:, None], L)
        out = (V if V.ndim > 1 else V[:, None]) - phi @ inner
        out = out / noise
        return out if V.ndim > 1 else out[:, 0]

    return apply
