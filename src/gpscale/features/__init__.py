"""Feature maps X ↦ Φ for finite-feature (weight-space) GPs."""

from .base import FeatureMap
from .grief import GriefFeatures, grid_1d, kernel_1d, sym_eig
from .kernel import FeatureKernel
from .neural import NeuralFeatures, ScaledFeatures
from .rff import RandomFourierFeatures, draw_frequencies

__all__ = ["FeatureMap", "RandomFourierFeatures", "draw_frequencies", "GriefFeatures",
           "grid_1d", "kernel_1d", "sym_eig",
           "NeuralFeatures", "ScaledFeatures", "FeatureKernel"]
