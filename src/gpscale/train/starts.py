"""Where a hyperparameter search starts, and when it gets a second start.

These are the start policies of the L-BFGS methods, kept in one place so that the
adapters in :mod:`gpscale.methods` (``exact``, ``sgpr``) only wire them up:

- :func:`sqrt_d_start`: stationary lengthscales left at the default 1 start at √d.
  Standardised inputs are about √(2d) apart, so a lengthscale of 1 sees almost no
  correlation in many dimensions and the search stalls on the plateau where the model
  explains y as noise.
- :func:`fit_from_sqrt_d`: ``exact``'s policy. Start from √d; if the search ends with the
  noise at its floor (an interpolating optimum, which long lengthscales can fall into),
  run again from the given values and keep the lower objective.
- :func:`warm_start_sgpr`: a first SGPR search on a random sample of rows, whose Z and
  hyperparameters the full-data search continues from. Each evaluation on the sample
  costs a fraction of a full one.
- :func:`noise_above` and :func:`keep_lower`: ``sgpr``'s second start. When a search
  ends calling most of y noise, a second search starts from an exact GP fitted on a
  sample of rows (:func:`exact_start_on_sample`) and the lower bound wins.

Both runs of a second start are counted in the result: its ``n_evals`` and ``wall_s``
are the totals.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TypeVar

import torch

from ..kernels import Stationary
from ..models.sgpr import SGPR
from .lbfgs import OUT_OF_TIME, fit_lbfgs
from .result import FitResult, restore, snapshot
from .warning_types import ConvergenceWarning

__all__ = ["DEFAULT_LENGTHSCALE", "sqrt_d_start", "noise_at_floor", "fit_from_sqrt_d",
           "noise_above", "keep_lower", "sample_rows", "exact_start_on_sample",
           "warm_start_sgpr"]

#: the lengthscale a stationary kernel has unless it is given one
DEFAULT_LENGTHSCALE = 1.0

M = TypeVar("M")


def _trainable_stationary(model: torch.nn.Module) -> list[Stationary]:
    return [m for m in model.kernel.modules()
            if isinstance(m, Stationary) and m.raw_lengthscale.requires_grad]


def sqrt_d_start(model: torch.nn.Module) -> bool:
    """Give √(columns the kernel sees) to every trainable stationary kernel whose
    lengthscales are all at :data:`DEFAULT_LENGTHSCALE`. Given lengthscales (any other
    value) are kept. Returns True when any lengthscale changed. ``model`` has
    ``kernel`` and ``X``."""
    d, changed = model.X.shape[1], False
    for k in _trainable_stationary(model):
        ls = k.lengthscale.detach()
        if not bool(torch.all((ls - DEFAULT_LENGTHSCALE).abs() <= 1e-9)):  # given ones
            continue
        cols = len(k.active_dims) if k.active_dims is not None else d
        if cols > 1:
            k.lengthscale, changed = ls * math.sqrt(cols), True
    return changed


def noise_at_floor(model: torch.nn.Module) -> bool:
    """Whether a trainable noise variance ended within 1 % of its floor."""
    floor = type(model).noise.floor_of(model)
    return bool(model.raw_noise.requires_grad) and float(model.noise.detach()) < 1.01 * floor


def _count_both(best: FitResult, first: FitResult, second: FitResult) -> None:
    best.n_evals = first.n_evals + second.n_evals
    best.wall_s = first.wall_s + second.wall_s


def fit_from_sqrt_d(model: torch.nn.Module, fit: Callable[[], FitResult],
                    init: str = "auto") -> FitResult:
    """``exact``'s start: ``fit()`` searches from the model's current values.

    With ``init="auto"`` and lengthscales moved by :func:`sqrt_d_start`, a search that
    ends with the noise at its floor gets a second search from the given values, and
    the lower objective wins (ties keep the first); a search stopped by Ctrl-C or by
    its deadline gets none. The model is left holding the winner's values. With
    ``init="given"`` it is one search from the given values."""
    params = [p for p in model.parameters() if p.requires_grad]
    given = snapshot(params)
    if not (init == "auto" and sqrt_d_start(model)):
        return fit()
    result = fit()
    if result.reason in ("interrupted", OUT_OF_TIME) or not noise_at_floor(model):
        return result  # Ctrl-C or the deadline: no second search
    found = snapshot(params)
    restore(params, given)
    other = fit()
    best = other if other.objective < result.objective else result
    if best is result:
        restore(params, found)
    _count_both(best, result, other)
    return best


def noise_above(model: torch.nn.Module, y: torch.Tensor, share: float) -> bool:
    """Whether the fitted noise variance is above ``share`` · var(y): the search
    explains most of y as noise (``sgpr``'s trigger for a second start). A NaN noise
    counts as above."""
    return not float(model.noise.detach()) <= share * float(y.var())


def keep_lower(first: tuple[M, FitResult], second: tuple[M, FitResult]
               ) -> tuple[M, FitResult]:
    """Of two (model, result) fits, the one with the lower objective (ties keep the
    first), its result counting both runs."""
    best = second if second[1].objective < first[1].objective else first
    _count_both(best[1], first[1], second[1])
    return best


def sample_rows(n: int, rows: int, seed: int, device: torch.device) -> torch.Tensor:
    """``rows`` random row indices of range(n) (all n when fewer), seeded."""
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))[:rows]
    return idx.to(device)


def exact_start_on_sample(X: torch.Tensor, y: torch.Tensor, rows: int, seed: int,
                          fit_exact: Callable[..., tuple]) -> float:
    """Fit by ``fit_exact(X_sample, y_sample)`` on ``rows`` random rows (or all, when
    fewer) and return the fitted noise variance. ``fit_exact`` trains the kernel it was
    given in place. Its convergence warnings stay inside: the fit only gives starting
    values."""
    idx = sample_rows(int(X.shape[0]), rows, seed, X.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        exact, _ = fit_exact(X[idx], y[idx])
    return float(exact.noise.detach())


def warm_start_sgpr(model: SGPR, X: torch.Tensor, y: torch.Tensor, rows: int,
                    generator: torch.Generator, max_iter: int, **options) -> FitResult:
    """Search an SGPR on ``rows`` random rows (drawn with ``generator``) from ``model``'s
    Z and noise, for at most ``max_iter`` iterations, sharing ``model``'s kernel. Then
    copy its Z and noise into ``model``. ``options`` go to
    :func:`~gpscale.train.fit_lbfgs`. Returns the sample search's result."""
    idx = torch.randperm(X.shape[0], generator=generator)[:rows].to(X.device)
    small = SGPR(model.kernel, X[idx], y[idx], model.Z.detach(),
                 noise=float(model.noise.detach()), learn_z=model.Z.requires_grad,
                 dtype=X.dtype, device=X.device)
    warm = fit_lbfgs(small, small.objective, max_iter=max_iter, warn=False, **options)
    with torch.no_grad():  # the kernel is shared; Z and the noise are copied over
        model.Z.copy_(small.Z)
        model.raw_noise.copy_(small.raw_noise)
    return warm
