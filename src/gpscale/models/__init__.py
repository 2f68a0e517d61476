"""GP models: what the covariance is, its likelihood and its predictions."""

from .exact import ExactGP, gaussian_nll
from .feature import FeatureGP, chunk_statistics

__all__ = ["ExactGP", "FeatureGP", "chunk_statistics", "gaussian_nll"]
