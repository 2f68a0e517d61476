"""Standardisation of inputs and targets, saved with a model and undone on prediction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Standardizer:
    """x ↦ (x − mean) / scale per column, y ↦ (y − y_mean) / y_scale.

    Constant input columns get scale 1 (they stay constant, at zero). A constant
    target cannot be standardised and raises ``ValueError``.
    """

    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: float
    y_scale: float

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray | None = None) -> Standardizer:
        X = np.asarray(X, dtype=np.float64)
        x_mean = X.mean(axis=0)
        x_scale = X.std(axis=0)
        x_scale = np.where(x_scale > 1e-12 * np.maximum(1.0, np.abs(x_mean)), x_scale, 1.0)
        y_mean, y_scale = 0.0, 1.0
        if y is not None:
            y = np.asarray(y, dtype=np.float64).reshape(-1)
            y_mean, y_scale = float(y.mean()), float(y.std())
            if not y_scale > 1e-12 * max(1.0, abs(y_mean)):
                raise ValueError(
                    f"y is constant (all values ≈ {y_mean:g}); there is nothing to "
                    "regress. Check the target column, or pass standardize=False."
                )
        return cls(x_mean, x_scale, y_mean, y_scale)

    @classmethod
    def identity(cls, d: int) -> Standardizer:
        return cls(np.zeros(d), np.ones(d), 0.0, 1.0)

    def transform_x(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_scale

    def inverse_y(self, mean: np.ndarray, var: np.ndarray | None = None):
        """Undo the target scaling on a predictive mean (and variance)."""
        m = np.asarray(mean) * self.y_scale + self.y_mean
        if var is None:
            return m
        return m, np.asarray(var) * self.y_scale**2

    def state(self) -> dict[str, Any]:
        return {"x_mean": self.x_mean.tolist(), "x_scale": self.x_scale.tolist(),
                "y_mean": self.y_mean, "y_scale": self.y_scale}

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> Standardizer:
        return cls(np.asarray(s["x_mean"], dtype=np.float64),
                   np.asarray(s["x_scale"], dtype=np.float64),
                   float(s["y_mean"]), float(s["y_scale"]))
