"""SGPR from passes over the rows: Titsias's (2009) bound and posterior from row sums.

The model of :class:`~gpscale.models.SGPR` (the same bound, eq. 9, and posterior), whose
rows stay in their partitions: each evaluation is one statistics pass (W = ΦᵀΦ, v = Φᵀy,
yᵀy, n; :mod:`gpscale.models.feature_stats` with the whitened inducing features
φ(x) = Luu⁻¹k(Z, x) of :mod:`gpscale.features.inducing`), in this process or as tasks on
the rows' dask workers, and its gradient in θ and Z one more pass. The bound and
posterior from those sums are :mod:`gpscale.models.sgpr_stats`. Σ k(x, x) is n k(0)
from the kernel (stationary kernels only: other kernels are refused).

After training, :meth:`StreamedSGPR.freeze` keeps the statistics at the final θ and Z
and lets go of the rows: prediction and the saved file need only m × m numbers.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..features.inducing import InducingFeatures, check_constant_diagonal, diagonal_sum
from ..io.rows import Rows
from ..kernels import Kernel
from ..linalg import robust_cholesky
from ..params import Positive
from ..validation import as_matrix
from . import feature_stats
from .base import GPModel, dtype_name, no_data
from .sgpr import TitsiasModel
from .sgpr_stats import bound_from_statistics, posterior_factors, whiten

__all__ = ["StreamedSGPR"]

#: the buffers a frozen model keeps: W, v, yᵀy, n (:mod:`gpscale.models.sgpr_stats`)
_STATS = ("stat_gram", "stat_proj", "stat_yy", "stat_n")


class _Whitened(torch.autograd.Function):
    """(W, v) = (Luu⁻¹GLuu⁻ᵀ, Luu⁻¹b), G = K_ZX K_XZ and b = K_ZX y, whose values come in
    from the whitened pass, made differentiable in Luu and in the plain features'
    parameters (θ, Z): with Γ = ∂F/∂W and g = ∂F/∂v,

        ∂F/∂G = Luu⁻ᵀΓLuu⁻¹,   ∂F/∂b = Luu⁻ᵀg,   ∂F/∂Luu = −Luu⁻ᵀ[(Γ + Γᵀ)W + g vᵀ],

    the first two by one gradient pass over the plain features (no triangular solve per
    row), the last from the m × m values (then through the Cholesky factor by autograd).

    ``apply(Luu, W, v, plain, rows, dtype, *params)``."""

    @staticmethod
    def forward(ctx, Luu, W, v, plain, rows, dtype, *params):  # noqa: D102
        ctx.args = (plain, rows, dtype)
        ctx.save_for_backward(Luu, W, v, *params)
        return W.clone(), v.clone()

    @staticmethod
    def backward(ctx, g_W, g_v):  # noqa: D102
        Luu, W, v, *_ = ctx.saved_tensors
        plain, rows, dtype = ctx.args
        if g_W is None:
            g_W = torch.zeros_like(W)
        if g_v is None:
            g_v = torch.zeros_like(v)
        left = torch.linalg.solve_triangular(Luu.mT, g_W, upper=True)       # Luu⁻ᵀΓ
        g_G = torch.linalg.solve_triangular(Luu.mT, left.mT, upper=True).mT  # Luu⁻ᵀΓLuu⁻¹
        g_b = torch.linalg.solve_triangular(Luu.mT, g_v[:, None], upper=True)[:, 0]
        grads = feature_stats.statistics_gradients(
            plain, rows.partitions, g_G, g_b, scaler=rows.scaler, client=rows.client,
            rows=rows.rows, dtype=dtype)
        inner = (g_W + g_W.mT) @ W + torch.outer(g_v, v)
        g_L = -torch.linalg.solve_triangular(Luu.mT, inner, upper=True)
        return (g_L, None, None, None, None, None, *grads)


class StreamedSGPR(TitsiasModel, GPModel):
    """Sparse variational GP regression (Titsias 2009) over :class:`~gpscale.io.Rows`.

    Parameters
    ----------
    kernel : a stationary covariance function, differentiable in its inputs.
    Z : initial inducing inputs (m, d).
    rows : the training rows, read on every evaluation (never held).
    statistics : (W, v, yᵀy, n) at fixed θ and Z instead of rows (a saved model).
    noise : initial noise variance σ².
    learn_z : whether Z is trained.
    """

    title = "SGPR (Titsias 2009) from passes over the rows"
    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(self, kernel: Kernel, Z, *, rows: Rows | None = None,
                 statistics: tuple | None = None, noise: float = 0.1, learn_z: bool = True,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        if (rows is None) == (statistics is None):
            raise ValueError("give the training data as rows=Rows(...) or as "
                             "statistics=(W, v, yy, n): exactly one of them")
        Z = as_matrix(Z, "Z", dtype, device)
        if rows is not None and Z.shape[1] != rows.num_features:
            raise ValueError(f"Z has {Z.shape[1]} columns but the rows have "
                             f"{rows.num_features}")
        self.kernel = kernel.to(dtype=dtype, device=Z.device)
        check_constant_diagonal(self.kernel)  # before any pass
        self.Z = nn.Parameter(Z.clone(), requires_grad=learn_z)
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self._rows, self._n, self._state = rows, None, None
        if statistics is not None:
            self._keep(statistics)
        self.to(Z.device)

    @property
    def rows(self) -> Rows | None:
        """The training rows (None once frozen)."""
        return self._rows

    @property
    def n(self) -> int:
        if "stat_n" in self._buffers:
            return int(self.stat_n)
        if self._n is None:
            self._n = self._rows.n
        return self._n

    def features(self, whitener: torch.Tensor | None = None) -> InducingFeatures:
        """φ(x) = k(Z, x), or Luu⁻¹k(Z, x) given ``whitener`` = Luu, sharing this model's
        kernel and Z."""
        return InducingFeatures(self.kernel, self.Z, whitener)

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """(W, v, yᵀy, n): the frozen ones, or one pass over the rows, differentiable in
        θ and Z (their gradient is a second pass, :class:`_Whitened`) when any of them is
        trained."""
        if "stat_gram" in self._buffers:
            return self.stat_gram, self.stat_proj, self.stat_yy, int(self.stat_n)
        r, dtype = self._rows, self.noise.dtype
        Luu = robust_cholesky(self.kernel(self.Z))
        with torch.no_grad():
            s = feature_stats.statistics(self.features(Luu), r.partitions, scaler=r.scaler,
                                         client=r.client, rows=r.rows, dtype=dtype)
        self._n = int(s.n)
        plain = self.features()
        params = feature_stats.trainable(plain)
        if not (params and torch.is_grad_enabled()):
            return s.gram, s.proj, s.yy, int(s.n)
        W, v = _Whitened.apply(Luu, s.gram, s.proj, plain, r, dtype, *params)
        return W, v, s.yy, int(s.n)

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Negative variational lower bound F ≥ −log p(y) (Titsias eq. 9; total nats)."""
        no_data(self, data)
        gram, proj, yy, n = self.statistics()
        trace = diagonal_sum(self.kernel, n, self.Z.shape[1], self.noise)
        return bound_from_statistics(gram, proj, yy, n, trace, self.noise)

    def freeze(self) -> StreamedSGPR:
        """Keep the statistics at the current θ and Z and let go of the rows (and of any
        cluster they were read on); θ and Z are fixed from then on."""
        if self._rows is None:
            return self
        with torch.no_grad():
            stats = self.statistics()
        self._keep(stats)
        return self

    def _keep(self, stats: tuple) -> None:
        gram, proj, yy, n = stats
        ref = self.noise
        for name, value in zip(_STATS[:3], (gram, proj, yy)):
            self.register_buffer(name, torch.as_tensor(value).detach().to(ref))
        self.register_buffer("stat_n", torch.tensor(int(n), device=ref.device))
        for t in (*self.kernel.parameters(), self.Z):  # the statistics belong to them
            t.requires_grad_(False)
        self._rows = None

    def _posterior(self):
        """(σ², (Luu, LB, w)) for the posterior, the factors once per parameter values."""
        key = tuple((id(t), t._version) for t in (*self.parameters(), *self.buffers()))
        if self._state is None or self._state[0] != key:
            gram, proj, _, _ = self.statistics()
            with torch.no_grad():
                factors = posterior_factors(gram, proj, self.kernel(self.Z), self.noise)
            self._state = (key, factors)
        return self.noise, self._state[1]

    # -- persistence: Z, θ and the statistics, never the rows ----------------------------
    def to_config(self) -> dict[str, Any]:
        return {"dtype": dtype_name(self.noise), "n": self.n, "rows": "statistics",
                "statistics": "whitened"}

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The state_dict with the rows' statistics at the current θ and Z."""
        if "stat_n" in self._buffers:
            return self.state_dict()
        with torch.no_grad():
            gram, proj, yy, n = self.statistics()
        return {**self.state_dict(), "stat_gram": gram, "stat_proj": proj, "stat_yy": yy,
                "stat_n": torch.tensor(n)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> StreamedSGPR:
        stats = tuple(state[k] for k in _STATS)
        if config.get("statistics") != "whitened":  # written with G = K_ZX K_XZ, b = K_ZX y
            trained = copy.deepcopy(kernel).to(stats[0])
            trained.load_state_dict({k.removeprefix("kernel."): v for k, v in state.items()
                                     if k.startswith("kernel.")})
            with torch.no_grad():
                W, v = whiten(stats[0], stats[1], trained(state["Z"].to(stats[0])))
            stats = (W, v, *stats[2:])
            state.update(stat_gram=W, stat_proj=v)  # what load_state_dict then reads
        return cls(kernel, state["Z"], statistics=stats,
                   dtype=getattr(torch, str(config["dtype"])))
