"""Synthetic data of the GPCV-ADMM paper (§5.1 and Appendix 7.2), drawn from an exact GP.

The paper draws 1-D data from three kernels with known hyperparameters (Table 1):

* SE, eq. (19): σ² exp(−(x−x')²/(2l²)) with l = 0.5;
* LP, eq. (20): σ² exp(−2 sin²(π|x−x'|/p)/l²) exp(−(x−x')²/(2l²)) with l = 0.5, p = 1;
* SE+LP, eq. (21): SE with l₁ = 3 plus LP with l₂ = 1, p = 2 (Table 1 calls p "l₃"),
  both terms with the same σ².

Inputs lie in [0, 10] for n = 500 and in [0, 20] for n = 1000, 2000; 20 further test
points are drawn with the training set (Fig. 1: n* = 20).

What the paper leaves open. It states neither σ² nor the noise σ_e². The authors'
R scripts (github.com/eveneveno/GPCV-ADMM-MLSP2020, ``Synthetic_test/*_v1.R``) use
σ = 1, fit with noise variance ``jit² = 0.25`` but *generate* with additive
U(0, 0.25) noise, and place the inputs on an even grid (``seq(0, 10, 0.02)`` or
``0.03`` in the released scripts), taking the test points out of that grid.

Here σ² = 1, the noise is Gaussian with variance ``noise`` (default 0.1; pass
``noise=0.25`` for the variance the authors fit with), and the inputs are i.i.d.
uniform on the paper's range (``grid=True`` gives the authors' even grid, with the test
points a random subset of it).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..kernels import RBF, Kernel, LocallyPeriodic, Scale
from ..linalg import robust_cholesky
from ..rng import as_generator

#: Table 1 hyperparameters of each kernel; sigma2 is the signal variance σ² of eqs. 19–21
PAPER_THETA: dict[str, dict[str, float]] = {
    "se": {"l": 0.5, "sigma2": 1.0},
    "lp": {"l": 0.5, "p": 1.0, "sigma2": 1.0},
    "se+lp": {"l1": 3.0, "l2": 1.0, "p": 2.0, "sigma2": 1.0},
}


@dataclass(repr=False)
class SyntheticSet:
    """Training data ``X`` (n, 1), ``y`` (n,), test data ``X_test``, ``y_test`` (both noisy,
    drawn jointly with the training data), float64 tensors; ``theta`` the generating
    hyperparameters (``noise`` is the noise variance σ_e²), ``kernel`` the matching
    gpscale kernel, ``name`` its name ("se", "lp" or "se+lp")."""

    X: torch.Tensor
    y: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    theta: dict[str, float]
    kernel: Kernel
    name: str = "se"
    x_range: tuple[float, float] = field(default=(0.0, 10.0))

    def __repr__(self) -> str:
        return (f"SyntheticSet(kernel={self.name!r}, n={self.X.shape[0]}, "
                f"n_test={self.X_test.shape[0]}, x_range={self.x_range}, theta={self.theta})")


def _generator(seed: int | torch.Generator, name: str = "seed") -> torch.Generator:
    if seed is None:
        raise ValueError(f"{name} must be an int or a torch.Generator, got None")
    return as_generator(seed, name)


def _noise(noise) -> float:
    try:
        v = float(noise)
    except (TypeError, ValueError):
        v = float("nan")
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"noise is the noise variance and must be a finite number >= 0, "
                         f"got {noise!r}")
    return v


def paper_kernel(kernel: str, theta: dict[str, float]) -> Kernel:
    """The gpscale kernel of eq. (19), (20) or (21) with hyperparameters ``theta``."""
    s2 = theta["sigma2"]
    if kernel == "se":
        return Scale(RBF(theta["l"]), s2)
    if kernel == "lp":
        return Scale(LocallyPeriodic(theta["l"], theta["p"]), s2)
    return Scale(RBF(theta["l1"]), s2) + Scale(LocallyPeriodic(theta["l2"], theta["p"]), s2)


def gp_draw(
    kernel: Kernel,
    X,
    noise: float,
    seed: int | torch.Generator,
    n_samples: int | None = None,
) -> torch.Tensor:
    """A draw y ~ N(0, K(X, X) + noise·I), as y = L z with L the (jitter-safe) Cholesky
    factor of the covariance and z ~ N(0, I).

    float64, computed on ``X``'s device; z is drawn on the generator's device (the CPU for
    an int seed), so a seed gives the same draw on every device. ``noise`` is a variance.
    Returns shape (n,), or (n_samples, n) when ``n_samples`` is given.
    """
    X = torch.as_tensor(X, dtype=torch.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X must be a non-empty 2-D (n, d) array, got shape {tuple(X.shape)}; "
                         "reshape a 1-D input with X.reshape(-1, 1)")
    if not torch.isfinite(X).all():
        raise ValueError("X contains NaN or inf; drop those rows before drawing")
    noise = _noise(noise)
    if n_samples is not None and (not isinstance(n_samples, int) or n_samples < 1):
        raise ValueError(f"n_samples must be a positive int or None, got {n_samples!r}")
    g = _generator(seed)
    params = list(kernel.parameters())
    if params and params[0].device != X.device:
        kernel = copy.deepcopy(kernel).to(X.device)  # leave the caller's kernel where it is
    n = X.shape[0]
    with torch.no_grad():
        C = kernel(X, X).to(torch.float64)
        C = C + noise * torch.eye(n, dtype=C.dtype, device=C.device)
        L = robust_cholesky(C)
        z = torch.randn(n, n_samples or 1, generator=g, dtype=torch.float64, device=g.device)
        y = (L @ z.to(X.device)).T
    return y[0] if n_samples is None else y


def synthetic_admm(
    kernel: str,
    n: int,
    seed: int | torch.Generator,
    noise: float = 0.1,
    theta: dict[str, float] | None = None,
    n_test: int = 20,
    *,
    x_range: tuple[float, float] | None = None,
    grid: bool = False,
    device: torch.device | str | None = None,
) -> SyntheticSet:
    """GPCV-ADMM §5.1 synthetic set: ``n`` training and ``n_test`` test points drawn
    jointly from the exact GP with ``kernel`` in {"se", "lp", "se+lp"}.

    ``theta`` overrides entries of :data:`PAPER_THETA` (l, p, l1, l2, sigma2). Inputs are
    uniform on [0, 10] for n < 1000 and on [0, 20] otherwise (the paper's n = 500 and
    n = 1000, 2000), unless ``x_range`` is given; ``grid=True`` spaces all n + n_test
    inputs evenly and picks the test points at random among them (the authors' code).
    ``noise`` is the noise variance σ_e², applied to training and test targets alike.
    """
    name = str(kernel).lower().replace(" ", "")
    if name not in PAPER_THETA:
        raise ValueError(f"unknown kernel={kernel!r}; choose one of {list(PAPER_THETA)}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int (the paper uses 500, 1000, 2000), got {n!r}")
    if isinstance(n_test, bool) or not isinstance(n_test, (int, np.integer)) or n_test < 0:
        raise ValueError(f"n_test must be an int >= 0 (the paper uses 20), got {n_test!r}")
    noise = _noise(noise)
    th = dict(PAPER_THETA[name])
    for k, v in (theta or {}).items():
        if k not in th:
            raise ValueError(f"theta key {k!r} does not belong to kernel {name!r}; "
                             f"valid keys are {sorted(th)}")
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"theta[{k!r}] must be a positive finite number, got {v!r}")
        th[k] = float(v)
    lo, hi = x_range if x_range is not None else ((0.0, 10.0) if n < 1000 else (0.0, 20.0))
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise ValueError(f"x_range must be (low, high) with low < high, got {x_range!r}")
    g = _generator(seed)
    m = int(n) + int(n_test)
    if grid:
        x = torch.linspace(lo, hi, m, dtype=torch.float64)
        is_test = torch.zeros(m, dtype=torch.bool)
        is_test[torch.randperm(m, generator=g, device=g.device)[:n_test].cpu()] = True
    else:
        x = lo + (hi - lo) * torch.rand(m, generator=g, dtype=torch.float64, device=g.device)
        x = x.cpu()
        is_test = torch.arange(m) >= n
    dev = torch.device(device) if device is not None else torch.device("cpu")
    k = paper_kernel(name, th).to(dev)
    X_all = x.reshape(-1, 1).to(dev)
    y_all = gp_draw(k, X_all, noise, g)
    is_test = is_test.to(dev)

    def part(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        Xp, yp = X_all[mask], y_all[mask]
        order = torch.argsort(Xp[:, 0])
        return Xp[order], yp[order]

    X, y = part(~is_test)
    X_test, y_test = part(is_test)
    th_out = {**th, "noise": noise}
    return SyntheticSet(X, y, X_test, y_test, th_out, k, name, (float(lo), float(hi)))
