"""Exact GP regression: the "GPML" ML-II baseline of all four papers.

NLML(θ) = ½ rᵀC⁻¹r + ½ log|C| + (n/2) log 2π,  C = K_θ + σ²I,  r = y − m.

One Cholesky per evaluation. The gradient is
∂NLML/∂θ = ½ tr((C⁻¹ − ααᵀ) ∂C/∂θ) = ⟨G, ∂C/∂θ⟩,  α = C⁻¹r,  G = ½(C⁻¹ − ααᵀ),
formed by one kernel contraction ``kernel.vjp(X, X, G)`` (closed forms for the
stationary kernels: a few passes over one n x n buffer and an n x n x d matrix
product) instead of one n x n derivative matrix per hyperparameter. Peak memory is
three n x n matrices (L, G and the contraction's buffer).

Rows that repeat an input can be merged beforehand (:mod:`gpscale.models.copies`):
the model then holds the distinct inputs with y's mean at each and ``copies``, and its
C = K + σ² diag(1/c) and NLML (plus a term in σ² alone) are those of all the rows.

Successive evaluations of a fit share a :class:`~gpscale.linalg.cholesky.JitterLadder`
(``model.jitter``): a covariance that needs jitter is not re-tried from zero jitter at
every evaluation.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..kernels import Kernel
from ..linalg import robust_cholesky
from ..linalg.cholesky import JitterLadder, inverse_from_cholesky
from ..params import LOG_2PI, Positive
from ..validation import as_test_inputs, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data
from .copies import Copies, MergedRows, keep_copies, noise_diagonal


class _GaussianNLL(torch.autograd.Function):
    """NLML of r ~ N(0, C), with the trace-form gradient dC = ½(C⁻¹ − ααᵀ)."""

    @staticmethod
    def forward(ctx, C, r):  # noqa: D102
        L = robust_cholesky(C)
        alpha = torch.cholesky_solve(r[:, None], L)[:, 0]
        n = r.shape[0]
        value = 0.5 * (r @ alpha) + torch.log(torch.diagonal(L)).sum() + 0.5 * n * LOG_2PI
        ctx.save_for_backward(L, alpha)
        return value

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        L, alpha = ctx.saved_tensors
        grad_C = None
        if ctx.needs_input_grad[0]:
            grad_C = inverse_from_cholesky(L)
            grad_C.sub_(torch.outer(alpha, alpha)).mul_(0.5 * g)
        grad_r = g * alpha if ctx.needs_input_grad[1] else None
        return grad_C, grad_r


def gaussian_nll(C: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """−log N(r | 0, C), differentiable in C and r with the fast trace-form gradient."""
    return _GaussianNLL.apply(C, r)


class _ExactNLML(torch.autograd.Function):
    """NLML of an ExactGP; the gradient goes through ``kernel.vjp`` (see module doc)."""

    @staticmethod
    def forward(ctx, model, r, noise, *params):  # noqa: D102
        with torch.no_grad():
            C = model.kernel(model.X)
            C.diagonal().add_(noise_diagonal(noise, model.copies))
            L = robust_cholesky(C, ladder=model.jitter)
            del C
            alpha = torch.cholesky_solve(r[:, None], L)[:, 0]
            value = (0.5 * (r @ alpha) + torch.log(torch.diagonal(L)).sum()
                     + 0.5 * r.shape[0] * LOG_2PI)
        ctx.model = model
        ctx.save_for_backward(L, alpha, *params)
        return value

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        L, alpha, *params = ctx.saved_tensors
        model = ctx.model
        G = inverse_from_cholesky(L)
        G.addr_(alpha, alpha, beta=0.5 * g, alpha=-0.5 * g)  # G = g/2 (C⁻¹ − ααᵀ)
        grad_noise = None
        if ctx.needs_input_grad[2]:  # ∂C/∂σ² = diag(1/c), I without copies
            diag = torch.diagonal(G)
            grad_noise = (diag if model.copies is None else diag / model.copies.counts).sum()
        grad_r = g * alpha if ctx.needs_input_grad[1] else None
        grads, _ = model.kernel.vjp(model.X, model.X, G)
        del G
        param_grads = [grads.get(p) if need else None
                       for p, need in zip(params, ctx.needs_input_grad[3:])]
        return (None, grad_r, grad_noise, *param_grads)


class ExactGP(MergedRows, GPModel):
    """Exact GP: y = f(X) + ε, f ~ GP(m, k), ε ~ N(0, σ²).

    Parameters
    ----------
    kernel : the covariance function k.
    X, y : training inputs (n, d) and targets (n,).
    noise : initial noise variance σ².
    mean : ``"zero"`` or ``"constant"`` (a learned constant m).
    noise_floor : the smallest σ² this model allows (default: the class's 1e-6).
    copies : :class:`~gpscale.models.copies.Copies` when each row of X, y stands for
        ``copies.counts`` rows at that input (y their mean; see
        :func:`~gpscale.models.copies.merge_copies`), None when each is one row.
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(
        self,
        kernel: Kernel,
        X,
        y,
        noise: float = 0.1,
        mean: str = "zero",
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
        noise_floor: float | None = None,
        copies: Copies | None = None,
    ) -> None:
        super().__init__()
        if mean not in ("zero", "constant"):
            raise ValueError(f"mean must be 'zero' or 'constant', got {mean!r}")
        X, y = check_xy(X, y, dtype, device)
        self.kernel = kernel.to(dtype=dtype, device=X.device)
        if noise_floor is not None:
            ExactGP.noise.set_floor(self, noise_floor)
            if not float(noise) > noise_floor:
                raise ValueError(f"the initial noise ({float(noise):g}) must be above the "
                                 f"noise floor ({noise_floor:g}); pass a larger noise")
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.mean_kind = mean
        self.mean_constant = nn.Parameter(torch.zeros((), dtype=dtype, device=X.device),
                                          requires_grad=(mean == "constant"))
        self.register_buffer("X", X)
        self.register_buffer("y", y)
        keep_copies(self, copies)
        self._cache: tuple[Any, torch.Tensor, torch.Tensor] | None = None
        #: where the NLML's Cholesky starts its jitter ladder (the rung that last worked)
        self.jitter = JitterLadder()
        self.to(X.device)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def covariance(self) -> torch.Tensor:
        """C = K(X, X) + σ²I (σ² diag(1/c) with copies)."""
        K = self.kernel(self.X)
        return K + torch.diag_embed(noise_diagonal(self.noise, self.copies) * K.new_ones(self.n))

    def nlml(self) -> torch.Tensor:
        """Negative log marginal likelihood (differentiable in every parameter)."""
        params = [p for p in self.kernel.parameters() if p.requires_grad]
        value = _ExactNLML.apply(self, self.y - self.mean_constant, self.noise, *params)
        copies = self.copies
        return value if copies is None else value + copies.nlml_term(self.noise)

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The NLML (the model holds its training rows; ``data`` must be None)."""
        no_data(self, data)
        return self.nlml()

    # -- persistence ----------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        config = {"mean": self.mean_kind, "dtype": dtype_name(self.X)}
        floor = ExactGP.noise.floor_of(self)
        if floor != ExactGP.noise.floor:  # the noise is floor + softplus(raw_noise)
            config["noise_floor"] = floor
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> ExactGP:
        floor = config.get("noise_floor")
        return cls(kernel, state["X"], state["y"], mean=config["mean"],
                   dtype=getattr(torch, config["dtype"]), noise_floor=floor,
                   noise=0.1 if floor is None else max(0.1, 2.0 * floor),
                   copies=Copies.from_state(state))

    # -- prediction -----------------------------------------------------------------
    def _factor(self) -> tuple[torch.Tensor, torch.Tensor]:
        key = tuple(p._version for p in self.parameters()) + (id(self.X), self.X._version)
        if self._cache is None or self._cache[0] != key:
            with torch.no_grad():
                L = robust_cholesky(self.covariance())
                alpha = torch.cholesky_solve((self.y - self.mean_constant)[:, None], L)[:, 0]
            self._cache = (key, L, alpha)
        return self._cache[1], self._cache[2]

    @torch.no_grad()
    def predict(
        self,
        X_new,
        *,
        include_noise: bool = False,
        full_cov: bool = False,
        block: int = 4096,
    ) -> MeanAndVariance:
        """Posterior mean and variance (or covariance with ``full_cov``) at ``X_new``.

        ``include_noise`` adds σ² (predictive distribution of y rather than f).
        Test points are processed in blocks of ``block`` rows.
        """
        Xs = as_test_inputs(X_new, self.X)
        L, alpha = self._factor()
        if full_cov:
            Ks = self.kernel(self.X, Xs)
            V = torch.linalg.solve_triangular(L, Ks, upper=False)
            cov = self.kernel(Xs) - V.mT @ V
            if include_noise:
                cov = cov + torch.diag_embed(self.noise.expand(Xs.shape[0]))
            return MeanAndVariance(Ks.mT @ alpha + self.mean_constant, cov)
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s : s + block]
            Ks = self.kernel(self.X, Xb)
            V = torch.linalg.solve_triangular(L, Ks, upper=False)
            means.append(Ks.mT @ alpha + self.mean_constant)
            var = (self.kernel.diag(Xb) - (V * V).sum(0)).clamp_min(0.0)
            variances.append(var + self.noise if include_noise else var)
        return MeanAndVariance(torch.cat(means), torch.cat(variances))
