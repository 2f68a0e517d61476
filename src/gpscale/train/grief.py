"""GP-GRIEF-II (ML-II of the base-kernel hyperparameters and σ²) and GP-GRIEF-I
(MALA over re-weighted eigenfunctions), Evans & Nair 2018, §5-6.

The model is a :class:`~gpscale.models.FeatureGP` with the GRIEF features
Φ = K_XU Q S_pᵀ Λ_p^{-1/2} (eq. 4) and W = s I (s the signal variance), so
K̃ = s Φ Φᵀ (eq. 3); its NLML (eq. 1 via eq. 18 with W = s I) costs O(p³) after a
streaming pass for ΦᵀΦ and Φᵀy, with exact gradients in the lengthscales through Φ
(a second streaming pass). L-BFGS as every ML-II trainer here.

The paper's protocol: p = min(1000, 10^⌊log10 n⌋), m̄ = 10, and the base kernel's
hyperparameters initialised by exact-GP ML-II on min(n, 1000) random points.

Both trainers take the rows as tensors in memory or as
:class:`~gpscale.io.Rows` (y None) that stay in their files or on a
dask cluster: then one pass (:mod:`gpscale.train.grid_pass`) gives n, the grid and the
random points of the initialisation, and every later pass is a statistics (and for
GRIEF-II gradient) pass over the partitions.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import torch

from ..features.grief import KERNELS_1D, GriefFeatures, check_grid, fill_grids, grid_1d
from ..io.rows import as_rows
from ..kernels import RBF, Kernel, Matern, Scale, SpectralDensity
from ..models import ExactGP, FeatureGP
from ..models.grief import GriefIPosterior, OrthogonalGrief
from ..models.grief_eigen import ReweightedGrief, ReweightedGriefPosterior
from ..models.precond import separable_form
from ..validation import check_xy
from .grid_pass import QUANTILE_SAMPLE, summarize_rows, summary_grids
from .lbfgs import fit_lbfgs
from .mcmc import MCMCResult, lognormal_from_mode_variance, mala
from .result import FitResult


def default_num_features(n: int) -> int:
    """p = min(1000, 10^⌊log10 n⌋) (the paper's GRIEF-II choice)."""
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    return int(min(1000, 10 ** math.floor(math.log10(n))))


def separable_kernel(kernel: str, d: int, lengthscale: torch.Tensor | float = 1.0) -> Kernel:
    """The exact separable base kernel Πᵢ kᵢ(xᵢ, zᵢ) that GRIEF approximates (unit
    variance): RBF-ARD (separable as it is) or a product of 1-D Matérns."""
    ls = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(-1)
    if ls.numel() not in (1, d):
        raise ValueError(f"lengthscale has {ls.numel()} values for {d} input columns; give "
                         f"one value or {d}")
    ls = ls.expand(d)
    if kernel not in KERNELS_1D:
        raise ValueError(f"unknown GRIEF base kernel {kernel!r}; choose one of {KERNELS_1D}")
    density = SpectralDensity.from_name(kernel)
    if density.family == "rbf":
        return RBF(ls.clone(), ard_dims=d)
    k: Kernel = Matern(density.nu, float(ls[0]), active_dims=[0])
    for i in range(1, d):
        k = k * Matern(density.nu, float(ls[i]), active_dims=[i])
    return k


def init_exact(
    X: torch.Tensor, y: torch.Tensor, kernel: str = "rbf", num_points: int = 1000,
    max_iter: int = 100, seed: int | None = 0, start: dict | None = None,
) -> dict[str, torch.Tensor]:
    """The paper's initialisation: exact-GP ML-II (L-BFGS) of the separable base kernel
    with a signal variance on min(n, ``num_points``) random points. Starts from
    lengthscale = column std, signal variance = var(y), σ² = var(y)/10, or from the
    ``"lengthscale"`` (one or d values) and ``"outputscale"`` that ``start`` gives (the
    values a kernel was given, :meth:`~gpscale.kernels.SpectralFacts.given`).
    Returns ``{"lengthscale", "outputscale", "noise"}``."""
    n, d = X.shape
    gen = torch.Generator().manual_seed(int(seed or 0))
    sub = torch.randperm(n, generator=gen)[: min(n, num_points)].to(X.device)
    Xs, ys = X[sub], y[sub]
    scale = Xs.std(0).nan_to_num(1.0).clamp_min(1e-3) if Xs.shape[0] > 1 else torch.ones(d)
    var_y = float(ys.var()) if ys.numel() > 1 else 1.0
    var_y = var_y if var_y > 0 else 1.0
    start = start or {}
    if start.get("lengthscale") is not None:
        scale = torch.as_tensor(start["lengthscale"], dtype=torch.float64)
    s0 = float(start["outputscale"]) if start.get("outputscale") is not None else var_y
    model = ExactGP(Scale(separable_kernel(kernel, d, scale.cpu()), s0), Xs, ys,
                    noise=0.1 * var_y, device=X.device)
    fit_lbfgs(model, max_iter=max_iter, method="exact-init")
    return {"lengthscale": separable_form(model.kernel.base, d)[1],
            "outputscale": model.kernel.outputscale.detach().reshape(()),
            "noise": model.noise.detach().reshape(())}


class _Data(NamedTuple):
    """The training data as a GRIEF trainer uses it, in memory or streamed."""

    init: tuple[torch.Tensor, torch.Tensor]  # rows for the exact-GP initialisation
    n: int
    d: int
    var_y: float
    grids: list[torch.Tensor] | None  # None: GriefFeatures places them from X
    rows: dict  # FeatureGP's data arguments
    device: torch.device


def _training_data(X, y, m_bar: int, grid: str, init_points: int, quantile_sample: int,
                   chunk: int | None, seed: int | None, dtype: torch.dtype,
                   device: torch.device | str | None) -> _Data:
    """Tensors X, y as given; or ``X = Rows`` (y None): one pass over the
    partitions (:func:`~gpscale.train.grid_pass.summarize_rows`) for n, the grids and a
    uniform sample of min(n, ``init_points``) rows for the initialisation (the sample
    holds ``quantile_sample`` rows for a quantile grid), the rows left where they are."""
    rows = as_rows(X, y)
    if rows.held is not None:  # every row in memory: used as it is
        X, y = check_xy(*rows.held, dtype, device)
        var_y = float(y.var()) if X.shape[0] > 1 and float(y.var()) > 0 else 1.0
        return _Data((X, y), X.shape[0], X.shape[1], var_y, None,
                     {"X": X, "y": y, "chunk": chunk}, X.device)
    X = rows
    size = max(1, int(init_points)) if grid == "uniform" else max(int(init_points),
                                                                  int(quantile_sample), 1)
    summary = summarize_rows(X.partitions, X.num_features, size=size, max_distinct=m_bar,
                             seed=int(seed or 0), scaler=X.scaler, client=X.client,
                             rows=X.rows)
    device = torch.device(device or "cpu")
    Xs, ys = (torch.as_tensor(a, dtype=dtype, device=device)
              for a in summary.sample(min(size, max(1, int(init_points)))))
    var_y = summary.y_var if summary.n > 1 and summary.y_var > 0 else 1.0
    grids = summary_grids(summary, m_bar, grid, dtype=dtype, device=device)
    return _Data((Xs, ys), summary.n, summary.d, var_y, grids, {"rows": X}, device)


def fit_grief_ii(
    X,
    y,
    p: int | None = None,
    m_bar: int = 10,
    kernel: str = "rbf",
    grid: str = "uniform",
    init: str = "exact",
    init_points: int = 1000,
    start: dict | None = None,
    lengthscale: float | list[float] | torch.Tensor | None = None,
    outputscale: float | None = None,
    noise: float | None = None,
    max_iter: int = 100,
    ftol: float = 1e-8,
    max_ls: int | None = 20,
    init_max_iter: int = 100,
    rescale_init: bool = True,
    quantile_sample: int = QUANTILE_SAMPLE,
    chunk: int | None = None,
    seed: int | None = 0,
    progress: bool = False,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[FeatureGP, FitResult]:
    """Train GP-GRIEF-II; returns the fitted ``FeatureGP`` and the :class:`FitResult`.

    ``p`` defaults to min(1000, 10^⌊log10 n⌋); ``m_bar`` grid points per dimension
    (m = m̄ᵈ inducing points), placed by ``grid`` ("uniform" or "quantile", see
    :func:`~gpscale.features.grief.grid_1d`). ``init="exact"`` initialises
    (lengthscale, signal variance, σ²) by exact ML-II on min(n, ``init_points``)
    random points (the paper); ``init="none"`` starts from ``lengthscale``/
    ``outputscale``/``noise`` (defaults 1, var(y), var(y)/10); explicit values
    override the exact initialisation. ``start``: ``{"lengthscale", "outputscale"}``
    (either may be absent) to start from instead of the defaults, with ``init="exact"``
    the start of its ML-II (:func:`init_exact`): the values a kernel was given.
    ``rescale_init``: then move the signal variance and σ² (those not given
    explicitly) to the best point of a log grid for the GRIEF model itself at the
    initial lengthscales (:func:`set_best_scale_and_noise`; never worse). L-BFGS
    stops after ``max_iter`` iterations or once an iteration lowers the NLML by less
    than ``ftol`` relative (:func:`~gpscale.train.lbfgs.fit_lbfgs`): the top-p
    selection makes the NLML piecewise smooth in the lengthscales, and without this
    test the line searches can spend most of the evaluation budget bracketing one of
    its jumps for a negligible gain; ``max_ls`` likewise ends it when one iteration
    needs more than that many evaluations (scipy's ``maxls`` default). (Holding the
    selection fixed makes the NLML smooth, but its optimum need not survive
    re-selection: once the top p are re-selected there, the NLML can be worse than
    at the start.) X and y
    are used as given (standardise them first, as ``gpscale.fit`` does). ``X`` may
    be :class:`~gpscale.io.Rows` (y None, ``chunk`` unused): the grid and the random
    points come from one pass (a "quantile" grid from a sample of ``quantile_sample``
    rows, see :func:`~gpscale.train.grid_pass.summary_grids`). The result's
    ``wall_s`` includes that pass and the initialisation.
    """
    if init not in ("exact", "none"):
        raise ValueError(f"init must be 'exact' or 'none', got {init!r}")
    if kernel not in KERNELS_1D:
        raise ValueError(f"unknown GRIEF base kernel {kernel!r}; choose one of {KERNELS_1D}")
    check_grid(grid)  # before the exact-GP initialisation, which is not free
    if p is not None and int(p) < 1:
        raise ValueError(f"p (number of eigenfunctions) must be ≥ 1, got {p}")
    for name, v in (("outputscale", outputscale), ("noise", noise)):
        if v is not None and not v > 0:
            raise ValueError(f"{name} must be positive, got {v}")
    t0 = time.perf_counter()
    data = _training_data(X, y, m_bar, grid, init_points, quantile_sample, chunk, seed,
                          dtype, device)
    n, d = data.n, data.d
    p = default_num_features(n) if p is None else int(p)
    var_y = data.var_y
    theta = {"lengthscale": torch.ones(d, dtype=dtype), "outputscale": torch.tensor(var_y),
             "noise": torch.tensor(0.1 * var_y)}
    if init == "exact":
        theta = init_exact(*data.init, kernel, init_points, init_max_iter, seed, start=start)
    else:
        theta.update({k: torch.as_tensor(v, dtype=dtype) for k, v in (start or {}).items()
                      if v is not None})
    if lengthscale is not None:
        theta["lengthscale"] = torch.as_tensor(lengthscale, dtype=dtype)
    if outputscale is not None:
        theta["outputscale"] = torch.tensor(float(outputscale))
    if noise is not None:
        theta["noise"] = torch.tensor(float(noise))
    features = _features(data, p, m_bar, kernel, grid, theta["lengthscale"], dtype)
    model = FeatureGP(features, noise=float(theta["noise"]), weights="scalar", dtype=dtype,
                      device=data.device, **data.rows)
    model.weight = torch.full_like(model.weight, float(theta["outputscale"]))
    if rescale_init and (outputscale is None or noise is None):
        set_best_scale_and_noise(model, fix_scale=outputscale is not None,
                                 fix_noise=noise is not None)
    result = fit_lbfgs(model, max_iter=max_iter, seed=seed, progress=progress,
                       method="grief-ii", ftol=ftol, max_ls=max_ls)
    result.wall_s = time.perf_counter() - t0
    return model, result


def _features(data: _Data, p: int, m_bar: int, kernel: str, grid: str,
              lengthscale: torch.Tensor, dtype: torch.dtype) -> GriefFeatures:
    """GriefFeatures on the grid placed from X in memory, or from the pass's grids."""
    X = data.init[0] if data.grids is None else None
    return GriefFeatures(X, p, m_bar=m_bar, kernel=kernel, grid=grid,
                         lengthscale=lengthscale.cpu(), dtype=dtype, device=data.device,
                         grids=data.grids)


def set_best_scale_and_noise(model: FeatureGP, fix_scale: bool = False,
                             fix_noise: bool = False, points: int = 41) -> bool:
    """Move a GRIEF-II model's signal variance s and σ² to the best point of a log
    grid (s over [10⁻², 10²]·s₀, σ² from its floor to var(y)), the lengthscales fixed;
    the current values are kept unless a grid point has a lower NLML. Each point costs
    O(p) (§5's orthogonalised form) after one O(np²) statistics pass. Returns whether
    it moved.

    Why: the exact-GP initialisation on a subset can end at a degenerate optimum
    (σ² at its floor, interpolating the subset). The GRIEF kernel, of rank p, cannot
    interpolate, so there −LML is huge and its gradient
    in σ² so steep that L-BFGS's line search stalls at once."""
    feats = model.features
    trainable = [q for q in feats.parameters() if q.requires_grad]
    for q in trainable:
        q.requires_grad_(False)
    try:
        gram, proj, yy = model.statistics()
    finally:
        for q in trainable:
            q.requires_grad_(True)
    orth = OrthogonalGrief.from_statistics(gram, proj, yy, model.n, normalize=False)
    dt, dev = gram.dtype, gram.device
    s0, n0 = model.weight.detach().reshape(-1)[0], model.noise.detach().reshape(())
    var_y = max(float(yy) / model.n, 1e-12)
    floor = type(model).noise.floor_of(model)
    grid = torch.logspace(-2, 2, points, dtype=dt, device=dev)
    s = (s0 * grid if not fix_scale else s0.reshape(1)).reshape(-1, 1, 1)
    lo = math.log10(floor * (1 + 1e-3))
    noise = (n0.reshape(1) if fix_noise else torch.logspace(
        lo, math.log10(var_y), points, dtype=dt, device=dev)).reshape(1, -1, 1)
    s = torch.cat([s0.reshape(1, 1, 1), s], 0)  # the current values compete too
    noise = torch.cat([n0.reshape(1, 1, 1), noise], 1)
    D = noise + s * orth.sv2  # (S, N, p̃): Dᵢ = σ² + s σ̃ᵢ² (W = s I, rotated basis)
    m = orth.n - orth.rank
    value = 0.5 * (orth.resid / noise[..., 0] + (orth.c / D).sum(-1)
                   + torch.log(D).sum(-1) + m * torch.log(noise[..., 0]))
    value = torch.where(torch.isfinite(value), value, torch.full_like(value, math.inf))
    best = int(torch.argmin(value))
    i, j = divmod(best, value.shape[1])
    if not value.reshape(-1)[best] < value[0, 0]:  # the start (index 0) is not beaten
        return False
    model.weight = torch.full_like(model.weight, float(s[i, 0, 0]))
    model.noise = float(noise[0, j, 0])
    return True


def fit_grief_i(
    X,
    y,
    p: int = 1000,
    m_bar: int = 10,
    kernel: str = "rbf",
    grid: str = "uniform",
    n_iter: int = 10_000,
    burn: int = 1000,
    thin: int = 50,
    init_points: int = 1000,
    init_max_iter: int = 100,
    start: dict | None = None,
    w_prior: tuple[float, float] = (1.0, 100.0),
    noise_prior_variance: float = 0.04,
    basis: str = "eigen",
    fill: bool = True,
    quantile_sample: int = QUANTILE_SAMPLE,
    chunk: int | None = None,
    seed: int | None = 0,
    progress: bool = False,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[ReweightedGriefPosterior | GriefIPosterior, MCMCResult]:
    """GP-GRIEF-I: MALA over the weights w and σ² of the re-weighted kernel (eq. 16),
    with the base-kernel θ (lengthscales, signal variance s₀) fixed at the exact-GP
    initialisation (from ``start``, as :func:`fit_grief_ii`).

    ``basis="eigen"`` (the paper's): w on the p scaled eigenfunctions,
    K̃ = s₀ΦWΦᵀ, each step O(p³) by eq. 18 or, for n < p where cheaper, O(k²p + k³) in
    the dual k × k form (k = rank Φ ≤ n; :class:`ReweightedGrief`).
    ``basis="rotated"``: w on the rotated basis Ṽᵀφ of §5 (p̃ ≤ min(n, p) weights,
    O(p̃) per step, :class:`OrthogonalGrief`). ``fill``: a column whose grid has fewer
    than ``m_bar`` points gets ``m_bar`` evenly spaced ones over its range
    (:func:`~gpscale.features.grief.fill_grids`), so p is capped only where the product
    grid itself has fewer than p points; on the quantile grid only where the product of
    the grids' sizes is below p (else the grids stay where the data are). Priors as the
    paper: log-normal with (mode, variance) ``w_prior`` = (1, 100) for every wᵢ and
    (σ₀², 0.04) for σ²; sampling on z = log(w, σ²) with the log-Jacobian Σ z in the
    target, from the prior mode; ``burn`` warm-up draws (step size adapted, then fixed)
    are discarded and every ``thin``-th kept. Returns the mixture predictor and the
    chain. ``X`` may be :class:`~gpscale.io.Rows` (y None) as for
    :func:`fit_grief_ii`: after the grid pass one statistics pass, then MALA never
    reads a row again; the posterior keeps n and the statistics, not the rows.
    """
    if kernel not in KERNELS_1D:
        raise ValueError(f"unknown GRIEF base kernel {kernel!r}; choose one of {KERNELS_1D}")
    if basis not in ("eigen", "rotated"):
        raise ValueError(f"basis must be 'eigen' (eq. 16) or 'rotated', got {basis!r}")
    check_grid(grid)  # before the exact-GP initialisation, which is not free
    data = _training_data(X, y, m_bar, grid, init_points, quantile_sample, chunk, seed,
                          dtype, device)
    dev = data.device
    theta = init_exact(*data.init, kernel, init_points, init_max_iter, seed, start=start)
    if fill:
        grids = data.grids or [grid_1d(data.init[0][:, i], m_bar, grid)
                               for i in range(data.d)]
        data = data._replace(grids=fill_grids(grids, m_bar, grid, p))
    features = _features(data, p, m_bar, kernel, grid, theta["lengthscale"], dtype)
    features.raw_lengthscale.requires_grad_(False)
    stats_model = FeatureGP(features, weights="fixed", dtype=dtype, device=dev, **data.rows)
    gram, proj, yy = stats_model.statistics()  # one pass: MALA needs only these (§5)
    n = stats_model.n
    s0 = theta["outputscale"].to(dtype=dtype, device=dev)
    gram, proj = gram * s0, proj * s0.sqrt()  # the base kernel s₀k: w = 1 is its GRIEF form
    if basis == "eigen":
        lik = ReweightedGrief.from_statistics(gram, proj, yy, n)
        k, nlml_and_grad = lik.p, lik.nlml_and_grad
    else:
        orth = OrthogonalGrief.from_statistics(gram, proj, yy, n, normalize=False)
        k, nlml_and_grad = orth.rank, orth.nlml_and_grad
    noise0 = float(theta["noise"])
    log_target = _log_posterior(nlml_and_grad, k, noise0, w_prior, noise_prior_variance,
                                dtype, dev)
    z0 = torch.zeros(k + 1, dtype=dtype, device=dev)
    z0[-1] = math.log(noise0)  # the prior modes: w = 1, σ² = σ₀²
    chain = mala(log_target, z0, n_iter=n_iter, warmup=burn, thin=thin, seed=seed,
                 progress=progress)
    v = torch.exp(chain.samples)
    if basis == "eigen":
        return ReweightedGriefPosterior(features, s0, gram, proj, yy, v[:, :-1], v[:, -1],
                                        n=n), chain
    X_kept = data.rows.get("X")  # None when the rows were streamed
    return GriefIPosterior.from_orthogonal(features, s0, orth, v[:, :-1], v[:, -1],
                                           X=X_kept), chain


def _log_posterior(nlml_and_grad, k: int, noise0: float, w_prior: tuple[float, float],
                   noise_prior_variance: float, dtype: torch.dtype, dev: torch.device):
    """GRIEF-I's target on z = log(w, σ²) (k weights, then σ²) and its gradient: the log
    marginal likelihood ``-nlml_and_grad(w, σ²)``, the log-normal priors (mode, variance)
    ``w_prior`` on each wᵢ and (``noise0``, ``noise_prior_variance``) on σ², and the
    log-Jacobian Σ z of v = eᶻ."""
    mu_w, tau2_w = lognormal_from_mode_variance(*w_prior)
    mu_n, tau2_n = lognormal_from_mode_variance(noise0, noise_prior_variance)
    mu = torch.full((k + 1,), mu_w, dtype=dtype, device=dev)
    mu[-1] = mu_n
    tau2 = torch.full((k + 1,), tau2_w, dtype=dtype, device=dev)
    tau2[-1] = tau2_n

    def log_target(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        v = torch.exp(z)
        if not torch.isfinite(v).all() or (v <= 0).any():
            return torch.tensor(-math.inf, dtype=dtype), torch.zeros_like(z)
        nlml, g_w, g_noise = nlml_and_grad(v[:-1], v[-1])
        # log-normal prior density of v plus the log-Jacobian Σ z of v = e^z:
        # [−log v − ½ log 2πτ² − (log v − μ)²/(2τ²)] + z  (the −log v and z cancel)
        log_prior = (-z - 0.5 * torch.log(2 * math.pi * tau2)
                     - (z - mu) ** 2 / (2 * tau2)).sum() + z.sum()
        grad = torch.cat([-g_w * v[:-1], (-g_noise * v[-1]).reshape(1)]) - (z - mu) / tau2
        return -nlml + log_prior, grad

    return log_target
