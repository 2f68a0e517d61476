"""The skill check of every method's fit (:mod:`gpscale.models.skill`), run on the fit
wherever it came from: the exact GP checks itself on its own rows
(``methods/exact.py``); every other fit is checked here, by leave-one-out of an exact
GP at its hyperparameters on a sample of at most ``LOO_ROWS`` training rows
(:func:`gpscale.models.skill.sample_skill`), and warns the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..models.skill import LOO_ROWS, sample_skill
from ..train import ConvergenceWarning, FitResult

__all__ = ["check_skill"]


def check_skill(model: Any, result: FitResult,
                rows: Callable[[int], tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Fill ``result.skill`` of a fit that has no skill check yet (every method but the
    exact GP; nothing for an interrupted fit) and warn (:class:`ConvergenceWarning`)
    when it finds no skill. ``rows(m)``: about m standardised training rows (X, y),
    drawn uniformly (all of them, or a pass over the partitions for rows not held)."""
    if result.skill or result.reason == "interrupted":
        return
    result.skill = sample_skill(model, *rows(LOO_ROWS))
    if result.skill.get("problem"):
        warnings.warn(result.skill["problem"], ConvergenceWarning, stacklevel=4)
