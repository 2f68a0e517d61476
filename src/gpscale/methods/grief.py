"""GP-GRIEF (Evans & Nair 2018): ``grief-ii`` (ML-II of the grid-eigenfunction feature GP
by L-BFGS) and ``grief-i`` (the re-weighted kernel's posterior by MALA).

Both also train from rows that stay in their files or on a cluster (``X`` a
:class:`~gpscale.io.Rows`, y None): one pass for the grid, n and
the initialisation sample (:mod:`gpscale.train.grid_pass`), then statistics passes
(and for GRIEF-II gradient passes) over the partitions."""

from __future__ import annotations

import torch

from ..io.rows import Rows
from ..kernels import Kernel, spectral_facts
from ..models import FeatureGP, GriefIPosterior, ReweightedGriefPosterior
from ..train import FitResult
from ..train.grief import fit_grief_i, fit_grief_ii
from ..validation import check_int
from .registry import register


@register("grief-ii", "GP-GRIEF-II grid eigenfunctions, ML-II by L-BFGS: many rows and few "
          "inputs (a grid of m_bar^d points, product kernels)", reads="passes")
def fit_grief(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
              num_features: int | None = None,
              m_bar: int = 10, max_iter: int = 100, seed: int = 0, progress: bool = False,
              grid: str = "quantile",
              device: torch.device | str | None = None) -> tuple[FeatureGP, FitResult]:
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
    facts = spectral_facts(kernel, "grief-ii")
    return fit_grief_ii(X, y, p=num_features, m_bar=check_int("m_bar", m_bar, 1),
                        kernel=facts.name, start=facts.given(),
                        grid=grid, max_iter=check_int("max_iter", max_iter, 1), seed=seed,
                        progress=progress, device=device)


@register("grief-i", "GP-GRIEF-I re-weighted grid eigenfunctions, posterior by MALA: as "
          "grief-ii, with the weights sampled (slower, MCMC)",
          reads="passes")
def fit_grief_mcmc(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
                   num_features: int = 1000,
                   m_bar: int = 10, n_iter: int = 10_000, burn: int = 1000, thin: int = 50,
                   seed: int = 0, progress: bool = False, grid: str = "quantile",
                   basis: str = "eigen", fill_grid: bool = True,
                   device: torch.device | str | None = None
                   ) -> tuple[ReweightedGriefPosterior | GriefIPosterior, FitResult]:
    """GP-GRIEF-I: MALA over the p eigenfunction weights and σ² (base kernel fixed at the
    exact-GP initialisation, grid placed by ``grid``); predictions average the draws.
    ``basis="eigen"`` (default, eq. 16): the weights on the p eigenfunctions themselves;
    ``"rotated"``: on the rotated basis Ṽᵀφ of §5 (at most n weights, O(p̃) per step).
    ``fill_grid``: columns with fewer than ``m_bar`` distinct values still get
    ``m_bar`` grid points over their range, so p is not capped by the grid.
    The FitResult's objective is the mean negative log posterior of the kept draws;
    acceptance rate, step size and effective sample sizes are in its last history row.
    ``X`` may be :class:`~gpscale.io.Rows` (y None): one pass for the grid and the
    initialisation, one statistics pass for ΦᵀΦ, Φᵀy; MALA then never reads rows."""
    facts = spectral_facts(kernel, "grief-i")
    for name, value, low in (("num_features", num_features, 1), ("m_bar", m_bar, 1),
                             ("n_iter", n_iter, 1), ("burn", burn, 0), ("thin", thin, 1),
                             ("seed", seed, 0)):
        check_int(name, value, low)
    if burn >= n_iter:
        raise ValueError(f"burn={burn} must be smaller than n_iter={n_iter}")
    post, chain = fit_grief_i(X, y, p=num_features, m_bar=m_bar, kernel=facts.name,
                              start=facts.given(), grid=grid, basis=basis, fill=fill_grid,
                              n_iter=n_iter, burn=burn, thin=thin, seed=seed,
                              progress=progress, device=device)
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
