"""Neural-network feature maps (deep kernels) for finite-feature GPs.

Shoham & Avron §5 use k_α(x, x') = k'_u(g_w(x), g_w(x')) with g_w two fully connected
layers of width 128 with ReLU, and k' either

* the linear kernel ⟨z, z'⟩: φ(x) = √s · g_w(x), an exact finite feature map (d = 128);
* the Gaussian kernel u₂ exp(−‖z − z'‖²/(2u₁²)), approximated by (orthogonal) random
  Fourier features of dimension 1000 on z = g_w(x): φ(x) = √u₂ · RFF_u₁(g_w(x)).

α = (w, u₁, u₂): the network's weights, the lengthscale u₁ and the magnitude u₂ (here
``outputscale`` s). The paper's linear kernel has no magnitude (it would duplicate
the scale of the last layer), so ``outputscale`` is learnable by default only for
the Gaussian kernel. :class:`ScaledFeatures` adds the same learnable magnitude to any
feature map (e.g. random Fourier features, whose kernel has unit variance).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..params import Positive
from ..rng import as_generator
from .base import FeatureMap
from .rff import RandomFourierFeatures

NEURAL_KERNELS = ("linear", "rbf")


def mlp(d: int, hidden: tuple[int, ...] = (128, 128), seed: int | torch.Generator | None = 0,
        dtype: torch.dtype = torch.float64) -> nn.Sequential:
    """Fully connected ReLU network d → hidden[0] → … → hidden[-1] (ReLU after every
    layer, as the paper's g_w), initialised U(−1/√fan_in, 1/√fan_in) from ``seed``."""
    if d < 1 or not hidden or any(int(h) < 1 for h in hidden):
        raise ValueError(f"need d ≥ 1 and positive hidden widths, got d={d}, hidden={hidden}")
    gen = as_generator(seed)
    layers: list[nn.Module] = []
    fan_in = d
    for width in hidden:
        lin = nn.Linear(fan_in, int(width), dtype=dtype)
        bound = 1.0 / math.sqrt(fan_in)
        with torch.no_grad():
            lin.weight.copy_((2 * torch.rand(lin.weight.shape, generator=gen, dtype=dtype) - 1)
                             * bound)
            lin.bias.copy_((2 * torch.rand(lin.bias.shape, generator=gen, dtype=dtype) - 1)
                           * bound)
        layers += [lin, nn.ReLU()]
        fan_in = int(width)
    return nn.Sequential(*layers)


class NeuralFeatures(FeatureMap):
    """φ(x) = √s · k'-features of g_w(x) for a network body g_w (default: :func:`mlp`).

    ``kernel="linear"``: num_features = the body's output width; ``"rbf"``: orthogonal
    random Fourier features of dimension ``num_rff`` (default 1000) with a learnable
    (single) lengthscale on the body's output.
    """

    outputscale = Positive(floor=1e-8, doc="output scale s (magnitude u₂ of k')")

    def __init__(
        self,
        d: int,
        kernel: str = "linear",
        body: nn.Module | None = None,
        hidden: tuple[int, ...] | list[int] = (128, 128),
        num_rff: int = 1000,
        lengthscale: float = 1.0,
        outputscale: float = 1.0,
        learn_scale: bool | None = None,
        seed: int | torch.Generator | None = 0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if kernel not in NEURAL_KERNELS:
            raise ValueError(f"kernel must be one of {NEURAL_KERNELS}, got {kernel!r}")
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d (input columns) must be a positive integer, got {d!r}")
        gen = as_generator(seed)
        self.d, self.kernel = d, kernel
        self.hidden = tuple(int(h) for h in hidden) if body is None else None
        self.body = mlp(d, self.hidden, gen, dtype) if body is None else body
        if not isinstance(self.body, nn.Module):
            raise ValueError(f"body must be a torch.nn.Module, got {type(body).__name__}")
        self.body.to(dtype=dtype)
        with torch.no_grad():
            out = self.body(torch.zeros(1, d, dtype=dtype))
        if out.ndim != 2 or out.shape[0] != 1:
            raise ValueError(f"body must map (n, {d}) to (n, width); got {tuple(out.shape)}")
        self.width = int(out.shape[1])
        if kernel == "rbf":
            if num_rff < 2 or num_rff % 2:
                raise ValueError(f"num_rff must be an even number ≥ 2, got {num_rff}")
            self.rff = RandomFourierFeatures(self.width, num_rff, lengthscale=lengthscale,
                                             ard=False, seed=gen, dtype=dtype)
            self.num_features = num_rff
        else:
            self.rff = None
            self.num_features = self.width
        self.outputscale = torch.tensor(float(outputscale), dtype=dtype)
        learn = kernel == "rbf" if learn_scale is None else bool(learn_scale)
        self.raw_outputscale.requires_grad_(learn)
        if device is not None:
            self.to(device)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        if X.shape[-1] != self.d:
            raise ValueError(f"features built for {self.d} input columns, got {X.shape[-1]}")
        z = self.body(X)
        phi = self.rff(z) if self.rff is not None else z
        return phi * torch.sqrt(self.outputscale)

    def config(self) -> dict[str, Any]:
        """Constructor options to rebuild this map for ``load_state_dict`` (default body)."""
        if self.hidden is None:
            raise ValueError("cannot save NeuralFeatures with a custom body; save the "
                             "module's state_dict yourself and rebuild it with the body")
        return {"features": "nn", "d": self.d, "kernel": self.kernel,
                "hidden": list(self.hidden),
                "num_rff": self.num_features if self.kernel == "rbf" else None,
                "learn_scale": bool(self.raw_outputscale.requires_grad)}


class ScaledFeatures(FeatureMap):
    """φ(x) = √s · base(x) with a learnable magnitude s (the kernel's signal variance)."""

    outputscale = Positive(floor=1e-8, doc="output scale s (signal variance)")

    def __init__(self, base: FeatureMap, outputscale: float = 1.0) -> None:
        super().__init__()
        if not isinstance(base, FeatureMap):
            raise ValueError(f"base must be a FeatureMap, got {type(base).__name__}")
        self.base = base
        self.num_features, self.d = base.num_features, base.d
        like = next(iter(base.buffers()), None)
        self.outputscale = torch.tensor(float(outputscale), dtype=torch.float64
                                        if like is None else like.dtype)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.base(X) * torch.sqrt(self.outputscale)


def feature_config(f: FeatureMap) -> dict[str, Any] | None:
    """Save options for the maps of this module (None for other maps)."""
    if isinstance(f, NeuralFeatures):
        return f.config()
    if isinstance(f, ScaledFeatures) and isinstance(f.base, RandomFourierFeatures):
        b = f.base
        return {"features": "scaled-rff", "d": b.d, "num_features": b.num_features,
                "kernel": b.kernel, "orthogonal": b.orthogonal,
                "ard": b.lengthscale.numel() > 1}
    return None


def build_features(opts: dict[str, Any], dtype: torch.dtype) -> FeatureMap | None:
    """Rebuild a map saved with :func:`feature_config` (shapes only; the values come
    from the state_dict). None when ``opts`` is not one of this module's."""
    if opts.get("features") == "nn":
        f = NeuralFeatures(opts["d"], kernel=opts["kernel"], hidden=tuple(opts["hidden"]),
                           num_rff=opts["num_rff"] or 1000, dtype=dtype)
        f.raw_outputscale.requires_grad_(bool(opts["learn_scale"]))
        return f
    if opts.get("features") == "scaled-rff":
        return ScaledFeatures(RandomFourierFeatures(
            opts["d"], opts["num_features"], kernel=opts["kernel"], ard=opts["ard"],
            orthogonal=opts["orthogonal"], dtype=dtype))
    return None
