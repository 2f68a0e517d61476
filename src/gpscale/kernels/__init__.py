"""Covariance functions, named kernels and rebuilding a kernel from its config.

Kernels own their facts: each class registers itself by name in :data:`KERNEL_CLASSES`
(how a saved config is rebuilt, :func:`from_config`) and answers
:meth:`Kernel.spectral_density` (what the feature methods read, through
:func:`spectral_facts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import KERNEL_CLASSES, Kernel, Product, Scale, Sum, kernel_class
from .categorical import Exchangeable, mixed_kernel
from .chunked import kernel_matmul
from .discrete import Hamming, Intersection, Spectrum, Tanimoto, TanimotoDot, scaled_sum
from .facts import SpectralFacts, spectral_facts
from .gaps import GapVariance, gap_columns, gap_rows, with_gaps
from .periodic import LocallyPeriodic, Periodic
from .spectral import SpectralDensity
from .stationary import RBF, Linear, Matern, RationalQuadratic, Stationary

__all__ = [
    "Kernel", "Scale", "Sum", "Product", "RBF", "Matern", "RationalQuadratic", "Linear",
    "Periodic", "LocallyPeriodic", "Stationary", "kernel_matmul", "make_kernel",
    "from_config", "KERNELS", "KERNEL_CLASSES", "kernel_class",
    "SpectralDensity", "SpectralFacts", "spectral_facts",
    "Tanimoto", "TanimotoDot", "Intersection", "Hamming", "Spectrum", "scaled_sum",
    "Exchangeable", "mixed_kernel", "GapVariance", "gap_rows", "gap_columns", "with_gaps",
]


def _co2(d: int) -> Kernel:
    """Rasmussen & Williams §5.4.3 CO₂ kernel (time in the first column, standardised):
    long-term trend + decaying yearly cycle + medium-term irregularities."""
    trend = Scale(RBF(3.0, active_dims=[0]), 4.0)
    seasonal = Scale(RBF(4.0, active_dims=[0]) * Periodic(1.0, 0.1, active_dims=[0]), 0.5)
    medium = Scale(RationalQuadratic(0.5, alpha=1.0, active_dims=[0]), 0.1)
    return trend + seasonal + medium


#: kernel names accepted by ``--kernel``, the estimator and :func:`gpscale.fit`;
#: each maps the number of input columns to a kernel with a signal variance
KERNELS: dict[str, Callable[[int], Kernel]] = {
    "rbf": lambda d: Scale(RBF(1.0)),
    "rbf-ard": lambda d: Scale(RBF(1.0, ard_dims=d)),
    "matern12-ard": lambda d: Scale(Matern(0.5, 1.0, ard_dims=d)),
    "matern32-ard": lambda d: Scale(Matern(1.5, 1.0, ard_dims=d)),
    "matern52-ard": lambda d: Scale(Matern(2.5, 1.0, ard_dims=d)),
    "rq-ard": lambda d: Scale(RationalQuadratic(1.0, 1.0, ard_dims=d)),
    "linear": lambda d: Linear(1.0),
    "periodic": lambda d: Scale(Periodic(1.0, 1.0)),
    "lp": lambda d: Scale(LocallyPeriodic(1.0, 1.0)),
    "se+lp": lambda d: Scale(RBF(1.0)) + Scale(LocallyPeriodic(1.0, 1.0)),
    "co2": _co2,
    "tanimoto": lambda d: Scale(Tanimoto()),
    "tanimoto-dot": lambda d: Scale(TanimotoDot()),
    "intersection": lambda d: Scale(Intersection()),
    "hamming": lambda d: Scale(Hamming(1.0)),
    "spectrum": lambda d: Scale(Spectrum()),
}


def make_kernel(name: str | Kernel, d: int) -> Kernel:
    """A kernel by name (see :data:`KERNELS`) for ``d`` input columns, or ``name`` itself."""
    if isinstance(name, Kernel):
        return name
    try:
        builder = KERNELS[name.lower()]
    except (KeyError, AttributeError):
        raise ValueError(
            f"unknown kernel {name!r}; choose one of {sorted(KERNELS)} or pass a Kernel object"
        ) from None
    return builder(d)


def from_config(cfg: dict[str, Any]) -> Kernel:
    """Rebuild a kernel from :meth:`Kernel.config` (values then come from a state_dict):
    the class registered under ``cfg["type"]`` (:func:`kernel_class`) builds itself
    from its args and its rebuilt children (:meth:`Kernel.from_config`)."""
    cls = kernel_class(cfg["type"])
    children = [from_config(c) for c in cfg.get("children", [])]
    return cls.from_config(dict(cfg.get("args", {})), children)
