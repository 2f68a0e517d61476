"""FITC / SPGP: Snelson & Ghahramani's (2006) sparse GP with free pseudo-inputs Z.

The continuous competitor of Cao et al. (2013), §4.2 and Figs. 4–5: Z, the kernel's
hyperparameters and σ² are learned jointly on the FITC marginal likelihood (Snelson &
Ghahramani, eq. 8), the exact likelihood of the model

    y ~ N(0, Q + Λ),   Q = K_XZ K_ZZ⁻¹ K_ZX,   Λ = diag(K_XX − Q) + σ²I.

Computed in O(n m²), never an n × n matrix, with Luu Luuᵀ = K_ZZ, V = Luu⁻¹K_ZX,
λ = diag(K_XX) − Σ_rows V² + σ², A = V Λ^{-1/2}, LB LBᵀ = B = I + A Aᵀ,
c = LB⁻¹ V Λ⁻¹ y (matrix determinant lemma and Woodbury):

    log|Q + Λ| = Σ log λ + 2 Σ log diag LB,   yᵀ(Q + Λ)⁻¹y = yᵀΛ⁻¹y − cᵀc.

The predictive distribution (Snelson & Ghahramani, eq. 9), with Σ = (K_ZZ + K_ZX Λ⁻¹ K_XZ)⁻¹
= Luu⁻ᵀ B⁻¹ Luu⁻¹:

    μ* = K_*Z Σ K_ZX Λ⁻¹ y = K_*Z Luu⁻ᵀ LB⁻ᵀ c,
    σ*² = k_** − Q_** + K_*Z Σ K_Z* (+ σ² for y),

the same algebra as SGPR's posterior with A weighted by Λ^{-1/2} instead of 1/σ.
Gradients by autograd through this O(n m²) forward, which keeps its cost.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..kernels import Kernel
from ..kernels.base import cross_matrix
from ..linalg import robust_cholesky
from ..params import LOG_2PI, Positive
from ..validation import as_matrix, as_test_inputs, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data
from .sgpr_stats import posterior

__all__ = ["FITC", "fitc_factors", "fitc_nlml"]


def _lower_solve(L: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    return torch.linalg.solve_triangular(L, B, upper=False)


def fitc_factors(P: torch.Tensor, Kzz: torch.Tensor, kdiag: torch.Tensor,
                 noise: torch.Tensor, y: torch.Tensor):
    """(Luu, lam, LB, c) of the module doc from P = K_ZX (m × n), K_ZZ, diag K_XX, σ², y,
    in O(n m²); differentiable by autograd."""
    Luu = robust_cholesky(Kzz)
    V = _lower_solve(Luu, P)
    # diag(K − Q) ≥ 0 in exact arithmetic; rounding may make it a hair negative
    lam = (kdiag - (V * V).sum(0)).clamp_min(0.0) + noise
    A = V / lam.sqrt()
    B = torch.eye(P.shape[0], dtype=P.dtype, device=P.device) + A @ A.mT
    LB = robust_cholesky(B)
    c = _lower_solve(LB, (V @ (y / lam))[:, None])[:, 0]
    return Luu, lam, LB, c


def fitc_nlml(P: torch.Tensor, Kzz: torch.Tensor, kdiag: torch.Tensor, noise: torch.Tensor,
              y: torch.Tensor) -> torch.Tensor:
    """−log N(y | 0, Q + Λ) in total nats (Snelson & Ghahramani eq. 8), O(n m²)."""
    _, lam, LB, c = fitc_factors(P, Kzz, kdiag, noise, y)
    return 0.5 * (y.shape[0] * LOG_2PI + torch.log(lam).sum()
                  + 2.0 * torch.log(torch.diagonal(LB)).sum() + (y * y / lam).sum() - c @ c)


class FITC(GPModel):
    """SPGP / FITC regression with pseudo-inputs ``Z`` (an nn.Parameter).

    Parameters
    ----------
    kernel : covariance function, differentiable in its inputs when Z is learned.
    X, y : training inputs (n, d) and targets (n,).
    Z : initial pseudo-inputs (m, d), m ≤ n.
    noise : initial noise variance σ² (> 0).
    learn_z : whether Z is trained.
    """

    title = "FITC / SPGP (Snelson & Ghahramani 2006)"
    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(self, kernel: Kernel, X, y, Z, noise: float = 0.1, learn_z: bool = True,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        X, y = check_xy(X, y, dtype, device)
        Z = as_matrix(Z, "Z", dtype, X.device)
        if Z.shape[1] != X.shape[1]:
            raise ValueError(f"Z has {Z.shape[1]} columns but X has {X.shape[1]}; give "
                             "pseudo-inputs in the space of X")
        if Z.shape[0] > X.shape[0]:
            raise ValueError(f"Z has {Z.shape[0]} pseudo-inputs but there are only "
                             f"{X.shape[0]} training rows; use m <= n (m = n is the exact "
                             "GP at Z = X)")
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

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The FITC negative log marginal likelihood (total nats, differentiable in Z,
        the kernel's hyperparameters and σ²; Snelson & Ghahramani eq. 8)."""
        no_data(self, data)
        return fitc_nlml(cross_matrix(self.kernel, self.Z, self.X), self.kernel(self.Z),
                         self.kernel.diag(self.X), self.noise, self.y)

    def nlml(self) -> torch.Tensor:
        """The same as :meth:`objective`: FITC's objective is its model's exact NLML."""
        return self.objective()

    def _predictive_state(self):
        """(σ², Luu, LB, w = LB⁻ᵀc): the O(n m²) training side of the predictions,
        computed once per parameter values."""
        key = tuple((id(t), t._version) for t in (*self.parameters(), self.X, self.y))
        if getattr(self, "_state_key", None) != key:
            Luu, _, LB, c = fitc_factors(self.kernel(self.Z, self.X), self.kernel(self.Z),
                                         self.kernel.diag(self.X), self.noise, self.y)
            w = torch.linalg.solve_triangular(LB.mT, c[:, None], upper=True)
            self._state, self._state_key = (self.noise, Luu, LB, w), key
        return self._state

    @torch.no_grad()
    def predict(self, X_new, *, include_noise: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """FITC predictive mean and variance of f (of y with ``include_noise``) at X_new
        (Snelson & Ghahramani eq. 9): μ = K_*Z Luu⁻ᵀ LB⁻ᵀ c,
        v = k_** − ‖Luu⁻¹K_Z*‖² + ‖LB⁻¹ Luu⁻¹ K_Z*‖²."""
        Xs = as_test_inputs(X_new, self.X)
        s2, Luu, LB, w = self._predictive_state()
        return posterior(self.kernel, self.Z, (Luu, LB, w), Xs, s2, include_noise, block)

    # -- persistence: X, y and Z travel in the state_dict ---------------------------------
    def to_config(self) -> dict[str, Any]:
        return {"learn_z": bool(self.Z.requires_grad), "dtype": dtype_name(self.X)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> FITC:
        return cls(kernel, state["X"], state["y"], state["Z"], learn_z=config["learn_z"],
                   dtype=getattr(torch, str(config["dtype"])))
