"""Titsias's (2009) collapsed bound and the SGPR posterior from row sums only.

With the whitened inducing features Φ = K_XZ Luu⁻ᵀ (Luu Luuᵀ = K_ZZ;
:mod:`gpscale.features.inducing`), the rows enter the bound (eq. 9) and the posterior
through

    W = ΦᵀΦ = Luu⁻¹ K_ZX K_XZ Luu⁻ᵀ,   v = Φᵀy = Luu⁻¹ K_ZX y,   yᵀy,   n,   t = Σᵢ k(xᵢ, xᵢ),

sums over rows that a pass forms block by block. In the notation of
:mod:`gpscale.models.vfe_bound` (A = Luu⁻¹K_ZX/σ):

    AAᵀ = W / σ²,   B = I + AAᵀ = LB LBᵀ,   c = LB⁻¹ v / σ²,
    F = ½[n log 2π + n log σ² + 2 Σ log diag LB + yᵀy/σ² − cᵀc] + ½[t/σ² − tr AAᵀ],

every step m × m (:func:`~gpscale.models.vfe_bound.inner_factors` and
:func:`~gpscale.models.vfe_bound.negative_bound`, the row form's own, with AAᵀ = W/σ²
and c from v), so the gradient in (W, v, σ², t) is torch autograd's; the statistics
pass carries it on to θ and Z. The posterior (Titsias eq. 6; the same formulas as
:meth:`gpscale.models.SGPR.predict`) with w = LB⁻ᵀc and V = Luu⁻¹K_Z*:

    μ* = Vᵀw,   v* = k** − ‖V‖² + ‖LB⁻¹V‖².

:class:`Statistics` is the :class:`~gpscale.models.SGPR` row reader that holds only
these sums (a frozen or loaded model): t is n k(0), so kernels with a constant diagonal
only.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..features.inducing import check_constant_diagonal, diagonal_sum
from ..kernels import Kernel
from ..linalg import robust_cholesky
from .base import GPModel, MeanAndVariance, dtype_name
from .vfe_bound import inner_factors, negative_bound

__all__ = ["Statistics", "bound_from_statistics", "model_bound", "posterior_factors",
           "posterior", "saved_statistics", "whiten"]

#: the buffers a model reading :class:`Statistics` keeps: W, v, yᵀy, n
STATISTICS = ("stat_gram", "stat_proj", "stat_yy", "stat_n")

#: the summary's first line for an SGPR reading row sums (in passes or saved)
SUMS_TITLE = "SGPR (Titsias 2009) from passes over the rows"


def _factors(gram: torch.Tensor, proj: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(AAᵀ, LB, c) from W = σ²AAᵀ (symmetrised: a sum over row blocks) and v = σAy
    (:func:`~gpscale.models.vfe_bound.inner_factors`)."""
    AAt = 0.5 * (gram + gram.mT) / noise
    _, LB, c = inner_factors(AAt, proj, noise)
    return AAt, LB, c


def bound_from_statistics(gram: torch.Tensor, proj: torch.Tensor, yy: torch.Tensor, n: int,
                          trace: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The negative bound F (total nats; module doc) from W, v, yᵀy, n, t and σ²;
    differentiable in every tensor argument."""
    AAt, LB, c = _factors(gram, proj, noise)
    return negative_bound(n, noise, LB, c, yy, trace, torch.diagonal(AAt).sum())


@torch.no_grad()
def posterior_factors(gram: torch.Tensor, proj: torch.Tensor, Kzz: torch.Tensor,
                      noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Luu, LB, w = LB⁻ᵀc): the training side of the posterior, O(m³)."""
    _, LB, c = _factors(gram, proj, noise)
    return robust_cholesky(Kzz), LB, torch.linalg.solve_triangular(LB.mT, c[:, None],
                                                                   upper=True)


def whiten(gram: torch.Tensor, proj: torch.Tensor, Kzz: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, v) from the unwhitened sums G = K_ZX K_XZ and b = K_ZX y, which model files
    written before the features were whitened hold."""
    Luu = robust_cholesky(Kzz)
    half = torch.linalg.solve_triangular(Luu, gram, upper=False)
    W = torch.linalg.solve_triangular(Luu, half.mT, upper=False)
    v = torch.linalg.solve_triangular(Luu, proj[:, None], upper=False)[:, 0]
    return 0.5 * (W + W.mT), v


@torch.no_grad()
def posterior(kernel: Kernel, Z: torch.Tensor, factors: tuple, Xs: torch.Tensor,
              noise: torch.Tensor, include_noise: bool = False,
              block: int = 4096) -> MeanAndVariance:
    """Mean and variance of f (of y with ``include_noise``) at Xs, block by block, from
    ``factors`` = (Luu, LB, w) (:func:`posterior_factors` or the in-memory model's)."""
    Luu, LB, w = factors
    means, variances = [], []
    for s in range(0, Xs.shape[0], block):
        Xb = Xs[s : s + block]
        V = torch.linalg.solve_triangular(Luu, kernel(Z, Xb), upper=False)
        means.append((V.mT @ w)[:, 0])
        W = torch.linalg.solve_triangular(LB, V, upper=False)
        var = (kernel.diag(Xb) - (V * V).sum(0) + (W * W).sum(0)).clamp_min(0.0)
        variances.append(var + noise if include_noise else var)
    return MeanAndVariance(torch.cat(means), torch.cat(variances))


def model_bound(model: GPModel, stats: tuple) -> torch.Tensor:
    """F of an :class:`~gpscale.models.SGPR` (its kernel, Z and σ²) from its rows' sums
    ``stats`` = (W, v, yᵀy, n), with t = n k(0) (a constant-diagonal kernel)."""
    gram, proj, yy, n = stats
    trace = diagonal_sum(model.kernel, n, model.Z.shape[1], model.noise)
    return bound_from_statistics(gram, proj, yy, n, trace, model.noise)


def sums_config(model: GPModel) -> dict[str, Any]:
    """The saved options of an SGPR whose file keeps the rows' sums, not the rows."""
    return {"dtype": dtype_name(model.noise), "n": model.n, "rows": "statistics",
            "statistics": "whitened"}


class Statistics:
    """:class:`~gpscale.models.SGPR`'s rows as their sums (W, v, yᵀy, n) at fixed θ and Z
    (a frozen or loaded model): the model keeps them as buffers (:data:`STATISTICS`) and
    trains only σ² from then on."""

    title = SUMS_TITLE
    rows = None
    num_features = None
    #: L-BFGS's vector order (Z, σ², θ): the streamed fits' order, kept
    z_first = True

    def __init__(self, gram, proj, yy, n) -> None:
        self._given: tuple | None = (gram, proj, yy, n)

    def prepare(self, dtype: torch.dtype, device: Any) -> Any:
        return device

    def check_kernel(self, kernel: Kernel) -> None:
        check_constant_diagonal(kernel)  # the bound's Σ k(x, x) is n k(0)

    def attach(self, model: GPModel) -> None:
        """Keep the sums as the model's buffers; fix θ and Z, whose sums they are."""
        gram, proj, yy, n = self._given
        self._given = None
        ref = model.noise
        for name, value in zip(STATISTICS[:3], (gram, proj, yy)):
            model.register_buffer(name, torch.as_tensor(value).detach().to(ref))
        model.register_buffer("stat_n", torch.tensor(int(n), device=ref.device))
        for t in (*model.kernel.parameters(), model.Z):
            t.requires_grad_(False)

    def detach(self, model: GPModel) -> None:
        return None

    def n(self, model: GPModel) -> int:
        return int(model.stat_n)

    def statistics(self, model: GPModel) -> tuple:
        return model.stat_gram, model.stat_proj, model.stat_yy, int(model.stat_n)

    def bound(self, model: GPModel) -> torch.Tensor:
        return model_bound(model, self.statistics(model))

    def posterior_factors(self, model: GPModel) -> tuple:
        with torch.no_grad():
            return posterior_factors(model.stat_gram, model.stat_proj, model.kernel(model.Z),
                                     model.noise)

    def extra_state(self, model: GPModel) -> dict[str, torch.Tensor]:
        return {}

    def config(self, model: GPModel) -> dict[str, Any]:
        return sums_config(model)


def saved_statistics(config: dict[str, Any], state: dict[str, torch.Tensor],
                     kernel: Kernel) -> tuple:
    """(W, v, yᵀy, n) from a saved file's state; files written with the unwhitened sums
    G = K_ZX K_XZ, b = K_ZX y (no ``"statistics"`` option) are whitened at their trained θ
    and Z, and ``state`` updated to match (what ``load_state_dict`` then reads)."""
    stats = tuple(state[k] for k in STATISTICS)
    if config.get("statistics") == "whitened":
        return stats
    trained = copy.deepcopy(kernel).to(stats[0])
    trained.load_state_dict({k.removeprefix("kernel."): v for k, v in state.items()
                             if k.startswith("kernel.")})
    with torch.no_grad():
        W, v = whiten(stats[0], stats[1], trained(state["Z"].to(stats[0])))
    state.update(stat_gram=W, stat_proj=v)
    return (W, v, *stats[2:])
