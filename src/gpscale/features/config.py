"""A feature map's saved form: its constructor options as plain values, and the map of the
same shapes rebuilt from them (the values then come from the model's ``state_dict``)."""

from __future__ import annotations

from typing import Any

import torch

from .base import FeatureMap
from .grief import GriefFeatures
from .neural import build_features, feature_config
from .rff import RandomFourierFeatures

__all__ = ["feature_map_config", "feature_map_from_config"]


def feature_map_config(f: FeatureMap) -> dict[str, Any]:
    """Constructor options of ``f`` (random Fourier, GRIEF, neural or scaled RFF)."""
    common = {"num_features": f.num_features}
    if isinstance(f, RandomFourierFeatures):
        return {**common, "features": "rff", "kernel": f.kernel, "orthogonal": f.orthogonal,
                "ard": f.lengthscale.numel() > 1}
    if isinstance(f, GriefFeatures):
        return {**common, "features": "grief", "kernel": f.kernel, "m_bar": f.m_bar,
                "grid": f.grid_kind, "eig_floor": f.eig_floor, "gap_tol": f.gap_tol}
    if (extra := feature_config(f)) is not None:
        return {**common, **extra}
    raise ValueError(f"cannot save a feature map of type {type(f).__name__}")


def feature_map_from_config(config: dict[str, Any], X: torch.Tensor,
                            dtype: torch.dtype) -> FeatureMap:
    """A feature map of the saved shapes; ``X`` (the training inputs) places a GRIEF grid
    and gives the input dimension of the maps that do not save it."""
    if (feats := build_features(config, dtype)) is not None:  # neural / scaled RFF
        return feats
    if config["features"] == "rff":
        return RandomFourierFeatures(X.shape[1], config["num_features"], kernel=config["kernel"],
                                     ard=config["ard"], orthogonal=config["orthogonal"],
                                     dtype=dtype)
    if config["features"] == "grief":
        return GriefFeatures(X, config["num_features"], m_bar=config["m_bar"],
                             kernel=config["kernel"], grid=config.get("grid", "uniform"),
                             eig_floor=config["eig_floor"], gap_tol=config["gap_tol"],
                             dtype=dtype)
    raise ValueError(f"unknown saved feature map {config.get('features')!r}")
