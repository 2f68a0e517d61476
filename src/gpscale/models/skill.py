"""Whether an exact GP's fit has skill: its leave-one-out predictions, from one Cholesky
factor, and its lengthscales against the inputs' spread.

**Leave-one-out** (Rasmussen & Williams 2006, eq. 5.12). With C = K + σ²I = L Lᵀ and
α = C⁻¹(y − m), the prediction of y_i from every other row has mean
y_i − α_i / [C⁻¹]_ii and variance 1 / [C⁻¹]_ii, so one factor gives all n residuals
r_i = α_i / [C⁻¹]_ii and LOO R² = 1 − Σ r_i² / Σ (y_i − ȳ)². With merged copies
(C = K + σ² diag(1/c), :mod:`gpscale.models.copies`) leaving a row out leaves out every
copy of its input, so copies cannot predict each other. Past :data:`LOO_ROWS` rows the
check runs on a uniform sample of that many, conditioned on the sample alone.

A fit **has no skill** when its LOO predictions explain almost nothing
(R² ≤ :data:`NO_SKILL_R2`), or when it **interpolates**: a lengthscale below
:data:`INTERPOLATION_SHARE` of its input column's standard deviation, so that every
row is its own island (typical of duplicated rows, heavy-tailed targets or a noise
driven to its floor). The target's excess kurtosis is reported beside it (above
:data:`HEAVY_TAILS` on :data:`HEAVY_TAILS_ROWS` rows or more: heavy tails).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..linalg import robust_cholesky
from ..linalg.cholesky import inverse_from_cholesky
from ..params import positive_params
from .copies import noise_diagonal

__all__ = ["loo_residuals", "fit_skill", "skill_problem", "LOO_ROWS", "NO_SKILL_R2",
           "INTERPOLATION_SHARE", "HEAVY_TAILS", "HEAVY_TAILS_ROWS"]

#: the check's rows: every row up to this many, else a uniform sample of them (one
#: Cholesky of this size, a fraction of one NLML evaluation of the fits that need it)
LOO_ROWS = 2000
#: LOO R² at or below this: the fit's predictions explain (almost) nothing
NO_SKILL_R2 = 0.05
#: a lengthscale below this share of its column's standard deviation interpolates
INTERPOLATION_SHARE = 1e-3
#: excess kurtosis of y above this (a Gaussian's is 0, a Laplace's 3, Student-t₅'s 6) ...
HEAVY_TAILS = 10.0
#: ... on at least this many rows: heavy tails
HEAVY_TAILS_ROWS = 100


def loo_residuals(L: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, v): the leave-one-out residuals r_i = y_i − μ₋ᵢ = α_i / [C⁻¹]_ii and
    predictive variances v_i = 1 / [C⁻¹]_ii from C = L Lᵀ and α = C⁻¹(y − m)
    (R&W eq. 5.12)."""
    diag = inverse_from_cholesky(L).diagonal()
    return alpha / diag, 1.0 / diag


@torch.no_grad()
def fit_skill(model: Any, rows: int = LOO_ROWS, seed: int = 0) -> dict[str, Any]:
    """The skill of an exact GP (``model.kernel``, ``model.X``, ``model.y``, ``noise``,
    ``mean_constant``, ``copies``) at its current hyperparameters: ``loo_r2``,
    ``loo_rows``, ``lengthscale_share`` (the smallest lengthscale over its column's
    standard deviation; None without lengthscales), ``y_excess_kurtosis`` and
    ``problem`` (:func:`skill_problem`; empty: none found). Plain values, saved with
    the fit."""
    X, y, copies = model.X, model.y, model.copies
    n = int(X.shape[0])
    keep = None
    if n > rows:
        g = torch.Generator().manual_seed(int(seed))
        keep = torch.randperm(n, generator=g)[:rows].to(X.device)
    Xs = X if keep is None else X[keep]
    ys = y if keep is None else y[keep]
    noise = noise_diagonal(model.noise.detach(), copies)
    if keep is not None and isinstance(noise, torch.Tensor) and noise.dim():
        noise = noise[keep]
    C = model.kernel(Xs)
    C.diagonal().add_(noise)
    L = robust_cholesky(C)
    r = ys - model.mean_constant.detach()
    resid, _ = loo_residuals(L, torch.cholesky_solve(r[:, None], L)[:, 0])
    spread = float((ys - ys.mean()).square().sum())
    r2 = 1.0 - float(resid.square().sum()) / spread if spread > 0 else float("nan")
    skill = {"loo_r2": r2, "loo_rows": int(Xs.shape[0]),
             "lengthscale_share": _lengthscale_share(model.kernel, X),
             "y_excess_kurtosis": _excess_kurtosis(y), "y_rows": n}
    skill["problem"] = skill_problem(skill)
    return skill


def skill_problem(skill: dict[str, Any]) -> str:
    """What is wrong with a fit whose :func:`fit_skill` is ``skill``, in words that say
    what to do; empty when nothing is."""
    found = []
    share = skill.get("lengthscale_share")
    if share is not None and share < INTERPOLATION_SHARE:
        found.append(f"a lengthscale is {share:.2g} x its input column's standard "
                     "deviation, so the fit interpolates each row on its own")
    r2 = skill.get("loo_r2")
    if r2 is not None and not r2 > NO_SKILL_R2:
        found.append(f"its leave-one-out predictions explain {_percent(r2)} of y's "
                     f"variance (R² {r2:.3g} on {skill.get('loo_rows')} rows)")
    if not found:
        return ""
    kurt = skill.get("y_excess_kurtosis")
    tails = (f"; y has heavy tails (excess kurtosis {kurt:.3g}): check it for outliers"
             if kurt is not None and kurt > HEAVY_TAILS
             and skill.get("y_rows", 0) >= HEAVY_TAILS_ROWS else "")
    return ("the fit has no predictive skill: " + " and ".join(found) + tails +
            ". Drop duplicated rows, check the target for heavy tails or outliers, or "
            "name a noise floor (noise_floor=, --option noise_floor=0.01)")


def _percent(r2: float) -> str:
    return "nothing" if not r2 > 0 else f"{100 * r2:.2g} %"


def _lengthscale_share(kernel: Any, X: torch.Tensor) -> float | None:
    """The smallest ratio of a lengthscale to its column's standard deviation (one
    lengthscale for every column: against their median); None when there are none."""
    std = X.std(0) if X.shape[0] > 1 else X.new_zeros(X.shape[1])
    shares = []
    for name, sub, desc in positive_params(kernel):
        if not name.endswith("lengthscale"):
            continue
        value = getattr(sub, desc.name).detach().reshape(-1)
        dims = getattr(sub, "active_dims", None)
        cols = std if dims is None else std[torch.as_tensor(dims, device=std.device)]
        if value.numel() == cols.numel():
            ok = cols > 0
            shares += (value[ok] / cols[ok]).tolist()
        elif value.numel() == 1 and cols.numel() and (cols > 0).any():
            shares.append(float(value[0] / cols[cols > 0].median()))
    return min(shares) if shares else None


def _excess_kurtosis(y: torch.Tensor) -> float | None:
    """The sample excess kurtosis m₄/m₂² − 3 of y (None for fewer than 4 rows or no
    variance)."""
    if y.numel() < 4:
        return None
    d = y - y.mean()
    m2 = float(d.square().mean())
    return float(d.pow(4).mean()) / m2**2 - 3.0 if m2 > 0 and math.isfinite(m2) else None
