"""Predictive metrics (Rasmussen & Williams 2006, §2.5): RMSE, SMSE, NLPD, MSLL/SNLP and
the NLML per training point. Inputs may be numpy arrays, torch tensors (any device) or
sequences; (n, 1) columns count as (n,). Every function returns a Python float.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["rmse", "mse", "smse", "nlpd", "snlp", "msll", "nlml_per_point"]

_LOG_2PI = math.log(2.0 * math.pi)


def _vec(a, name: str) -> np.ndarray:
    """``a`` as a finite float64 vector; raises ValueError naming ``name``."""
    if hasattr(a, "detach"):  # torch tensor: leave the device, drop the graph
        a = a.detach().cpu().numpy()
    try:
        v = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric; could not convert it ({err})") from None
    if v.ndim == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.ndim == 0:
        v = v.reshape(1)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D (n,) or a column (n, 1); got shape {v.shape}")
    if v.size == 0:
        raise ValueError(f"{name} is empty; give at least one value")
    if not np.isfinite(v).all():
        raise ValueError(f"{name} contains {int((~np.isfinite(v)).sum())} NaN/inf values; "
                         "drop those points or fix the prediction")
    return v


def _pair(y, mean) -> tuple[np.ndarray, np.ndarray]:
    y, m = _vec(y, "y"), _vec(mean, "mean")
    if y.shape != m.shape:
        raise ValueError(f"y has {y.size} values but mean has {m.size}; predict at exactly "
                         "the test inputs")
    return y, m


def _variance(var, n: int) -> np.ndarray:
    v = _vec(var, "var")
    if v.size == 1 and n != 1:
        v = np.full(n, v[0])  # a scalar variance applies to every point
    if v.size != n:
        raise ValueError(f"var has {v.size} values but y has {n}; give one predictive "
                         "variance per test point (or a single scalar)")
    if (v <= 0).any():
        raise ValueError(f"var must be > 0 everywhere; {int((v <= 0).sum())} entries are <= 0 "
                         f"(min {v.min():g}). Use the predictive variance of y (latent variance "
                         "plus the noise variance), not of f, or clamp it to a small floor.")
    return v


def mse(y, mean) -> float:
    """Mean squared error (1/n) Σ (y_i − m_i)²."""
    y, m = _pair(y, mean)
    return float(np.mean((y - m) ** 2))


def rmse(y, mean) -> float:
    """Root mean squared error √((1/n) Σ (y_i − m_i)²)."""
    return math.sqrt(mse(y, mean))


def smse(y, mean, y_train=None) -> float:
    """Standardised MSE (R&W §2.5): the MSE divided by the MSE of a trivial predictor.

    Without ``y_train`` the trivial predictor is the mean of the test targets, so the
    denominator is the (population, ddof=0) variance of ``y``: R&W's definition. With
    ``y_train`` it is the training mean, i.e. the denominator is (1/n) Σ (y_i − ȳ_train)²,
    which uses no test information. 0 is perfect, ≈ 1 is no better than the mean.
    """
    y, m = _pair(y, mean)
    ref = float(np.mean(y)) if y_train is None else float(np.mean(_vec(y_train, "y_train")))
    denom = float(np.mean((y - ref) ** 2))
    if not denom > 0:
        raise ValueError("the test targets y are all equal to the reference mean, so the MSE "
                         "cannot be standardised; use rmse instead")
    return float(np.mean((y - m) ** 2)) / denom


def _nlpd_terms(y: np.ndarray, m: np.ndarray, v: np.ndarray) -> np.ndarray:
    return 0.5 * (_LOG_2PI + np.log(v) + (y - m) ** 2 / v)


def nlpd(y, mean, var) -> float:
    """Mean negative log predictive density of Gaussian predictions:
    (1/n) Σ [½ log(2π σ_i²) + (y_i − μ_i)² / (2σ_i²)]. ``var`` is the predictive
    variance of the noisy targets y (not of the latent f)."""
    return float(np.mean(nlpd_terms(y, mean, var)))


def nlpd_terms(y, mean, var) -> np.ndarray:
    """Each point's negative log predictive density, ½ log(2π σ_i²) + (y_i − μ_i)² /
    (2σ_i²), whose mean is :func:`nlpd` (for paired comparisons of two models)."""
    y, m = _pair(y, mean)
    return _nlpd_terms(y, m, _variance(var, y.size))


def snlp(y, mean, var, y_train) -> float:
    """Mean standardised log loss, MSLL (R&W eq. 2.34 and §2.5): the NLPD minus the NLPD
    of the trivial Gaussian N(mean(y_train), var(y_train)), averaged over test points.
    Negative is better than the trivial model; 0 is no better."""
    y, m = _pair(y, mean)
    v = _variance(var, y.size)
    yt = _vec(y_train, "y_train")
    if yt.size < 2 or not np.var(yt) > 0:
        raise ValueError("y_train needs at least two distinct values to define the trivial "
                         "Gaussian of the MSLL")
    trivial = _nlpd_terms(y, np.full_like(y, yt.mean()), np.full_like(y, np.var(yt)))
    return float(np.mean(_nlpd_terms(y, m, v) - trivial))


msll = snlp


def nlml_per_point(nlml, n: int) -> float:
    """The negative log marginal likelihood divided by the number of training points,
    comparable across data sizes."""
    if hasattr(nlml, "detach"):
        nlml = nlml.detach().cpu()
        if nlml.numel() != 1:
            raise ValueError(f"nlml must be a scalar, got shape {tuple(nlml.shape)}")
        nlml = nlml.item()
    try:
        val = float(nlml)
    except (TypeError, ValueError):
        raise ValueError(f"nlml must be a number, got {nlml!r}") from None
    if not math.isfinite(val):
        raise ValueError(f"nlml is {val}; the likelihood evaluation failed upstream")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be the number of training points (a positive int), got {n!r}")
    return val / int(n)
