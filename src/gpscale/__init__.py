"""gpscale: Gaussian-process hyperparameter learning at scale.

``gpscale.fit(X, y, method=..., kernel=...)`` trains on raw data and returns a
:class:`Predictor`; the building blocks live in the sub-packages: ``kernels``,
``features``, ``linalg``, ``models``, ``train``, ``data``, ``metrics`` and ``bench``.
"""

from . import api, data, features, kernels, linalg, methods, metrics, models, train
from .api import METHODS, Predictor, fit, load, register_method
from .kernels import make_kernel
from .models import ExactGP, FeatureGP
from .train import ConvergenceWarning, FitResult, SizeWarning, fit_lbfgs

__version__ = "0.1.0"

__all__ = ["api", "methods", "data", "features", "kernels", "linalg", "metrics", "models", "train",
           "fit", "load", "Predictor", "register_method", "METHODS", "make_kernel", "ExactGP",
           "FeatureGP", "FitResult", "fit_lbfgs", "ConvergenceWarning", "SizeWarning",
           "__version__"]
