"""Stochastic variational GP (SVGP; Hensman, Fusi & Lawrence 2013; Hensman, Matthews &
Ghahramani 2015), Gaussian likelihood.

m inducing locations Z with u = f(Z), prior p(u) = N(0, K_zz), variational
q(u) = N(m_u, S_u). Whitened (default): u = L_zz v, q(v) = N(m, S), p(v) = N(0, I);
unwhitened: q(u) = N(m, S) directly. S = L Lᵀ, L lower-triangular with a softplus
diagonal. With A = L_zz⁻¹ K_zx (m x b) and B = A (whitened) or B = L_zz⁻ᵀ A
(= K_zz⁻¹ K_zx, unwhitened), the marginals of q(f) = ∫ p(f | u) q(u) du are

    μ_i = B_iᵀ m,    s_i = k(x_i, x_i) − ‖A_i‖² + ‖Lᵀ B_i‖²                 (H13 eq. 7)

and the evidence lower bound on a minibatch 𝓑 (an unbiased estimate of the full one)

    ELBO = (n/|𝓑|) Σ_{i∈𝓑} E_q[log N(y_i | f_i, σ²)] − KL(q ‖ p),
    E_q[log N(y_i | f_i, σ²)] = −½ log 2πσ² − [(y_i − μ_i)² + s_i] / (2σ²)       (H15 eq. 4)
    KL = ½[tr(P⁻¹S) + mᵀP⁻¹m − m_z + log|P| − log|S|],  P = I or K_zz.

Cost O(m³ + b m²) per minibatch; nothing of size n is ever formed. A relative
``jitter`` is added to K_zz's diagonal (u = f(Z) + ε, a proper joint Gaussian, so the
ELBO stays a lower bound on the exact log marginal likelihood).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.nn.functional import softplus

from ..features.kernel import FeatureKernel
from ..kernels import Kernel
from ..linalg import robust_cholesky
from ..params import LOG_2PI, Positive, inv_softplus
from ..validation import as_matrix
from .base import GPModel, MeanAndVariance, dtype_name

#: floor on the diagonal of the variational Cholesky factor L
Q_FLOOR = 1e-10


class SVGP(GPModel):
    """Sparse variational GP with m learnable inducing locations ``Z`` (m, d).

    Parameters
    ----------
    kernel : covariance function k (its parameters are trained with the ELBO).
    Z : initial inducing locations (m, d), learnable.
    num_data : n, the number of training rows (scales the minibatch likelihood term).
    noise : initial Gaussian noise variance σ².
    whiten : parameterise q over v = L_zz⁻¹ u (default; better conditioned).
    jitter : added to K_zz's diagonal, relative to its mean diagonal.

    q starts at the prior: m = 0 and S = I (whitened) or S = K_zz (unwhitened).
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(self, kernel: Kernel, Z, num_data: int, noise: float = 0.1,
                 whiten: bool = True, jitter: float = 1e-8,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        Z = as_matrix(Z, "Z", dtype, device)
        if isinstance(num_data, bool) or int(num_data) != num_data or num_data < 1:
            raise ValueError(f"num_data must be a positive integer, got {num_data!r}")
        if not (jitter >= 0 and jitter < 1):
            raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
        m = Z.shape[0]
        self.kernel = kernel.to(dtype=dtype, device=Z.device)
        self.Z = nn.Parameter(Z.clone())
        self.num_data, self.whiten, self.jitter = int(num_data), bool(whiten), float(jitter)
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.q_mu = nn.Parameter(torch.zeros(m, dtype=dtype, device=Z.device))
        self.q_sqrt_raw = nn.Parameter(torch.zeros(m, m, dtype=dtype, device=Z.device))
        self.to(Z.device)
        with torch.no_grad():
            chol = (torch.eye(m, dtype=dtype, device=Z.device) if self.whiten
                    else self.prior_chol())
            self.set_q(torch.zeros(m, dtype=dtype, device=Z.device), chol=chol)

    @property
    def num_inducing(self) -> int:
        return self.Z.shape[0]

    @property
    def n(self) -> int:
        return self.num_data

    # -- variational parameters -----------------------------------------------------
    def q_chol(self) -> torch.Tensor:
        """L with S = L Lᵀ: strictly lower part free, diagonal Q_FLOOR + softplus(raw)."""
        raw = self.q_sqrt_raw
        return torch.tril(raw, -1) + torch.diag_embed(Q_FLOOR + softplus(torch.diagonal(raw)))

    @torch.no_grad()
    def set_q(self, mean: torch.Tensor, cov: torch.Tensor | None = None,
              chol: torch.Tensor | None = None) -> None:
        """Set q's mean and covariance S (or its lower Cholesky factor) in the model's own
        parameterisation (over v when whitened, over u otherwise)."""
        m = self.num_inducing
        mean = torch.as_tensor(mean, dtype=self.q_mu.dtype, device=self.q_mu.device)
        if mean.shape != (m,):
            raise ValueError(f"mean must have shape ({m},), got {tuple(mean.shape)}")
        if (cov is None) == (chol is None):
            raise ValueError("give exactly one of cov and chol")
        L = robust_cholesky(cov) if chol is None else torch.as_tensor(chol).to(mean)
        if L.shape != (m, m) or not bool((torch.diagonal(L) > Q_FLOOR).all()):
            raise ValueError(f"chol must be a ({m}, {m}) lower-triangular matrix with a "
                             f"diagonal > {Q_FLOOR:g}")
        raw = torch.tril(L, -1) + torch.diag_embed(inv_softplus(torch.diagonal(L) - Q_FLOOR))
        self.q_mu.copy_(mean)
        self.q_sqrt_raw.copy_(raw)

    @torch.no_grad()
    def set_optimal_q(self, X: torch.Tensor, y: torch.Tensor, block: int = 4096) -> None:
        """Set q to the optimal Gaussian for the current kernel, σ² and Z (Titsias 2009):
        in the whitened coordinates, with A = L_zz⁻¹ K_zX,

            q(v) = N(P⁻¹ A y / σ², P⁻¹),   P = I + A Aᵀ / σ²,

        (q(u) = N(L_zz m, L_zz S L_zzᵀ) unwhitened), accumulating A Aᵀ and A y over row
        blocks: one O(n m²) pass, O(m² + block·m) memory. The ELBO is then Titsias'
        collapsed bound, the best start for the stochastic phase."""
        self._check_batch(X, y)
        self.set_optimal_q_chunks((X[s : s + block], y[s : s + block])
                                  for s in range(0, X.shape[0], block))

    @torch.no_grad()
    def set_optimal_q_chunks(self, chunks: Iterable[tuple[torch.Tensor, torch.Tensor]]
                             ) -> None:
        """:meth:`set_optimal_q` from (X, y) row chunks, e.g. read from files."""
        Lz = self.prior_chol()
        m = self.num_inducing
        AAt = torch.zeros(m, m, dtype=Lz.dtype, device=Lz.device)
        Ay = torch.zeros(m, dtype=Lz.dtype, device=Lz.device)
        for Xc, yc in chunks:
            self._check_batch(Xc, yc)
            A = torch.linalg.solve_triangular(Lz, self.kernel(self.Z, Xc), upper=False)
            AAt += A @ A.mT
            Ay += A @ yc
        s2 = self.noise.detach()
        eye = torch.eye(m, dtype=Lz.dtype, device=Lz.device)
        R = robust_cholesky(eye + AAt / s2)
        mean = torch.cholesky_solve((Ay / s2)[:, None], R)[:, 0]
        cov = torch.cholesky_inverse(R)
        if not self.whiten:
            mean, cov = Lz @ mean, Lz @ cov @ Lz.mT
        self.set_q(mean, cov=0.5 * (cov + cov.mT))

    def prior_chol(self) -> torch.Tensor:
        """L_zz = chol(K_zz + jitter · mean(diag K_zz) I)."""
        Kzz = self.kernel(self.Z)
        if self.jitter > 0:
            scale = torch.diagonal(Kzz).mean().detach()
            Kzz = Kzz + (self.jitter * scale) * torch.eye(
                Kzz.shape[0], dtype=Kzz.dtype, device=Kzz.device)
        return robust_cholesky(Kzz)

    def kl(self, Lz: torch.Tensor | None = None) -> torch.Tensor:
        """KL(q ‖ p) = ½[tr(P⁻¹S) + mᵀP⁻¹m − m_z + log|P| − log|S|], P = I or K_zz."""
        L, mu = self.q_chol(), self.q_mu
        logdet_s = 2.0 * torch.log(torch.diagonal(L)).sum()
        if self.whiten:
            trace, maha, logdet_p = (L * L).sum(), mu @ mu, 0.0
        else:
            Lz = self.prior_chol() if Lz is None else Lz
            W = torch.linalg.solve_triangular(Lz, L, upper=False)
            a = torch.linalg.solve_triangular(Lz, mu[:, None], upper=False)
            trace, maha = (W * W).sum(), (a * a).sum()
            logdet_p = 2.0 * torch.log(torch.diagonal(Lz)).sum()
        return 0.5 * (trace + maha - mu.shape[0] + logdet_p - logdet_s)

    # -- q(f) marginals ---------------------------------------------------------------
    def _projections(self, X: torch.Tensor, Lz: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """A = L_zz⁻¹ K_zx and B (= A whitened, K_zz⁻¹ K_zx unwhitened), both m x b."""
        A = torch.linalg.solve_triangular(Lz, self.kernel(self.Z, X), upper=False)
        B = A if self.whiten else torch.linalg.solve_triangular(Lz.mT, A, upper=True)
        return A, B

    def marginals(self, X: torch.Tensor, Lz: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean μ and variance s of q(f_i) at the rows of X (differentiable)."""
        Lz = self.prior_chol() if Lz is None else Lz
        A, B = self._projections(X, Lz)
        LtB = self.q_chol().mT @ B
        var = self.kernel.diag(X) - (A * A).sum(0) + (LtB * LtB).sum(0)
        return B.mT @ self.q_mu, var

    # -- objective --------------------------------------------------------------------
    def expected_log_lik(self, X: torch.Tensor, y: torch.Tensor,
                         Lz: torch.Tensor | None = None) -> torch.Tensor:
        """E_q[log N(y_i | f_i, σ²)] per row: −½ log 2πσ² − [(y_i − μ_i)² + s_i]/(2σ²)."""
        mean, var = self.marginals(X, Lz)
        noise = self.noise
        return -0.5 * (LOG_2PI + torch.log(noise)) - 0.5 * ((y - mean) ** 2 + var) / noise

    def elbo(self, Xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """Minibatch ELBO (n/|𝓑|) Σ_{i∈𝓑} E_q[log N(y_i | f_i, σ²)] − KL(q ‖ p); with the
        whole data set as the batch it is the exact (Hensman et al. 2013) bound."""
        self._check_batch(Xb, yb)
        Lz = self.prior_chol()
        ell = self.expected_log_lik(Xb, yb, Lz)
        return (self.num_data / Xb.shape[0]) * ell.sum() - self.kl(Lz)

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The negative ELBO on ``data=(X, y)``, the whole training set (the model keeps
        no training rows, so the data must be given)."""
        if data is None:
            raise ValueError("SVGP.objective needs data=(X, y): the model keeps no training "
                             "rows")
        return -self.elbo(*data)

    def _check_batch(self, Xb: torch.Tensor, yb: torch.Tensor) -> None:
        if not isinstance(Xb, torch.Tensor) or Xb.ndim != 2 or Xb.shape[1] != self.Z.shape[1]:
            raise ValueError(f"Xb must be a 2-D tensor with {self.Z.shape[1]} columns, got "
                             f"{getattr(Xb, 'shape', type(Xb).__name__)}")
        if not isinstance(yb, torch.Tensor) or yb.shape != (Xb.shape[0],):
            raise ValueError(f"yb must be a tensor of shape ({Xb.shape[0]},), got "
                             f"{getattr(yb, 'shape', type(yb).__name__)}")

    # -- prediction -------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, X_new, *, include_noise: bool = False, full_cov: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """Predictive mean and variance of f (of y with ``include_noise``: + σ²) at X_new:
        μ* = B*ᵀ m,  Σ* = K** − A*ᵀA* + B*ᵀ S B*. ``full_cov`` gives the covariance
        matrix. Rows go in blocks of ``block``."""
        Xs = as_matrix(X_new, "X_new", self.Z.dtype, self.Z.device)
        if Xs.shape[1] != self.Z.shape[1]:
            raise ValueError(f"X_new has {Xs.shape[1]} columns but the model was trained "
                             f"on {self.Z.shape[1]}")
        Lz, L = self.prior_chol(), self.q_chol()
        if full_cov:
            A, B = self._projections(Xs, Lz)
            LtB = L.mT @ B
            cov = self.kernel(Xs) - A.mT @ A + LtB.mT @ LtB
            if include_noise:
                cov = cov + torch.diag_embed(self.noise.expand(Xs.shape[0]))
            return MeanAndVariance(B.mT @ self.q_mu, cov)
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s : s + block]
            A, B = self._projections(Xb, Lz)
            LtB = L.mT @ B
            means.append(B.mT @ self.q_mu)
            var = (self.kernel.diag(Xb) - (A * A).sum(0) + (LtB * LtB).sum(0)).clamp_min(0.0)
            variances.append(var + self.noise if include_noise else var)
        return MeanAndVariance(torch.cat(means), torch.cat(variances))

    # -- persistence ----------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        if any(isinstance(k, FeatureKernel) for k in self.kernel.modules()):
            raise ValueError("cannot save an SVGP on a FeatureKernel (its feature map has no "
                             "saved config); save the feature map's state_dict yourself")
        return {"num_data": self.num_data, "whiten": self.whiten, "jitter": self.jitter,
                "dtype": dtype_name(self.Z)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> SVGP:
        return cls(kernel, state["Z"], num_data=config["num_data"], whiten=config["whiten"],
                   jitter=config["jitter"], dtype=getattr(torch, str(config["dtype"])))
