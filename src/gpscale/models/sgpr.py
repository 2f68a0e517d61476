"""SGPR: Titsias (2009) variational sparse GP with free, continuous inducing inputs Z.

The continuous competitor of Cao et al. (2013) (standing in for SPGP, their §4.2): Z
and the hyperparameters are optimised jointly by gradients, which needs vector inputs
and a kernel differentiable in them (the discrete kernels are not).

Negative bound (Titsias eq. 9; Cao et al. eq. 5), total nats:

    F = −log N(y | 0, Q + σ²I) + tr(K − Q) / (2σ²),   Q = K_XZ K_ZZ⁻¹ K_ZX,

in O(n m²) via Luu Luuᵀ = K_ZZ, A = Luu⁻¹ K_ZX / σ, LB LBᵀ = B = I + A Aᵀ,
c = LB⁻¹ A y / σ:

    log|Q + σ²I| = n log σ² + 2 Σ log diag LB,   yᵀ(Q + σ²I)⁻¹y = yᵀy/σ² − cᵀc,
    tr(Q) = σ² tr(A Aᵀ).
"""

from __future__ import annotations

import torch
from torch import nn

from ..kernels import Kernel
from ..linalg import robust_cholesky
from ..params import LOG_2PI, Positive, summary
from ..train.result import FitResult
from ..validation import as_matrix, as_test_inputs, check_xy


class SGPR(nn.Module):
    """Sparse variational GP regression with inducing inputs ``Z`` (an nn.Parameter).

    Parameters
    ----------
    kernel : covariance function, differentiable in its inputs.
    X, y : training inputs (n, d) and targets (n,).
    Z : initial inducing inputs (m, d).
    noise : initial noise variance σ².
    learn_z : whether Z is trained.
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(self, kernel: Kernel, X, y, Z, noise: float = 0.1, learn_z: bool = True,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        X, y = check_xy(X, y, dtype, device)
        Z = as_matrix(Z, "Z", dtype, X.device)
        if Z.shape[1] != X.shape[1]:
            raise ValueError(f"Z has {Z.shape[1]} columns but X has {X.shape[1]}")
        self.kernel = kernel.to(dtype=dtype, device=X.device)
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.Z = nn.Parameter(Z.clone(), requires_grad=learn_z)
        self.register_buffer("X", X)
        self.register_buffer("y", y)
        self.to(X.device)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def m(self) -> int:
        return self.Z.shape[0]

    def _terms(self):
        s2 = self.noise
        Luu = robust_cholesky(self.kernel(self.Z))
        A = torch.linalg.solve_triangular(Luu, self.kernel(self.Z, self.X), upper=False)
        A = A / s2.sqrt()
        B = torch.eye(self.m, dtype=A.dtype, device=A.device) + A @ A.mT
        LB = robust_cholesky(B)
        c = torch.linalg.solve_triangular(LB, (A @ self.y)[:, None], upper=False)[:, 0]
        c = c / s2.sqrt()
        return s2, Luu, A, LB, c

    def objective(self) -> torch.Tensor:
        """Negative variational lower bound F ≥ −log p(y) (total nats, differentiable)."""
        s2, _, A, LB, c = self._terms()
        n = self.n
        nlml_q = 0.5 * (n * LOG_2PI + n * torch.log(s2)
                        + 2.0 * torch.log(torch.diagonal(LB)).sum()
                        + (self.y @ self.y) / s2 - c @ c)
        trace = 0.5 * (self.kernel.diag(self.X).sum() / s2 - (A * A).sum())
        return nlml_q + trace

    def elbo(self) -> torch.Tensor:
        """The variational lower bound −F on log p(y)."""
        return -self.objective()

    @torch.no_grad()
    def predict(self, X_new, return_var: bool = False, include_noise: bool = False,
                block: int = 4096):
        """Predictive mean (and variance of f, or of y with ``include_noise``) at X_new:
        μ = K_*Z Luu⁻ᵀ LB⁻ᵀ c,  v = k_** − ‖Luu⁻¹K_Z*‖² + ‖LB⁻¹ Luu⁻¹ K_Z*‖²."""
        Xs = as_test_inputs(X_new, self.X)
        s2, Luu, _, LB, c = self._terms()
        w = torch.linalg.solve_triangular(LB.mT, c[:, None], upper=True)
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s : s + block]
            V = torch.linalg.solve_triangular(Luu, self.kernel(self.Z, Xb), upper=False)
            means.append((V.mT @ w)[:, 0])
            if return_var:
                W = torch.linalg.solve_triangular(LB, V, upper=False)
                var = self.kernel.diag(Xb) - (V * V).sum(0) + (W * W).sum(0)
                var = var.clamp_min(0.0)
                variances.append(var + s2 if include_noise else var)
        mean = torch.cat(means)
        return (mean, torch.cat(variances)) if return_var else mean

    def summary(self) -> str:
        return summary(self)


def kmeans(X: torch.Tensor, m: int, seed: int = 0, iters: int = 25) -> torch.Tensor:
    """m centres by Lloyd's algorithm from m distinct random rows (seeded); empty
    clusters keep their previous centre."""
    gen = torch.Generator().manual_seed(int(seed))
    C = X[torch.randperm(X.shape[0], generator=gen)[:m].to(X.device)].clone()
    for _ in range(iters):
        lab = torch.cdist(X, C).argmin(1)
        counts = torch.bincount(lab, minlength=m).to(X.dtype)
        sums = torch.zeros_like(C).index_add_(0, lab, X)
        new = torch.where(counts[:, None] > 0, sums / counts.clamp_min(1)[:, None], C)
        if torch.equal(new, C):
            break
        C = new
    return C


def fit_sgpr(X, y, kernel: Kernel, m: int, noise: float = 0.1,
             init: str | torch.Tensor = "kmeans", seed: int = 0, max_iter: int = 200,
             learn_z: bool = True, dtype: torch.dtype = torch.float64,
             device: torch.device | str | None = None) -> tuple[SGPR, FitResult]:
    """Fit an :class:`SGPR` with Z and the hyperparameters optimised jointly by L-BFGS.

    ``init``: ``"random"`` (m distinct training inputs), ``"kmeans"`` (Lloyd centres)
    or an (m, d) tensor of initial inducing inputs.
    """
    from ..train.lbfgs import fit_lbfgs

    X, y = check_xy(X, y, dtype, device)
    n = X.shape[0]
    if isinstance(init, str):
        if not isinstance(m, int) or m < 1 or m > n:
            raise ValueError(f"m must be between 1 and n={n}, got {m}")
        if init == "random":
            gen = torch.Generator().manual_seed(int(seed))
            Z = X[torch.randperm(n, generator=gen)[:m].to(X.device)]
        elif init == "kmeans":
            Z = kmeans(X, m, seed)
        else:
            raise ValueError(f"init must be 'random', 'kmeans' or a tensor, got {init!r}")
    else:
        Z = as_matrix(init, "init", dtype, X.device)
    model = SGPR(kernel, X, y, Z, noise=noise, learn_z=learn_z, dtype=dtype, device=X.device)
    result = fit_lbfgs(model, model.objective, max_iter=max_iter, seed=seed, method="sgpr")
    return model, result
