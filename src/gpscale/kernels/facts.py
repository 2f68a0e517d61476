"""What the feature methods (``rff``, ``minimax``/``scgd``/``bsgd`` on random Fourier
features, ``grief-ii``/``grief-i``, ``auto``) read from a kernel: the family of its
spectral density, whether it has one lengthscale per column (ARD), and the values it
was given to start from, its lengthscales and signal variance.

A feature model approximates s² k(x/l, x'/l) with features of the unit-lengthscale,
unit-variance kernel k whose spectral density the kernel names
(:meth:`Kernel.spectral_density`): the lengthscales l divide the inputs and the signal
variance s² is the model's weight. So the kernel's l and s² are the feature model's
starting values, and a kernel at its defaults (l = 1, s² = 1) starts it where it
always started.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import Kernel
from .spectral import SpectralDensity
from .stationary import Stationary

__all__ = ["SpectralFacts", "spectral_facts"]

#: the lengthscale and signal variance a kernel has unless it is given others
_DEFAULT = 1.0


@dataclass(frozen=True, eq=False)
class SpectralFacts:
    """A kernel as the feature methods see it.

    ``density``: its spectral family; ``ard``: one lengthscale per input column;
    ``lengthscale``: its lengthscales (float64 on the CPU, shape (1,) or (d,));
    ``outputscale``: its signal variance s², the product of the :class:`Scale` factors
    around it (1.0 without one)."""

    density: SpectralDensity
    ard: bool
    lengthscale: torch.Tensor
    outputscale: float

    @property
    def name(self) -> str:
        """The density's name (``"rbf"``, ``"matern32"``, ...), as feature maps take it."""
        return self.density.name

    def given_lengthscale(self) -> torch.Tensor | None:
        """The lengthscales, or None when they are all at the default 1 (the kernel was
        not given any): for methods whose own start is data-driven (GRIEF)."""
        at_default = bool(torch.all((self.lengthscale - _DEFAULT).abs() <= 1e-9))
        return None if at_default else self.lengthscale

    def given_outputscale(self) -> float | None:
        """The signal variance, or None when it is the default 1 (see
        :meth:`given_lengthscale`)."""
        return None if abs(self.outputscale - _DEFAULT) <= 1e-9 else self.outputscale

    def given(self) -> dict[str, torch.Tensor | float]:
        """``{"lengthscale": ..., "outputscale": ...}`` holding only the values that are
        not at their defaults: the start a data-driven initialisation takes over (GRIEF's
        exact ML-II), so that a default kernel leaves it as it was."""
        values = {"lengthscale": self.given_lengthscale(),
                  "outputscale": self.given_outputscale()}
        return {k: v for k, v in values.items() if v is not None}


def spectral_facts(kernel: Kernel, method: str, d: int | None = None) -> SpectralFacts:
    """The :class:`SpectralFacts` of ``kernel`` (a kernel with a spectral density,
    optionally inside :class:`Scale`), for ``method`` (named in the error). ``d``: the
    number of input columns, checked against an ARD kernel's lengthscales.

    ValueError when the kernel has no spectral density the feature methods can use."""
    if not isinstance(kernel, Kernel) or kernel.spectral_density() is None:
        raise ValueError(
            f"method {method!r} needs an RBF or Matérn kernel ('rbf', 'rbf-ard', "
            "'matern12-ard', 'matern32-ard', 'matern52-ard'; or a kernel whose "
            f"spectral_density() is not None), got {type(kernel).__name__}")
    outputscale, base = kernel.unscaled()
    if not isinstance(base, Stationary):
        raise ValueError(
            f"method {method!r}: {type(base).__name__} declares a spectral density but is "
            "not a Stationary kernel with lengthscales; subclass gpscale.kernels.Stationary")
    lengthscale = base.lengthscale.detach().to("cpu", torch.float64).reshape(-1).clone()
    ard = bool(base.ard_dims)
    if d is not None and ard and lengthscale.numel() not in (1, d):
        raise ValueError(
            f"method {method!r}: the kernel has {lengthscale.numel()} lengthscales but the "
            f"inputs have {d} columns; build it with ard_dims={d}")
    return SpectralFacts(base.spectral_density(), ard, lengthscale, outputscale)
