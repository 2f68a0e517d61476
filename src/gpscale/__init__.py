"""gpscale: Gaussian-process hyperparameter learning at scale."""

from . import kernels, linalg, models, train
from .kernels import make_kernel
from .models import ExactGP
from .train import FitResult, fit_lbfgs

__version__ = "0.1.0"

__all__ = ["kernels", "linalg", "models", "train", "make_kernel", "ExactGP", "FitResult",
           "fit_lbfgs", "__version__"]
