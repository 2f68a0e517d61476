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
        return {**common, "features": "rff", "d": f.d, "kernel": f.kernel,
                "orthogonal": f.orthogonal, "ard": f.lengthscale.numel() > 1}
    if isinstance(f, GriefFeatures):
        return {**common, "features": "grief", "d": f.d, "kernel": f.kernel, "m_bar": f.m_bar,
                "grid": f.grid_kind, "eig_floor": f.eig_floor, "gap_tol": f.gap_tol}
    if (extra := feature_config(f)) is not None:
        return {**common, **extra}
    raise ValueError(f"cannot save a feature map of type {type(f).__name__}")


def feature_map_from_config(config: dict[str, Any], dtype: torch.dtype,
                            state: dict[str, torch.Tensor], prefix: str = "features."
                            ) -> FeatureMap:
    """A feature map of the saved shapes. ``state`` is the owning model's state_dict
    (the map's entries under ``prefix``): a GRIEF grid is rebuilt from its saved
    ``grid`` buffer, and files written before the config held ``d`` take it from the
    saved training inputs ``X``."""
    if (feats := build_features(config, dtype)) is not None:  # neural / scaled RFF
        return feats
    kind = config["features"]
    if kind == "rff":
        d = config["d"] if "d" in config else state["X"].shape[1]
        return RandomFourierFeatures(d, config["num_features"], kernel=config["kernel"],
                                     ard=config["ard"], orthogonal=config["orthogonal"],
                                     dtype=dtype)
    if kind == "grief":
        return GriefFeatures.from_grid_buffer(
            state[prefix + "grid"].to(dtype), config["num_features"], m_bar=config["m_bar"],
            kernel=config["kernel"], grid=config.get("grid", "uniform"),
            eig_floor=config["eig_floor"], gap_tol=config["gap_tol"], dtype=dtype)
    raise ValueError(f"unknown saved feature map {kind!r}")
