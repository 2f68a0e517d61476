"""``exact``: the exact GP, ML-II (marginal likelihood) or MAP-II (with hyperparameter
priors) by L-BFGS — the baseline every paper measures against."""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Mapping

import torch

from ..kernels import Kernel, Stationary
from ..models import ExactGP
from ..priors import Prior, resolve_priors
from ..train import FitResult, fit_lbfgs
from ..train.result import restore, snapshot
from ..train.warning_types import SizeWarning
from ..validation import as_dtype, check_int, check_positive
from .registry import register

#: methods that scale past the exact GP, named by the size guard
SCALABLE_METHODS = ("rff", "grief-ii", "svgp", "cholqr-vfe", "minimax", "admm-hocv")
#: the size guard warns when one fit is estimated to take longer than this (seconds)
MAX_FIT_SECONDS = 600.0
#: evaluations of the NLML and its gradient a fit typically takes (for the estimate)
TYPICAL_EVALS = 60
#: below this n the guard does not estimate anything (a fit is seconds, memory < 0.4 GB)
GUARD_MIN_N = 4000
#: default noise floor of ``fit_exact``, relative to the variance of y (GPyTorch's and
#: BoTorch's 1e-4 on standardised y)
NOISE_FLOOR = 1e-4
#: the lengthscale a stationary kernel has unless it is given one
DEFAULT_LENGTHSCALE = 1.0


@register("exact", "exact GP, ML-II (or MAP-II with prior=) by L-BFGS: the reference; up to "
          "about 10^4 rows (O(n³) time, O(n²) memory per step)")
def fit_exact(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, noise: float = 0.1,
              mean: str = "zero", max_iter: int = 200, restarts: int = 0,
              seed: int | None = None, progress: bool = False,
              device: torch.device | str | None = None,
              dtype: torch.dtype | str = torch.float64,
              prior: None | str | Mapping[str, Prior] = None,
              tol: float | None = 1e-4, patience: int = 3, init: str = "auto",
              restart_iter: int = 5,
              noise_floor: float = NOISE_FLOOR) -> tuple[ExactGP, FitResult]:
    """Exact GP by L-BFGS (:func:`gpscale.train.fit_lbfgs`); ``noise`` is the initial
    noise variance in the units of y given (standardised ones by default).

    ``prior``: ``None`` for ML-II, ``"botorch"`` for BoTorch ``SingleTaskGP``'s default
    priors, or ``{name: gpscale.priors.Prior}``: MAP-II (see :mod:`gpscale.priors` for
    the parameterisation). ``tol`` / ``patience``: stop once the objective has moved by
    less than ``tol`` nats per training point in ``patience`` consecutive iterations
    (``tol=None``: only torch's absolute tests).

    ``init="auto"``: a stationary kernel whose lengthscales are all at the default (1)
    starts from √(its number of input columns) instead: standardised inputs are about
    √(2d) apart, so a lengthscale of 1 sees almost no correlation in many dimensions and
    the fit stalls on the plateau where the model explains y as noise. Lengthscales the
    kernel was given (any other value) are kept. ``"given"`` uses the kernel's values as
    they are. ``restarts`` more starts perturb the initial values at random (seeded by
    ``seed``); each runs ``restart_iter`` iterations and only the best continues.

    ``noise_floor``: the noise variance stays above ``noise_floor · var(y)`` (default
    1e-4, GPyTorch's and BoTorch's floor on standardised y); on small, nearly
    noise-free sets ML-II otherwise can end in an interpolating optimum with σ² → 0
    whose predictive variances are far too small. Pass a smaller value for
    noise-free data (simulators). Warns (:class:`SizeWarning`) when n is beyond what
    this machine can factorise in memory or in about ten minutes (:func:`exact_cost`).
    """
    seed = None if seed is None else check_int("seed", seed, 0)
    if init not in ("auto", "given"):
        raise ValueError(f"init must be 'auto' or 'given', got {init!r}")
    dtype = as_dtype(dtype)
    size_guard(int(X.shape[0]), int(X.shape[1]), dtype)
    floor = _noise_floor(check_positive("noise_floor", noise_floor), y)
    noise = check_positive("noise", noise)
    if not noise > floor:
        raise ValueError(f"noise={noise:g} is not above the noise floor {floor:g} "
                         f"(noise_floor={noise_floor:g} x var(y)); pass a larger noise or "
                         "a smaller noise_floor")
    model = ExactGP(kernel, X, y, noise=noise, mean=mean, dtype=dtype, device=device,
                    noise_floor=floor)
    penalty = resolve_priors(model, prior, d=int(X.shape[1]))
    objective = (lambda: model.nlml() + penalty()) if penalty else model.nlml
    options = dict(max_iter=check_int("max_iter", max_iter, 1),
                   restarts=check_int("restarts", restarts, 0), seed=seed,
                   progress=progress, method="exact", tol=tol,
                   patience=check_int("patience", patience, 1),
                   restart_iter=check_int("restart_iter", restart_iter, 1))
    params = [p for p in model.parameters() if p.requires_grad]
    given = snapshot(params)
    if not (init == "auto" and _unit_to_sqrt_d(model)):
        return model, fit_lbfgs(model, objective, **options)
    result = fit_lbfgs(model, objective, **options)
    if not _noise_at_floor(model):
        return model, result
    # From long lengthscales the search can fall into an interpolating optimum with
    # σ² at its floor; the unit lengthscales then get their own run, the lower wins.
    found = snapshot(params)
    restore(params, given)
    other = fit_lbfgs(model, objective, **options)
    best = other if other.objective < result.objective else result
    restore(params, found if best is result else snapshot(params))
    best.n_evals = result.n_evals + other.n_evals
    best.wall_s = result.wall_s + other.wall_s
    return model, best


def _noise_at_floor(model: ExactGP) -> bool:
    floor = ExactGP.noise.floor_of(model)
    return bool(model.raw_noise.requires_grad) and float(model.noise.detach()) < 1.01 * floor


def _noise_floor(relative: float, y: torch.Tensor) -> float:
    """``relative`` · var(y), or the model's own floor when y has no variance."""
    y = torch.as_tensor(y).detach().reshape(-1)
    var = float(y.to(torch.float64).var()) if y.numel() > 1 else 0.0
    return relative * var if var > 0 and math.isfinite(var) else ExactGP.noise.floor


def _stationary(model: ExactGP) -> list[Stationary]:
    return [m for m in model.kernel.modules()
            if isinstance(m, Stationary) and m.raw_lengthscale.requires_grad]


def _unit_to_sqrt_d(model: ExactGP) -> bool:
    """The ``init="auto"`` start: every stationary kernel whose lengthscales are all at
    the default gets √(columns the kernel sees); given ones are kept. True when any
    lengthscale changed."""
    d, changed = model.X.shape[1], False
    for k in _stationary(model):
        ls = k.lengthscale.detach()
        if not bool(torch.all((ls - DEFAULT_LENGTHSCALE).abs() <= 1e-9)):  # given ones
            continue
        cols = len(k.active_dims) if k.active_dims is not None else d
        if cols > 1:
            k.lengthscale, changed = ls * math.sqrt(cols), True
    return changed


# -- the size guard ------------------------------------------------------------------------
_RATE: dict[str, float] = {}


def _seconds_per_n3(dtype: torch.dtype) -> float:
    """Seconds per n³ of one NLML + gradient evaluation's dense algebra (a Cholesky and
    the solve for C⁻¹), measured once per process on a small matrix."""
    key = str(dtype)
    if key not in _RATE:
        m = 384
        A = torch.randn(m, m, dtype=dtype)
        A = A @ A.mT + m * torch.eye(m, dtype=dtype)
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            L = torch.linalg.cholesky(A)
            torch.cholesky_solve(torch.eye(m, dtype=dtype), L)
            best = min(best, time.perf_counter() - t0)
        # small matrices run below peak speed: charge large ones half this rate
        _RATE[key] = 0.5 * best / m**3
    return _RATE[key]


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def exact_cost(n: int, d: int, dtype: torch.dtype = torch.float64,
               evals: int = TYPICAL_EVALS) -> dict[str, float]:
    """Estimated peak memory (bytes: three n x n matrices, module doc of
    :mod:`gpscale.models.exact`) and wall time (seconds: ``evals`` evaluations of cost
    ∝ n³, the rate measured on this machine) of an exact fit on n rows and d columns."""
    item = torch.empty((), dtype=dtype).element_size()
    memory = 3.0 * n * n * item + 4.0 * n * d * item
    seconds = evals * _seconds_per_n3(dtype) * float(n) ** 3
    return {"memory_bytes": memory, "seconds": seconds}


def size_guard(n: int, d: int, dtype: torch.dtype = torch.float64) -> dict | None:
    """Warn (:class:`SizeWarning`) with the estimate when an exact fit on n rows would not
    fit in memory or would take longer than :data:`MAX_FIT_SECONDS`; returns the
    estimate (None below :data:`GUARD_MIN_N` rows, where nothing is estimated)."""
    if n < GUARD_MIN_N:
        return None
    est = exact_cost(n, d, dtype)
    avail = available_memory()
    too_big = avail is not None and est["memory_bytes"] > 0.8 * avail
    too_slow = est["seconds"] > MAX_FIT_SECONDS
    if too_big or too_slow:
        mem = f"{est['memory_bytes'] / 2**30:.1f} GiB"
        have = f" of {avail / 2**30:.1f} GiB available" if avail is not None else ""
        warnings.warn(
            f"the exact GP on n={n} rows needs about {mem}{have} and about "
            f"{est['seconds'] / 60:.0f} minutes on this machine (dense n x n Cholesky, "
            f"O(n³) per evaluation); methods that scale: {', '.join(SCALABLE_METHODS)} "
            "(method=...), or fit on a subset of the rows", SizeWarning, stacklevel=3)
    return est
