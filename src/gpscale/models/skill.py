"""Whether a fit has skill: leave-one-out predictions from one Cholesky factor, and the
lengthscales against the inputs' spread.

**Leave-one-out** (Rasmussen & Williams 2006, eq. 5.12). With C = K + σ²I = L Lᵀ and
α = C⁻¹(y − m), the prediction of y_i from every other row has mean
y_i − α_i / [C⁻¹]_ii and variance 1 / [C⁻¹]_ii, so one factor gives all n residuals
r_i = α_i / [C⁻¹]_ii and LOO R² = 1 − Σ r_i² / Σ (y_i − ȳ)². With merged copies
(C = K + σ² diag(1/c), :mod:`gpscale.models.copies`) leaving a row out leaves out every
copy of its input, so copies cannot predict each other. Past :data:`LOO_ROWS` rows the
check runs on a uniform sample of that many, conditioned on the sample alone.

An exact GP is checked on its own rows (:func:`fit_skill`). Any other model is checked
by the exact GP **at its hyperparameters** on a sample of its training rows
(:func:`sample_skill`): its kernel (or its feature map's covariance Φ W Φᵀ), noise and
mean. Predicting training rows from the fitted model itself would not be held out, and
refitting without them would cost a fit; LOO of that GP is held out, costs one Cholesky
of :data:`LOO_ROWS` rows, and fails exactly when the hyperparameters describe no
predictable function (a signal drowned in the noise, or lengthscales that interpolate).

**Categories.** When every input column holds only 0 and 1 (one-hot levels,
indicators), every row is a copy of the others of its level, and leaving out all copies
leaves out the level: a kernel over categories cannot predict a level from the others,
so such a fit would always look skill-less. There, one row is left out at a time and the
other copies stay: with g's other rows giving f_g ~ N(m_g, s_g) (the merged LOO,
s_g = v_g − σ²/c_g) and the c_g − 1 copies left an independent N(f_g, σ²) each, the
prediction of row j is the precision-weighted mean of m_g and their mean, and the sum
of the squared residuals over g needs only ȳ_g and the spread S_g. Whatever the columns,
a fit with 0/1 inputs is also judged against the **per-level means**: the mean of the
other rows of the row's cell (its combination of 0/1 values; the overall mean for a
cell of one row), left one row out the same way. A fit whose squared row-LOO residuals
exceed :data:`LEVELS_MARGIN` times the cells' is worse than that baseline.

A fit **has no skill** when its LOO predictions explain almost nothing
(R² ≤ :data:`NO_SKILL_R2`), when it is worse than the per-level means, or when it
**interpolates**: a lengthscale below
:data:`INTERPOLATION_SHARE` of its input column's standard deviation, in a column with
a value for about every row, so that every row is its own island (typical of
duplicated rows, heavy-tailed targets or a noise driven to its floor). The target's
excess kurtosis is reported beside it (heavy tails: :func:`gpscale.quality.heavy_tails`).
"""

from __future__ import annotations

from typing import Any

import torch

from ..linalg import robust_cholesky
from ..linalg.cholesky import inverse_from_cholesky
from ..params import positive_params
from ..preprocessing import Moments
from ..quality import heavy_tails
from .copies import noise_diagonal

__all__ = ["loo_residuals", "fit_skill", "sample_skill", "skill_problem", "LOO_ROWS",
           "NO_SKILL_R2", "INTERPOLATION_SHARE", "ISLAND_VALUES", "LEVELS_MARGIN",
           "row_residuals", "levels_loo"]

#: the check's rows: every row up to this many, else a uniform sample of them (one
#: Cholesky of this size, a fraction of one NLML evaluation of the fits that need it)
LOO_ROWS = 2000
#: LOO R² at or below this: the fit's predictions explain (almost) nothing
NO_SKILL_R2 = 0.05
#: a lengthscale below this share of its column's standard deviation interpolates
INTERPOLATION_SHARE = 1e-3
#: ... in a column where at least this share of the rows have distinct values
ISLAND_VALUES = 0.1
#: a fit whose squared LOO residuals exceed this many times those of the per-level
#: means is worse than them (room for the sampling error of both on 2000 rows)
LEVELS_MARGIN = 1.1


def loo_residuals(L: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, v): the leave-one-out residuals r_i = y_i − μ₋ᵢ = α_i / [C⁻¹]_ii and
    predictive variances v_i = 1 / [C⁻¹]_ii from C = L Lᵀ and α = C⁻¹(y − m)
    (R&W eq. 5.12)."""
    diag = inverse_from_cholesky(L).diagonal()
    return alpha / diag, 1.0 / diag


def row_residuals(r: torch.Tensor, v: torch.Tensor, ybar: torch.Tensor,
                  counts: torch.Tensor, spread: torch.Tensor, noise: torch.Tensor
                  ) -> torch.Tensor:
    """Per merged input g, the sum over its c_g rows of the squared residuals when one
    row is left out at a time and the other copies stay (module docstring), from the
    merged LOO residuals ``r`` and variances ``v`` of the means ``ybar``, the ``counts``,
    the ``spread`` S_g and the noise variance σ²."""
    s = torch.clamp(v - noise / counts, min=1e-12 * float(noise))
    m = ybar - r
    precision = 1.0 / s + (counts - 1.0) / noise
    a = 1.0 + 1.0 / (noise * precision)
    b = (m / s + counts * ybar / noise) / precision
    return a.square() * spread + counts * (a * ybar - b).square()


def levels_loo(X: torch.Tensor, ybar: torch.Tensor, counts: torch.Tensor,
               spread: torch.Tensor) -> float | None:
    """The sum of squared residuals of the per-level means left one row out (module
    docstring) over rows at inputs ``X`` with mean ``ybar``, ``counts`` rows and
    ``spread`` S each; None when no column holds only 0 and 1."""
    binary = ((X == 0) | (X == 1)).all(0)
    if not bool(binary.any()):
        return None
    _, cell = torch.unique(X[:, binary], dim=0, return_inverse=True)
    k = int(cell.max()) + 1
    n = counts.new_zeros(k).index_add_(0, cell, counts)
    total = ybar.new_zeros(k).index_add_(0, cell, counts * ybar)
    squares = ybar.new_zeros(k).index_add_(0, cell, spread + counts * ybar.square())
    within = torch.clamp(squares - total.square() / n, min=0.0)
    rows = float(counts.sum())
    many = n > 1.5
    sse = float((within[many] * (n[many] / (n[many] - 1)).square()).sum())
    if rows > 1 and not bool(many.all()):  # a cell of one row: the other rows' mean
        grand = float(total.sum()) / rows
        sse += float(((total[~many] - grand).square()).sum()) * (rows / (rows - 1)) ** 2
    return sse


@torch.no_grad()
def fit_skill(model: Any, rows: int = LOO_ROWS, seed: int = 0) -> dict[str, Any]:
    """The skill of an exact GP (``model.kernel``, ``model.X``, ``model.y``, ``noise``,
    ``mean_constant``, ``copies``) at its current hyperparameters: ``loo_r2``,
    ``loo_rows``, ``lengthscale_share`` (the smallest lengthscale over its column's
    standard deviation; None without lengthscales), ``y_excess_kurtosis``, ``of``
    ("the model") and ``problem`` (:func:`skill_problem`; empty: none found). Plain
    values, saved with the fit."""
    X, y = model.X, model.y
    keep = _sample(int(X.shape[0]), rows, seed, X.device)
    noise = noise_diagonal(model.noise.detach(), model.copies)
    if keep is not None and isinstance(noise, torch.Tensor) and noise.dim():
        noise = noise[keep]
    Xs, ys = (X, y) if keep is None else (X[keep], y[keep])
    C = model.kernel(Xs)
    C.diagonal().add_(noise)
    copies, sigma2 = model.copies, model.noise.detach()
    if copies is not None and sigma2.numel() == 1:
        counts, spread = copies.counts, copies.spread
        copied = ((counts, spread) if keep is None else (counts[keep], spread[keep]))
        copied = tuple(t.to(ys) for t in copied) + (sigma2.reshape(()).to(ys),)
    else:
        copied = None
    return _skill(C, ys, model.mean_constant.detach(), model.kernel, X, y, "the model",
                  Xs, copied)


@torch.no_grad()
def sample_skill(model: Any, X: torch.Tensor, y: torch.Tensor, rows: int = LOO_ROWS,
                 seed: int = 0) -> dict[str, Any]:
    """:func:`fit_skill`'s values for any fitted model on training rows ``X``, ``y`` (a
    sample of them will do) as it was trained on them (standardised): the LOO of an
    exact GP at the model's hyperparameters (``of``: "an exact GP at the fit's
    hyperparameters"); empty when the model has no kernel or feature map with one
    noise variance to build it from."""
    noise = getattr(model, "noise", None)
    if not isinstance(noise, torch.Tensor) or noise.numel() != 1:
        return {}
    keep = _sample(int(X.shape[0]), rows, seed, X.device)
    Xs, ys = (X, y) if keep is None else (X[keep], y[keep])
    Xs, ys = Xs.to(noise), ys.to(noise)
    C = _prior_covariance(model, Xs)
    if C is None:
        return {}
    C.diagonal().add_(noise.detach().reshape(()))
    mean = getattr(model, "mean_constant", None)
    mean = 0.0 if mean is None else mean.detach()
    return _skill(C, ys, mean, model, Xs, ys, "an exact GP at the fit's hyperparameters",
                  Xs)


def _sample(n: int, rows: int, seed: int, device: Any) -> torch.Tensor | None:
    """A uniform sample of ``rows`` of n row indices (None: every row)."""
    if n <= rows:
        return None
    g = torch.Generator().manual_seed(int(seed))
    return torch.randperm(n, generator=g)[:rows].to(device)


def _prior_covariance(model: Any, X: torch.Tensor) -> torch.Tensor | None:
    """K(X, X) of the model's prior: its kernel's, or Φ W Φᵀ of its feature map."""
    kernel = getattr(model, "kernel", None)
    if isinstance(kernel, torch.nn.Module):
        return kernel(X).clone()  # (a kernel may hand out a memoised matrix)
    features, weight = getattr(model, "features", None), getattr(model, "weight", None)
    if isinstance(features, torch.nn.Module) and isinstance(weight, torch.Tensor):
        phi = features(X)
        return (phi * weight.detach()) @ phi.mT
    return None


def _skill(C: torch.Tensor, ys: torch.Tensor, mean: Any, params: Any, X: torch.Tensor,
           y: torch.Tensor, of: str, Xs: torch.Tensor,
           copied: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
           ) -> dict[str, Any]:
    """The check's values from C = K + noise on the checked rows ``ys`` at inputs
    ``Xs``; ``params``: the module whose lengthscales are compared with the spread of
    ``X``; ``y``: every training target the check sees (for its kurtosis); ``copied``:
    (counts, spread, σ²) when each checked row is the mean of merged copies."""
    L = robust_cholesky(C)
    resid, var = loo_residuals(L, torch.cholesky_solve((ys - mean)[:, None], L)[:, 0])
    spread = float((ys - ys.mean()).square().sum())
    r2 = 1.0 - float(resid.square().sum()) / spread if spread > 0 else float("nan")
    if copied is None:  # one row each: leaving a row out leaves out nothing else
        counts, within = torch.ones_like(ys), torch.zeros_like(ys)
        row_sse = float(resid.square().sum())
    else:
        counts, within, sigma2 = copied
        row_sse = float(row_residuals(resid, var, ys, counts, within, sigma2).sum())
    grand = float((counts * ys).sum() / counts.sum())
    total = float((within + counts * (ys - grand).square()).sum())
    rows_r2 = 1.0 - row_sse / total if total > 0 else float("nan")
    levels = levels_loo(Xs, ys, counts, within)
    checked = int(ys.shape[0])
    if levels is not None and bool(((Xs == 0) | (Xs == 1)).all()):
        # categories only: leaving out every copy would leave out the level
        r2, checked = rows_r2, int(round(float(counts.sum())))
    kurt = float(Moments.of(y.detach().cpu().numpy()).excess_kurtosis[0])
    skill = {"loo_r2": r2, "loo_rows": checked, "of": of,
             "lengthscale_share": _lengthscale_share(params, X),
             "y_excess_kurtosis": kurt if kurt == kurt else None, "y_rows": int(y.shape[0])}
    if levels is not None and total > 0:
        skill["rows_r2"], skill["levels_r2"] = rows_r2, 1.0 - levels / total
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
    rows, levels = skill.get("rows_r2"), skill.get("levels_r2")
    worse = (rows is not None and levels is not None
             and 1.0 - rows > LEVELS_MARGIN * max(1.0 - levels, 0.0))
    if worse:
        found.append(f"its leave-one-out predictions (R² {rows:.3g}) are worse than the "
                     f"means of its category levels (R² {levels:.3g})")
    if not found:
        return ""
    if worse and len(found) == 1:
        return ("the fit has no predictive skill beyond its categories: " + found[0] +
                ". Try a kernel over categories (--kernel rbf-ard-cat, kernel="
                "'rbf-ard-cat' in Python) or more iterations (--max-iter)")
    kurt = skill.get("y_excess_kurtosis")
    tails = (f"; y has heavy tails (excess kurtosis {kurt:.3g}): check it for outliers"
             if heavy_tails(kurt, skill.get("y_rows", 0)) else "")
    floor = (", or name a noise floor (noise_floor=, --option noise_floor=0.01)"
             if skill.get("of", "the model") == "the model" else "")
    return ("the fit has no predictive skill: " + " and ".join(found) + tails +
            ". Drop duplicated rows, check the target for heavy tails or outliers" + floor)


def _percent(r2: float) -> str:
    return "nothing" if not r2 > 0 else f"{100 * r2:.2g} %"


def _lengthscale_share(kernel: Any, X: torch.Tensor) -> float | None:
    """The smallest ratio of a lengthscale to its column's standard deviation (one
    lengthscale for every column: against their median); None when there are none.

    Only columns with a value for about every row are judged (at least
    :data:`ISLAND_VALUES` of the rows distinct): below the gap between its few values
    (a one-hot code, an indicator, a year) a lengthscale separates those values'
    groups, as a kernel over categories does, and leaves every row within a group
    correlated with the others."""
    std = X.std(0) if X.shape[0] > 1 else X.new_zeros(X.shape[1])
    values = torch.tensor([torch.unique(X[:, j]).numel() for j in range(X.shape[1])],
                          device=std.device)
    std = torch.where(values >= ISLAND_VALUES * X.shape[0], std, torch.zeros_like(std))
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
