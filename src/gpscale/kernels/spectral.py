"""A kernel's spectral density, as a fact the kernel class carries.

By Bochner's theorem a stationary kernel with k(0) = 1 is the Fourier transform of a
probability density p(ω): k(x, x') = E_{ω~p}[cos(ωᵀ(x − x')/l)] for inputs scaled by
the lengthscales l. The feature methods need only the family of p:

- ``rbf``: p(ω) = N(0, I);
- ``matern`` with smoothness ν: p(ω) a multivariate Student-t with 2ν degrees of
  freedom (ω = z √(2ν/u), z ~ N(0, I), u ~ χ²_{2ν}).

Random Fourier features sample p; GRIEF expands the product of 1-D factors of the
same family. A kernel class answers :meth:`Kernel.spectral_density` with one of these
descriptors (or None when the feature methods cannot use it); the descriptor's
:attr:`~SpectralDensity.name` (``"rbf"``, ``"matern12"``, ``"matern32"``,
``"matern52"``) is the word a feature map keeps in its saved options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SpectralDensity", "MATERN_NUS", "spectral_names"]

#: the Matérn smoothness values the kernels (and the feature maps) implement in closed form
MATERN_NUS = (0.5, 1.5, 2.5)
_FAMILIES = ("rbf", "matern")


@dataclass(frozen=True)
class SpectralDensity:
    """The family of a stationary kernel's spectral density (unit lengthscale and
    variance): ``family`` "rbf", or "matern" with smoothness ``nu`` in
    :data:`MATERN_NUS`."""

    family: str
    nu: float | None = None

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise ValueError(f"spectral family must be one of {_FAMILIES}, got {self.family!r}")
        if self.family == "rbf" and self.nu is not None:
            raise ValueError("the rbf spectral density has no nu; leave nu=None")
        if self.family == "matern":
            if self.nu not in MATERN_NUS:
                raise ValueError(f"Matérn nu must be one of {MATERN_NUS}, got {self.nu!r}")
            object.__setattr__(self, "nu", float(self.nu))

    @property
    def name(self) -> str:
        """``"rbf"``, or ``"matern"`` followed by the digits of ν = k/2 (``"matern32"``
        for ν = 3/2): the name feature maps are built and saved with."""
        if self.family == "rbf":
            return "rbf"
        return f"matern{int(round(2 * self.nu))}2"

    @classmethod
    def from_name(cls, name: str) -> SpectralDensity:
        """The descriptor called ``name`` (see :attr:`name`); ValueError listing the
        names :func:`spectral_names` gives for anything else."""
        if name == "rbf":
            return cls("rbf")
        match = re.fullmatch(r"matern(\d+)2", name) if isinstance(name, str) else None
        if match is not None and int(match.group(1)) / 2 in MATERN_NUS:
            return cls("matern", int(match.group(1)) / 2)
        raise ValueError(f"unknown spectral density {name!r}; choose one of "
                         f"{list(spectral_names())}")


def spectral_names() -> tuple[str, ...]:
    """Every :attr:`SpectralDensity.name`: ``("rbf", "matern12", "matern32", "matern52")``."""
    return ("rbf", *(SpectralDensity("matern", nu).name for nu in MATERN_NUS))
