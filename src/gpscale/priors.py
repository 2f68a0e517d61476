"""Hyperparameter priors for MAP-II: minimise NLML(θ) − log p(θ) instead of NLML(θ).

A prior here is a density **of the constrained value** v of a positive parameter (the
lengthscale, the noise variance, ... as the kernel uses it), not of the unconstrained
``raw`` value that the optimiser moves: log p(θ) = Σ_v log p(v), with no softplus
Jacobian. MAP-II then finds the mode of the posterior density over v. The optimiser
searching over raw = softplus⁻¹(v − floor) does not change that point (a
reparameterisation of the search moves no optimum); a Jacobian term
log |dv/draw| would only belong here if the prior were defined on raw. This is
GPyTorch's and BoTorch's convention too, so ``prior="botorch"`` is their MAP point.

``prior=`` of the ``exact`` method takes ``None`` (ML-II), ``"botorch"``
(:func:`botorch_priors`) or a dict ``{name: Prior}`` where ``name`` is a Positive
parameter's attribute name (``"lengthscale"``, ``"noise"``, ``"outputscale"``:
every parameter of that name) or its qualified name (``"kernel.base.lengthscale"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from .params import positive_params

__all__ = ["Prior", "LogNormal", "Gamma", "botorch_priors", "resolve_priors",
           "PriorTerm", "PRIOR_NAMES"]

#: the named prior sets ``prior=`` accepts
PRIOR_NAMES = ("botorch",)


class Prior:
    """A density over positive values; :meth:`log_prob` is elementwise."""

    def log_prob(self, v: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def mode(self) -> float:
        raise NotImplementedError


class LogNormal(Prior):
    """log v ~ N(loc, scale²):
    log p(v) = −log v − log(scale √(2π)) − (log v − loc)² / (2 scale²)."""

    def __init__(self, loc: float, scale: float) -> None:
        if not (math.isfinite(loc) and scale > 0 and math.isfinite(scale)):
            raise ValueError(f"LogNormal needs a finite loc and scale > 0, got {loc}, {scale}")
        self.loc, self.scale = float(loc), float(scale)

    def log_prob(self, v: torch.Tensor) -> torch.Tensor:
        z = (torch.log(v) - self.loc) / self.scale
        return -torch.log(v) - math.log(self.scale) - 0.5 * math.log(2 * math.pi) - 0.5 * z * z

    def mode(self) -> float:
        return math.exp(self.loc - self.scale**2)

    def __repr__(self) -> str:
        return f"LogNormal(loc={self.loc:.6g}, scale={self.scale:.6g})"


class Gamma(Prior):
    """Shape–rate Gamma: log p(v) = a log b − log Γ(a) + (a − 1) log v − b v."""

    def __init__(self, concentration: float, rate: float) -> None:
        if not (concentration > 0 and rate > 0):
            raise ValueError(f"Gamma needs concentration > 0 and rate > 0, got "
                             f"{concentration}, {rate}")
        self.a, self.b = float(concentration), float(rate)

    def log_prob(self, v: torch.Tensor) -> torch.Tensor:
        return (self.a * math.log(self.b) - math.lgamma(self.a)
                + (self.a - 1.0) * torch.log(v) - self.b * v)

    def mode(self) -> float:
        return max(self.a - 1.0, 0.0) / self.b

    def __repr__(self) -> str:
        return f"Gamma(concentration={self.a:.6g}, rate={self.b:.6g})"


def botorch_priors(d: int) -> dict[str, Prior]:
    """BoTorch ``SingleTaskGP``'s default priors (BoTorch ≥ 0.12; Hvarfner et al. 2024,
    "Vanilla Bayesian optimization performs great in high dimensions", eq. 5): each of
    the ``d`` lengthscales LogNormal(√2 + ½ log d, √3), the noise variance
    LogNormal(−4, 1). BoTorch has no signal variance (its outcomes are standardised), so
    the outputscale gets no prior. BoTorch applies them to inputs scaled to the unit
    cube; here they apply to the inputs the model sees (standardised by default)."""
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    return {"lengthscale": LogNormal(math.sqrt(2.0) + 0.5 * math.log(d), math.sqrt(3.0)),
            "noise": LogNormal(-4.0, 1.0)}


class PriorTerm:
    """−log p(θ) of a model for a resolved set of priors: call it for the value (a
    differentiable scalar tensor) to add to the NLML."""

    def __init__(self, terms: list[tuple[str, nn.Module, object, Prior]]) -> None:
        self.terms = terms

    def __call__(self) -> torch.Tensor:
        total = None
        for _, owner, desc, prior in self.terms:
            lp = prior.log_prob(getattr(owner, desc.name)).sum()
            total = lp if total is None else total + lp
        return -total

    def __bool__(self) -> bool:
        return bool(self.terms)

    def describe(self) -> dict[str, str]:
        return {name: repr(prior) for name, _, _, prior in self.terms}


def resolve_priors(model: nn.Module, prior: None | str | Mapping[str, Prior],
                   d: int | None = None) -> PriorTerm:
    """Bind ``prior`` (see the module doc) to ``model``'s Positive parameters. A name that
    matches no parameter, or a value that is not a :class:`Prior`, is a ValueError."""
    if prior is None:
        return PriorTerm([])
    if isinstance(prior, str):
        if prior.lower() != "botorch":
            raise ValueError(f"prior must be None, one of {PRIOR_NAMES} or a dict "
                             f"{{name: Prior}}, got {prior!r}")
        if d is None:
            raise ValueError("prior='botorch' needs the number of input columns d")
        prior = botorch_priors(d)
    if not isinstance(prior, Mapping):
        raise ValueError(f"prior must be None, one of {PRIOR_NAMES} or a dict "
                         f"{{name: Prior}}, got {type(prior).__name__}")
    params = list(positive_params(model))
    terms, used = [], set()
    for qual, owner, desc in params:
        for key in (qual, desc.name):
            if key in prior:
                p = prior[key]
                if not isinstance(p, Prior):
                    raise ValueError(f"prior[{key!r}] must be a gpscale.priors.Prior, got "
                                     f"{type(p).__name__}")
                if getattr(owner, desc.raw_name).requires_grad:
                    terms.append((qual, owner, desc, p))
                used.add(key)
                break
    unknown = sorted(set(prior) - used)
    if unknown:
        names = sorted({q for q, _, _ in params} | {d.name for _, _, d in params})
        raise ValueError(f"prior names {unknown} match no parameter of the model; choose "
                         f"from {names}")
    return PriorTerm(terms)
