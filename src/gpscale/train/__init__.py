"""Trainers: each takes a model (and data) and returns a :class:`FitResult`."""

from .admm import (
    ADMMDivergenceError,
    cg_predict,
    fit_admm_consensus,
    fit_admm_hocv,
    fit_admm_kfold,
)
from .grief import default_num_features, fit_grief_i, fit_grief_ii, init_exact, separable_kernel
from .lbfgs import fit_lbfgs
from .mcmc import MCMCResult, effective_sample_size, lognormal_from_mode_variance, mala
from .result import FitResult, theta_of
from .stochastic import fit_bsgd, fit_minimax, fit_scgd
from .warning_types import ConvergenceWarning, DataQualityWarning, SizeWarning

__all__ = ["fit_minimax", "fit_scgd", "fit_bsgd",
           "fit_lbfgs", "FitResult", "theta_of", "fit_grief_ii", "fit_grief_i",
           "default_num_features", "init_exact", "separable_kernel", "mala", "MCMCResult",
           "effective_sample_size", "lognormal_from_mode_variance",
           "fit_admm_hocv", "fit_admm_kfold", "fit_admm_consensus", "cg_predict",
           "ADMMDivergenceError", "ConvergenceWarning", "SizeWarning", "DataQualityWarning"]
