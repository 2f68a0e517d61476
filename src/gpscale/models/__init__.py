"""GP models: what the covariance is, its likelihood and its predictions."""

from .exact import ExactGP, gaussian_nll
from .feature import FeatureGP, chunk_statistics
from .grief import GriefIPosterior, OrthogonalGrief, grief_preconditioner
from .sparse import SparseGP
from .svgp import SVGP

__all__ = ["ExactGP", "FeatureGP", "chunk_statistics", "gaussian_nll", "GriefIPosterior",
           "OrthogonalGrief", "grief_preconditioner", "SparseGP", "SVGP"]
