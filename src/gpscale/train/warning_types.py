"""The warnings trainers emit, importable as ``gpscale.ConvergenceWarning`` and
``gpscale.SizeWarning`` (also from ``gpscale.train``; :class:`DataQualityWarning` from
``gpscale.train`` and ``gpscale.quality``) so that users can filter them:
``warnings.simplefilter("error", gpscale.ConvergenceWarning)``."""

from __future__ import annotations

from ..quality import DataQualityWarning  # defined there: preprocessing imports it early

__all__ = ["ConvergenceWarning", "DataQualityWarning", "SizeWarning"]


class ConvergenceWarning(UserWarning):
    """The optimiser ran out of iterations or evaluations before its stopping rule held
    (scikit-learn's convention; defined here because scikit-learn is optional)."""


class SizeWarning(UserWarning):
    """The exact GP is about to need more memory or time than the machine has."""
