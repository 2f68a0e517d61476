"""SGPR reading its rows in passes: Titsias's (2009) bound and posterior from row sums.

:class:`RowPasses` is the :class:`~gpscale.models.SGPR` row reader (the same bound,
eq. 9, and posterior) whose rows stay in their partitions: each evaluation is one
statistics pass (W = ΦᵀΦ, v = Φᵀy, yᵀy, n; :mod:`gpscale.models.feature_stats` with the
whitened inducing features φ(x) = Luu⁻¹k(Z, x) of :mod:`gpscale.features.inducing`), in
this process or as tasks on the rows' dask workers, and its gradient in θ and Z one more
pass. The bound and posterior from those sums are :mod:`gpscale.models.sgpr_stats`.
Σ k(x, x) is n k(0) from the kernel (stationary kernels only: other kernels are
refused).

After training, :meth:`SGPR.freeze <gpscale.models.SGPR.freeze>` keeps the statistics at
the final θ and Z (the reader :class:`~gpscale.models.sgpr_stats.Statistics`) and lets
go of the rows: prediction and the saved file need only m × m numbers.
"""

from __future__ import annotations

from typing import Any

import torch

from ..features.inducing import check_constant_diagonal
from ..io.rows import Rows
from ..kernels import Kernel
from ..linalg import robust_cholesky
from . import feature_stats
from .base import GPModel
from .sgpr_stats import SUMS_TITLE, model_bound, posterior_factors, sums_config

__all__ = ["RowPasses"]


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


class RowPasses:
    """:class:`~gpscale.models.SGPR`'s rows read in passes over their partitions
    (:class:`~gpscale.io.Rows`, never held): the bound from one statistics pass, its
    gradient in θ and Z by a second (:class:`_Whitened`)."""

    title = SUMS_TITLE
    #: L-BFGS's vector order (Z, σ², θ): the streamed fits' order, kept
    z_first = True

    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self._n: int | None = None

    @property
    def num_features(self) -> int:
        return self.rows.num_features

    def prepare(self, dtype: torch.dtype, device: Any) -> Any:
        return device

    def check_kernel(self, kernel: Kernel) -> None:
        check_constant_diagonal(kernel)  # before any pass

    def attach(self, model: GPModel) -> None:
        return None

    def detach(self, model: GPModel) -> None:
        return None

    def n(self, model: GPModel) -> int:
        if self._n is None:
            self._n = self.rows.n
        return self._n

    def statistics(self, model: GPModel) -> tuple:
        """(W, v, yᵀy, n) by one pass over the rows, differentiable in θ and Z (their
        gradient is a second pass, :class:`_Whitened`) when any of them is trained."""
        r, dtype = self.rows, model.noise.dtype
        Luu = robust_cholesky(model.kernel(model.Z))
        with torch.no_grad():
            s = feature_stats.statistics(model.features(Luu), r.partitions, scaler=r.scaler,
                                         client=r.client, rows=r.rows, dtype=dtype)
        self._n = int(s.n)
        plain = model.features()
        params = feature_stats.trainable(plain)
        if not (params and torch.is_grad_enabled()):
            return s.gram, s.proj, s.yy, int(s.n)
        W, v = _Whitened.apply(Luu, s.gram, s.proj, plain, r, dtype, *params)
        return W, v, s.yy, int(s.n)

    def bound(self, model: GPModel) -> torch.Tensor:
        return model_bound(model, self.statistics(model))

    def posterior_factors(self, model: GPModel) -> tuple:
        with torch.no_grad():  # one pass, no gradient pass set up behind it
            gram, proj, _, _ = self.statistics(model)
            return posterior_factors(gram, proj, model.kernel(model.Z), model.noise)

    def extra_state(self, model: GPModel) -> dict[str, torch.Tensor]:
        """The rows' sums at the current θ and Z, which a saved file keeps instead."""
        with torch.no_grad():
            gram, proj, yy, n = self.statistics(model)
        return {"stat_gram": gram, "stat_proj": proj, "stat_yy": yy, "stat_n": torch.tensor(n)}

    def config(self, model: GPModel) -> dict[str, Any]:
        return sums_config(model)
