"""GP-GRIEF (Evans & Nair 2018): ``grief-ii`` (ML-II of the grid-eigenfunction feature GP
by L-BFGS) and ``grief-i`` (the re-weighted kernel's posterior by MALA).

Both also train from rows that stay in their files or on a cluster (``X`` a
:class:`~gpscale.io.Rows`, y None): one pass for the grid, n and
the initialisation sample (:mod:`gpscale.train.grid_pass`), then statistics passes
(and for GRIEF-II gradient passes) over the partitions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..features.grief import check_grid
from ..io.rows import Rows
from ..kernels import Kernel, spectral_facts
from ..models import FeatureGP, GriefIPosterior, ReweightedGriefPosterior
from ..train import FitResult
from ..train.grief import fit_grief_i, fit_grief_ii
from ..validation import check_int
from .options import takes_options
from .registry import register


@dataclass
class GriefOptions:
    """The options of ``method="grief-ii"`` (:func:`fit_grief` says what each does),
    checked."""

    num_features: int | None = None
    m_bar: int = 10
    max_iter: int = 100
    seed: int = 0
    progress: bool = False
    grid: str = "quantile"
    device: torch.device | str | None = None

    def __post_init__(self) -> None:
        if self.num_features is not None:
            self.num_features = check_int("num_features", self.num_features, 1)
        for name, low in (("m_bar", 1), ("max_iter", 1), ("seed", 0)):
            setattr(self, name, check_int(name, getattr(self, name), low))
        check_grid(self.grid)


@register("grief-ii", "GP-GRIEF-II grid eigenfunctions, ML-II by L-BFGS: many rows and few "
          "inputs (a grid of m_bar^d points, product kernels)", reads="passes")
@takes_options(GriefOptions)
def fit_grief(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
              **options: Any) -> tuple[FeatureGP, FitResult]:
    """GP-GRIEF-II: p = ``num_features`` eigenfunctions of a grid of ``m_bar``^d inducing
    points (default p = min(1000, 10^⌊log10 n⌋); ``grid`` "quantile" (default) or
    "uniform" placement per column: the quantile grid is better where columns are heavy
    tailed, benchmarks/results/grief-uci-large-quantile/), initialised by exact ML-II on up to 1000
    points (from the lengthscales and signal variance the kernel was given, where they
    are not the defaults 1), then ML-II by L-BFGS. ``X`` may be
    :class:`~gpscale.io.Rows` (y None): the grid
    and the initialisation's random points then come from one pass over the partitions
    (a quantile grid from a sample of them), and every L-BFGS evaluation is a statistics
    pass and a gradient pass, in process or on a dask cluster."""
    o = GriefOptions(**options)
    facts = spectral_facts(kernel, "grief-ii")
    return fit_grief_ii(X, y, p=o.num_features, m_bar=o.m_bar, kernel=facts.name,
                        start=facts.given(), grid=o.grid, max_iter=o.max_iter, seed=o.seed,
                        progress=o.progress, device=o.device)


@dataclass
class GriefIOptions:
    """The options of ``method="grief-i"`` (:func:`fit_grief_mcmc` says what each does),
    checked."""

    num_features: int = 1000
    m_bar: int = 10
    n_iter: int = 10_000
    burn: int = 1000
    thin: int = 50
    seed: int = 0
    progress: bool = False
    grid: str = "quantile"
    basis: str = "eigen"
    fill_grid: bool = True
    device: torch.device | str | None = None

    def __post_init__(self) -> None:
        for name, low in (("num_features", 1), ("m_bar", 1), ("n_iter", 1), ("burn", 0),
                          ("thin", 1), ("seed", 0)):
            setattr(self, name, check_int(name, getattr(self, name), low))
        if self.burn >= self.n_iter:
            raise ValueError(f"burn={self.burn} must be smaller than n_iter={self.n_iter}")
        check_grid(self.grid)
        if self.basis not in ("eigen", "rotated"):
            raise ValueError(f"basis must be 'eigen' (eq. 16) or 'rotated', got "
                             f"{self.basis!r}")


@register("grief-i", "GP-GRIEF-I re-weighted grid eigenfunctions, posterior by MALA: as "
          "grief-ii, with the weights sampled (slower, MCMC)",
          reads="passes")
@takes_options(GriefIOptions)
def fit_grief_mcmc(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
                   **options: Any
                   ) -> tuple[ReweightedGriefPosterior | GriefIPosterior, FitResult]:
    """GP-GRIEF-I: MALA over the p eigenfunction weights and σ² (base kernel fixed at the
    exact-GP initialisation, grid placed by ``grid``); predictions average the draws.
    ``basis="eigen"`` (default, eq. 16): the weights on the p eigenfunctions themselves;
    ``"rotated"``: on the rotated basis Ṽᵀφ of §5 (at most n weights, O(p̃) per step).
    ``fill_grid``: columns with fewer than ``m_bar`` grid points still get ``m_bar``
    over their range, so p is not capped by the grid (on the quantile grid only where
    it would be: the grids' product below p).
    The FitResult's objective is the mean negative log posterior of the kept draws;
    acceptance rate, step size and effective sample sizes are in its last history row.
    ``X`` may be :class:`~gpscale.io.Rows` (y None): one pass for the grid and the
    initialisation, one statistics pass for ΦᵀΦ, Φᵀy; MALA then never reads rows."""
    o = GriefIOptions(**options)
    facts = spectral_facts(kernel, "grief-i")
    post, chain = fit_grief_i(X, y, p=o.num_features, m_bar=o.m_bar, kernel=facts.name,
                              start=facts.given(), grid=o.grid, basis=o.basis,
                              fill=o.fill_grid, n_iter=o.n_iter, burn=o.burn, thin=o.thin,
                              seed=o.seed, progress=o.progress, device=o.device)
    ess = chain.ess.cpu()
    diagnostics = {"iter": chain.n_iter, "acceptance_rate": chain.acceptance_rate,
                   "step_size": chain.step_size, "ess_min": float(ess.min()),
                   "ess_median": float(ess.median()), "samples": post.num_samples,
                   "time_s": chain.wall_s}
    result = FitResult(
        method="grief-i",
        theta={"noise_mean": [float(post.noise.mean())],
               "w_mean": post.w.mean(0).cpu().tolist()},
        objective=float(-chain.log_target.mean()), history=[*chain.history, diagnostics],
        converged=not chain.interrupted,
        reason="interrupted" if chain.interrupted else "sampled", wall_s=chain.wall_s,
        n_evals=chain.n_iter)
    return post, result
