"""Feature maps X ↦ Φ for finite-feature (weight-space) GPs."""

from .base import FeatureMap
from .rff import RandomFourierFeatures, draw_frequencies

__all__ = ["FeatureMap", "RandomFourierFeatures", "draw_frequencies"]
