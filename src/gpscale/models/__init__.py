"""GP models: what the covariance is, its likelihood and its predictions."""

from .exact import ExactGP, gaussian_nll

__all__ = ["ExactGP", "gaussian_nll"]
