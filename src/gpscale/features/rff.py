"""Random Fourier features (Rahimi & Recht 2007), orthogonal variant (Yu et al. 2016).

For a stationary kernel with spectral density p(ω) (unit signal variance),
φ(x) = D^{-1/2} [cos(Ω x̃), sin(Ω x̃)],  x̃ = x / l,  rows of Ω drawn from p(ω):
E[φ(x)ᵀφ(x')] = k(x, x'). The frequencies are drawn once (seeded) and kept fixed;
the lengthscales l are learnable because they scale the inputs, not Ω.

Orthogonal random features: Ω is built from blocks S Q with Q a uniformly random
orthogonal d x d matrix and S the diagonal of radii with the law of ‖ω‖, which keeps
each row's marginal law and lowers the variance of the kernel estimate.
RBF: ω ~ N(0, I).  Matérn-ν: ω ~ multivariate Student-t with 2ν degrees of freedom.
The family comes from the kernel (:meth:`gpscale.kernels.Kernel.spectral_density`); a
map keeps its name (``"rbf"``, ``"matern32"``, ...) in its saved options.
"""

from __future__ import annotations

import math

import torch

from ..kernels.spectral import SpectralDensity, spectral_names
from ..params import Positive
from ..rng import as_generator
from .base import FeatureMap


def spectral_density(kernel: str | SpectralDensity) -> SpectralDensity:
    """The spectral density a feature map is asked for, by name or as the kernel's own
    descriptor; ValueError naming the known ones."""
    if isinstance(kernel, SpectralDensity):
        return kernel
    try:
        return SpectralDensity.from_name(kernel)
    except ValueError:
        raise ValueError(f"unknown RFF kernel {kernel!r}; choose one of "
                         f"{sorted(spectral_names())}") from None


def draw_frequencies(
    num: int, d: int, kernel: str | SpectralDensity = "rbf", orthogonal: bool = True,
    generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``num`` x ``d`` spectral frequencies for a unit-lengthscale kernel."""
    nu = spectral_density(kernel).nu
    if orthogonal:
        blocks = []
        for _ in range(math.ceil(num / d)):
            Q, R = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=dtype))
            Q = Q * torch.sign(torch.diagonal(R))  # Haar-distributed
            radii = torch.randn(d, d, generator=generator, dtype=dtype).norm(dim=1)  # chi_d
            blocks.append(radii[:, None] * Q)
        omega = torch.cat(blocks)[:num]
    else:
        omega = torch.randn(num, d, generator=generator, dtype=dtype)
    if nu is not None:  # Student-t: ω = z sqrt(2ν / u), u ~ χ²_{2ν}
        u = 2.0 * _gamma(nu, num, generator, dtype)
        omega = omega * torch.sqrt(2 * nu / u)[:, None]
    return omega


#: p x p matrices a weight-space fit holds at once: ΦᵀΦ, A = ΦᵀΦ + σ²W⁻¹, A's Cholesky
#: factor and the gradient with respect to ΦᵀΦ (:mod:`gpscale.models.feature`)
SQUARE_MATRICES = 4
#: share of the available memory a fit may plan to use
MEMORY_SHARE = 0.8


def feature_bytes(p: int, d: int, dtype: torch.dtype = torch.float64) -> float:
    """Memory of a weight-space fit with p features on d inputs, in bytes: the p x p
    matrices (:data:`SQUARE_MATRICES`) and the (p/2) x d frequencies."""
    item = torch.empty((), dtype=dtype).element_size()
    return item * (SQUARE_MATRICES * float(p) * p + 0.5 * p * d)


def check_feature_memory(p: int, d: int, available: int | None,
                         dtype: torch.dtype = torch.float64, option: str = "num_features"
                         ) -> None:
    """ValueError, before any work, when p features cannot fit in ``available`` bytes
    (None: unknown, nothing is checked): drawing the frequencies block by block and the
    first p x p product would otherwise run for minutes before failing. The message
    gives the largest p that fits."""
    need = feature_bytes(p, d, dtype)
    if available is None or need <= MEMORY_SHARE * available:
        return
    item = torch.empty((), dtype=dtype).element_size()
    top = int(math.sqrt(MEMORY_SHARE * available / (SQUARE_MATRICES * item))) // 2 * 2
    raise ValueError(
        f"{option}={p} needs about {_size(need)} ({SQUARE_MATRICES} matrices of p x p = "
        f"{p} x {p} values: ΦᵀΦ, its Cholesky factor and their gradients) but "
        f"{_size(available)} of memory is available. Choose {option} of at most {top} "
        f"(the default is 512; a few thousand is usually plenty), or a method that does "
        "not hold p x p matrices (gpscale methods)")


def _size(b: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} bytes"


def _gamma(shape: float, num: int, generator: torch.Generator | None, dtype) -> torch.Tensor:
    """Gamma(shape, 1) draws for half-integer shapes, as half a sum of squared normals
    (χ²_k / 2 ~ Gamma(k/2)), so that a torch.Generator seeds them."""
    k2 = int(round(2 * shape))
    z = torch.randn(num, k2, generator=generator, dtype=dtype)
    return 0.5 * (z * z).sum(1)


class RandomFourierFeatures(FeatureMap):
    """Fourier features of an RBF or Matérn kernel with learnable (ARD) lengthscales.

    ``num_features`` p must be even (p/2 frequencies, a cosine and a sine each).
    ``kernel``: the spectral density, by name or a kernel's
    :meth:`~gpscale.kernels.Kernel.spectral_density`; ``lengthscale``: the initial
    lengthscales, one value or (with ``ard``) one per input column.
    """

    lengthscale = Positive(doc="lengthscale(s) l")

    def __init__(
        self,
        d: int,
        num_features: int = 512,
        kernel: str | SpectralDensity = "rbf",
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        ard: bool = True,
        orthogonal: bool = True,
        seed: int | torch.Generator | None = 0,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        if num_features < 2 or num_features % 2:
            raise ValueError(f"num_features must be an even number ≥ 2, got {num_features}")
        if d < 1:
            raise ValueError(f"d (input columns) must be ≥ 1, got {d}")
        density = spectral_density(kernel)
        ls = torch.as_tensor(lengthscale, dtype=dtype).reshape(-1)
        if ls.numel() not in (1, d):
            raise ValueError(f"lengthscale has {ls.numel()} values for {d} input columns; "
                             f"give one value or {d}")
        gen = as_generator(seed)
        self.d, self.num_features = d, num_features
        self.kernel, self.orthogonal = density.name, orthogonal
        self.register_buffer("omega", draw_frequencies(num_features // 2, d, density,
                                                       orthogonal, gen, dtype))
        self.lengthscale = ls.expand(d).clone() if ard and ls.numel() == 1 else ls

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if X.shape[-1] != self.d:
            raise ValueError(f"features built for {self.d} input columns, got {X.shape[-1]}")
        proj = (X / self.lengthscale) @ self.omega.mT
        scale = math.sqrt(2.0 / self.num_features)
        # scaled in place: a fresh (n, p) product would cost another pass over memory
        return torch.cat([torch.cos(proj), torch.sin(proj)], dim=-1).mul_(scale)
