"""GP models: what the covariance is, its likelihood and its predictions. Every model
honours the contract of :class:`GPModel` (see :mod:`gpscale.models.base`)."""

from .base import MODEL_CLASSES, GPModel, MeanAndVariance, model_class
from .exact import Cholesky, ExactGP, gaussian_nll
from .exact_cg import ConjugateGradients
from .feature import FeatureGP, chunk_statistics
from .fitc import FITC
from .grief import GriefIPosterior, OrthogonalGrief, grief_preconditioner
from .grief_eigen import ReweightedGrief, ReweightedGriefPosterior
from .sgpr import SGPR, StreamedSGPR
from .sparse import SparseGP
from .svgp import SVGP

__all__ = ["GPModel", "MeanAndVariance", "MODEL_CLASSES", "model_class", "ExactGP",
           "FeatureGP", "FITC", "chunk_statistics", "gaussian_nll", "GriefIPosterior",
           "OrthogonalGrief", "grief_preconditioner", "ReweightedGrief",
           "ReweightedGriefPosterior", "SGPR", "StreamedSGPR", "SparseGP", "SVGP",
           "Cholesky", "ConjugateGradients"]
