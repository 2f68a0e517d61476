"""Sparse GP on a subset of the training points (Cao, Brubaker, Fleet & Hertzmann 2013).

The inducing set I ⊂ {0, …, n−1} (m indices) gives the Nyström approximation
K̂ = K[:, I] K[I, I]⁻¹ K[I, :] = L Lᵀ (eqs. 3, 6), L the partial Cholesky factor with
pivots I. With L̃ = [L; σ I_m] = Q R (thin QR) and ỹ = [y; 0] the objectives are, in
nats and summed over the n points (not per point):

- ``"dtc"`` (DTC / PP, eq. 4): E = ½ (E_D + E_C) + (n/2) log 2π, the negative log
  marginal likelihood −log N(y | 0, K̂ + σ²I);
- ``"vfe"`` (Titsias, eq. 5):  F = ½ (E_D + E_C + E_V) + (n/2) log 2π, the negative
  variational lower bound on log p(y);

with E_D = σ⁻² (‖y‖² − ‖Qᵀỹ‖²) (eq. 11), E_C = (n − m) log σ² + 2 log |R| (eq. 12),
E_V = σ⁻² (tr K − ‖L‖²_F) (eq. 9). The constant (n/2) log 2π makes ``"dtc"`` at
m = n equal the exact GP's NLML. Cost O(m²n) time, O(mn) memory; no n × n matrix.
"""

from __future__ import annotations

from typing import Any

import torch

from ..kernels import Kernel
from ..kernels.base import cross_matrix
from ..kernels.memo import InputMemo
from ..linalg import robust_cholesky
from ..linalg.pivchol import check_pivots
from ..params import Positive, summary
from ..validation import as_test_inputs, check_positive, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data
from .vfe_bound import VFEBound

OBJECTIVES = ("vfe", "dtc")


def check_inducing(inducing, n: int, name: str = "inducing") -> torch.Tensor:
    """``inducing`` as a LongTensor of 1 ≤ m ≤ n distinct indices in [0, n)."""
    if isinstance(inducing, torch.Tensor) and inducing.ndim != 1:
        raise ValueError(f"{name} must be a 1-D tensor of indices, got shape "
                         f"{tuple(inducing.shape)}")
    idx = check_pivots(inducing, n, name)  # distinct indices in [0, n): m <= n
    return torch.tensor(idx, dtype=torch.long)


class SparseGP(GPModel):
    """DTC / VFE sparse GP whose inducing points are the training points ``inducing``.

    Parameters
    ----------
    kernel : covariance function k (any :class:`Kernel`, also on discrete inputs).
    X, y : training inputs (n, d) and targets (n,).
    inducing : LongTensor (or list) of m distinct training indices, the set I.
    noise : initial noise variance σ².
    objective : ``"vfe"`` (Titsias bound, eq. 5) or ``"dtc"`` (PP / DTC, eq. 4).
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(self, kernel: Kernel, X, y, inducing, noise: float = 0.1,
                 objective: str = "vfe", dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        objective = "dtc" if objective == "pp" else objective
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be 'vfe' or 'dtc', got {objective!r}")
        X, y = check_xy(X, y, dtype, device)
        check_positive("noise", noise)
        self.kernel = kernel.to(dtype=dtype, device=X.device)
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.objective_kind = objective
        self.register_buffer("X", X)
        self.register_buffer("y", y)
        self.register_buffer("inducing", check_inducing(inducing, X.shape[0]).to(X.device))
        self._cache: tuple[Any, ...] | None = None
        self._Z = InputMemo()
        self.to(X.device)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def m(self) -> int:
        return self.inducing.shape[0]

    @property
    def Z(self) -> torch.Tensor:
        """The inducing inputs X[I]: the same tensor object while neither X nor I
        changes, so kernels that cache work per input (the discrete kernels) reuse the
        K(X, Z) reduction across hyperparameter evaluations."""
        return self._Z.get((self.X, self.inducing), lambda: self.X[self.inducing])

    def set_inducing(self, inducing) -> None:
        """Replace the inducing set I (validated; same rules as the constructor)."""
        idx = check_inducing(inducing, self.n).to(self.X.device)
        if idx.shape == self.inducing.shape:
            self.inducing.copy_(idx)
        else:
            self.inducing = idx
        self._cache = None

    # -- objective ---------------------------------------------------------------------
    def factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(L, L_I, K[:, I]): L (n × m) is the partial Cholesky factor with pivots I
        (eq. 6), computed blockwise as K[:, I] L_I⁻ᵀ with L_I = chol K[I, I] (unique, so
        equal to the column-by-column factor); differentiable in the hyperparameters."""
        K_nI = self.kernel(self.X, self.Z)
        L_I = robust_cholesky(K_nI[self.inducing])
        L = torch.linalg.solve_triangular(L_I, K_nI.mT, upper=False).mT
        return L, L_I, K_nI

    def terms(self, qr: bool = False) -> dict[str, torch.Tensor]:
        """E_D, E_C, E_V of eqs. (9), (11), (12), the paper's decomposition of the
        objective (differentiable by autograd; :meth:`objective` does not use it: the
        tests hold the two equal). R is the triangular factor of
        L̃ = [L; σI] = QR; by default it is computed as the Cholesky factor of
        L̃ᵀL̃ = LᵀL + σ²I (the Woodbury form of eqs. 7–8: the same R, and Qᵀỹ = R⁻ᵀLᵀy),
        cheaper than a Householder QR under autograd; ``qr=True`` uses
        ``torch.linalg.qr`` of L̃ itself. Both are O(m²n)."""
        L, _, _ = self.factors()
        s2 = self.noise
        eye = torch.eye(self.m, dtype=L.dtype, device=L.device)
        if qr:
            Q, R = torch.linalg.qr(torch.cat([L, s2.sqrt() * eye], 0), mode="reduced")
            qy = Q[: self.n].mT @ self.y
        else:
            R = robust_cholesky(L.mT @ L + s2 * eye).mT
            qy = torch.linalg.solve_triangular(R.mT, (L.mT @ self.y)[:, None],
                                               upper=False)[:, 0]
        E_D = (self.y @ self.y - qy @ qy) / s2
        E_C = (self.n - self.m) * torch.log(s2) + torch.log(torch.diagonal(R) ** 2).sum()
        E_V = (self.kernel.diag(self.X).sum() - (L * L).sum()) / s2
        return {"E_D": E_D, "E_C": E_C, "E_V": E_V}

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The quantity CholQR minimises, in nats, total over the n points:
        ``"dtc"``: −log N(y | 0, K̂ + σ²I) = ½(E_D + E_C) + (n/2) log 2π (eq. 4);
        ``"vfe"``: the negative Titsias bound ½(E_D + E_C + E_V) + (n/2) log 2π (eq. 5).
        Differentiable in the kernel hyperparameters and σ²; O(m²n), no n × n matrix.

        Evaluated by SGPR's bound with Z = X[I] (:class:`~.vfe_bound.VFEBound`, ``trace``
        off for DTC), whose gradient is written out: autograd's backward through
        :meth:`terms` was half of a CholQR epoch (benchmarks/results/cholqr-profile).
        K_ZZ is taken as the columns I of K_ZX, the same numbers :meth:`factors` uses."""
        no_data(self, data)
        P = self._cross()
        return VFEBound.apply(P, P[:, self.inducing], self.noise,
                              self.kernel.diag(self.X).sum(), self.y,
                              self.objective_kind == "vfe")

    def _cross(self) -> torch.Tensor:
        """K_ZX = K[I, :] (m × n), evaluated as K(X, Z) like :meth:`factors` and the
        swaps, so a discrete kernel's memo of K(X, ·) serves all of them. A gpscale
        :class:`Kernel` differentiates it by its own contraction
        (:func:`~gpscale.kernels.base.cross_matrix`, no autograd graph of the n × m
        matrix); any other module callable as a kernel, and inputs that require grad
        (cross_matrix differentiates its first argument only, and Z = X[I] is both), by
        autograd."""
        if isinstance(self.kernel, Kernel) and not self.X.requires_grad:
            return cross_matrix(self.kernel, self.X, self.Z).mT
        return self.kernel(self.X, self.Z).mT

    def nlml(self) -> torch.Tensor:
        """Alias of :meth:`objective` (what generic trainers minimise)."""
        return self.objective()

    # -- prediction --------------------------------------------------------------------
    def _predictive_factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        key = (tuple(p._version for p in self.parameters()), self.inducing._version,
               id(self.inducing), id(self.X), self.X._version)
        if self._cache is None or self._cache[0] != key:
            with torch.no_grad():
                L, L_I, _ = self.factors()
                eye = torch.eye(self.m, dtype=L.dtype, device=L.device)
                Q, R = torch.linalg.qr(torch.cat([L, self.noise.sqrt() * eye], 0))
                s = torch.where(torch.diagonal(R) < 0, -1.0, 1.0).to(R.dtype)
                Q, R = Q * s, R * s[:, None]
                qy = Q[: self.n].mT @ self.y
                beta = torch.linalg.solve_triangular(R, qy[:, None], upper=True)[:, 0]
            self._cache = (key, L_I, R, beta)
        return self._cache[1], self._cache[2], self._cache[3]

    @torch.no_grad()
    def predict(self, Xstar, *, include_noise: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """DTC/VFE predictive distribution of the latent f at ``Xstar`` (identical for
        both objectives). With a_* = L_I⁻¹ K[I, *] and β = R⁻¹ Qᵀỹ:

        mean_* = a_*ᵀ β,   var_* = k(x_*, x_*) − ‖a_*‖² + σ² ‖R⁻ᵀ a_*‖²,

        i.e. K_*I (σ²K_II + K_In K_nI)⁻¹ K_In y and k_** − Q_** + σ² K_*I (σ²K_II +
        K_In K_nI)⁻¹ K_I*. ``include_noise=True`` adds σ² (the variance of a new
        observation y_* rather than of f_*).
        """
        Xs = as_test_inputs(Xstar, self.X)
        L_I, R, beta = self._predictive_factors()
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s : s + block]
            A = torch.linalg.solve_triangular(L_I, self.kernel(self.Z, Xb), upper=False)
            means.append(A.mT @ beta)
            B = torch.linalg.solve_triangular(R.mT, A, upper=False)
            var = (self.kernel.diag(Xb) - (A * A).sum(0)
                   + self.noise * (B * B).sum(0)).clamp_min(0.0)
            variances.append(var + self.noise if include_noise else var)
        return MeanAndVariance(torch.cat(means), torch.cat(variances))

    def summary(self) -> str:
        return (f"SparseGP ({self.objective_kind}), n = {self.n}, m = {self.m} inducing "
                f"training points\n" + summary(self))

    # -- persistence: X, y and the inducing indices travel in the state_dict -----------
    def to_config(self) -> dict[str, Any]:
        return {"objective": self.objective_kind, "dtype": dtype_name(self.X)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> SparseGP:
        return cls(kernel, state["X"], state["y"], state["inducing"],
                   objective=config["objective"], dtype=getattr(torch, str(config["dtype"])))
