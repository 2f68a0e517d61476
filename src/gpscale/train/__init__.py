"""Trainers: each takes a model (and data) and returns a :class:`FitResult`."""

from .lbfgs import fit_lbfgs
from .result import FitResult, theta_of

__all__ = ["fit_lbfgs", "FitResult", "theta_of"]
