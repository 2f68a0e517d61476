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

from typing import Any

import torch
from torch import nn

from ..kernels import Kernel
from ..kernels.base import cross_matrix
from ..params import Positive
from ..validation import as_matrix, as_test_inputs, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data
from .sgpr_stats import posterior
from .vfe_bound import VFEBound, factors


class TitsiasModel:
    """What :class:`SGPR` and :class:`~gpscale.models.StreamedSGPR` share, one model
    (Titsias 2009) whose rows are read two ways (held, or summed in passes): the bound's
    sign and the posterior from (Luu, LB, w). A model gives ``kernel``, ``Z``,
    ``objective()`` (the negative bound) and ``_posterior()`` -> (σ², (Luu, LB, w))."""

    @property
    def m(self) -> int:
        return self.Z.shape[0]

    def elbo(self) -> torch.Tensor:
        """The variational lower bound −F on log p(y)."""
        return -self.objective()

    @torch.no_grad()
    def predict(self, X_new, *, include_noise: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """Predictive mean (and variance of f, or of y with ``include_noise``) at X_new
        (Titsias eq. 6; :func:`~gpscale.models.sgpr_stats.posterior`):
        μ = K_*Z Luu⁻ᵀ LB⁻ᵀ c,  v = k_** − ‖Luu⁻¹K_Z*‖² + ‖LB⁻¹ Luu⁻¹ K_Z*‖²."""
        Xs = as_test_inputs(X_new, self.Z)
        noise, factors = self._posterior()
        return posterior(self.kernel, self.Z, factors, Xs, noise, include_noise, block)


class SGPR(TitsiasModel, GPModel):
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

    @torch.no_grad()
    def _posterior(self):
        """(σ², (Luu, LB, w = LB⁻ᵀc)): the O(n m²) training side of the predictions,
        computed once per parameter values (``gpscale predict`` calls predict once per
        batch of rows)."""
        key = tuple((id(t), t._version) for t in (*self.parameters(), self.X, self.y))
        if getattr(self, "_state_key", None) != key:
            Luu, _, _, LB, c = factors(self.kernel(self.Z, self.X), self.kernel(self.Z),
                                       self.noise, self.y)
            w = torch.linalg.solve_triangular(LB.mT, c[:, None], upper=True)
            self._state, self._state_key = (self.noise, (Luu, LB, w)), key
        return self._state

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Negative variational lower bound F ≥ −log p(y) (total nats, differentiable;
        the linear algebra's gradient is written out in :mod:`.vfe_bound`)."""
        no_data(self, data)
        return VFEBound.apply(cross_matrix(self.kernel, self.Z, self.X), self.kernel(self.Z),
                              self.noise, self.kernel.diag(self.X).sum(), self.y)

    # -- persistence: X, y and Z travel in the state_dict ---------------------------------
    def to_config(self) -> dict[str, Any]:
        return {"learn_z": bool(self.Z.requires_grad), "dtype": dtype_name(self.X)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> SGPR:
        return cls(kernel, state["X"], state["y"], state["Z"], learn_z=config["learn_z"],
                   dtype=getattr(torch, str(config["dtype"])))
