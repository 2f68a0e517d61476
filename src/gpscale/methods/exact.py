"""``exact``: the exact GP, ML-II (marginal likelihood) or MAP-II (with hyperparameter
priors) by L-BFGS — the baseline every paper measures against.

The adapter checks its arguments, builds the model and runs the start policy of
:func:`gpscale.train.starts.fit_from_sqrt_d`. The exact fit's cost model
(:func:`exact_cost`) lives here; the size guard and ``method="auto"`` both use it."""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from ..kernels import Kernel
from ..kernels.chunked import tiled_gradient
from ..models import ExactGP, IterativeExactGP
from ..models.copies import Copies, keep_copies, merge_copies, rows_variance
from ..models.iterative import precond_cap
from ..models.iterative_variance import PATHWISE_SAMPLES
from ..priors import Prior, resolve_priors
from ..progress import progress_bar
from ..sizes import available_memory
from ..train import FitResult, fit_lbfgs
from ..train.exact_refine import PROBES, refine_on_rows
from ..train.starts import fit_from_sqrt_d, sample_rows
from ..train.warning_types import ConvergenceWarning, SizeWarning
from ..validation import as_dtype, check_int, check_positive
from .registry import register

#: methods that scale past the exact GP, named by the size guard (sgpr first: the
#: large-n default for vector inputs, see :mod:`gpscale.methods.auto`)
SCALABLE_METHODS = ("sgpr", "rff", "grief-ii", "svgp", "cholqr-vfe", "minimax", "admm-hocv")
#: the size guard warns when one fit is estimated to take longer than this (seconds)
MAX_FIT_SECONDS = 600.0
#: below this n the guard estimates nothing, and ``solver="auto"`` keeps the Cholesky
#: path (the cost model puts such a fit under 90 s and 0.4 GB)
GUARD_MIN_N = 4000
#: default noise floor of ``fit_exact``, relative to the variance of y (GPyTorch's and
#: BoTorch's 1e-4 on standardised y)
NOISE_FLOOR = 1e-4
#: the cost model of an exact fit (:func:`exact_cost`): seconds per n³ of one NLML +
#: gradient evaluation in a fit, and evaluations per fit, one thread. Measured
#: (2026-11-26, one thread on a quiet core): autograd through one Cholesky takes
#: 2.2e-11 to 2.7e-11 s per n³ at n = 2000 to 6000 (d = 8 and 32, the fastest of three);
#: in a fit, with the line search and L-BFGS's own work, the 4000-row sample fits of
#: the iterative path took 2.5 s per evaluation on pumadyn32nm (39 evaluations, 96 s:
#: 3.8e-11) and 56 to 82 s in all on elevators. Evaluations per fit: 21 to 97 (median 30)
#: on the 2000-row fits of benchmarks/results/uci-exact.jsonl, 39 on that sample, 72 for
#: every row of pumadyn32nm fold 0. (Until 2026-11-26: 8e-11, from fits before the
#: gradient's C⁻¹ moved to ``cholesky_inverse``.) Fixed, not timed at run time, so that
#: the same call gets the same answer on any machine and load
EXACT_N3_SECONDS, EXACT_EVALS = 3.5e-11, 40


#: the iterative path's cost model (:func:`iterative_seconds`), one thread: products in
#: the posterior's solve (with the preconditioner applied in float64, 5 to 20 measured on
#: elevators, keggundirected and kin40k at the sample's θ; the issue's target is at most
#: 60), the rate of the tiled product in the formula of :func:`product_seconds` (it
#: predicts the refinement's evaluations: 6.2 s against 5.8 s measured on pumadyn32nm,
#: 47 s against 51 s on kin40k's 25 600 rows; the posterior's solve, with 65 right-hand
#: sides, runs about twice as fast as the formula says) and the float64 rate of randomly
#: pivoted Cholesky's n r² work (kin40k fold 0: 53 s at n = 36 000, r = 5 592, and 76 s
#: at n = 25 600, r = 7 864: 2.1e10 flop/s; session 15's code, 7.8e9). The preconditioner
#: is costed at the rank its cap allows: an upper bound, since its trace stop ends
#: it at rank 128 to 640 where the noise is large (elevators, keggundirected,
#: pumadyn32nm: about a second). The products grow with n at a bounded rank: 41 on the
#: 198 000-row exact-cluster set (rank 4 096, 87 s each against the formula's 294 s), so
#: there the model's 6 136 s still exceeded the measured 3 933 s
CG_PRODUCTS, PRODUCT_FLOPS, PRECOND_FLOPS = 20, 2e10, 2e10
#: ``refine="auto"`` (:func:`refine_evaluations`): gradient evaluations on every row
#: within REFINE_SECONDS by the cost model, at most REFINE_MAX, none below REFINE_MIN;
#: per evaluation REFINE_CG CG iterations (warm-started from the previous evaluation:
#: 4-41 measured on pumadyn32nm) and the contraction pass at CONTRACTION_FLOPS (RBF in
#: float32 tiles, other kernels by float64 vjp slabs: 18-23 and 2.5-3.5 GFLOP/s measured
#: at n = 8 000, d = 8 and 32, 33 right-hand sides, one thread). REFINE_MAX: on
#: pumadyn32nm fold 0 (7 373 rows, 32 inputs, 4 relevant) 30 evaluations reached test
#: RMSE 0.2142 / NLPD -0.1219 and 50 reached 0.2121 / -0.1319 (sgpr: 0.2121 / -0.1322;
#: Cholesky ML-II on every row: 0.2091 / -0.1455). Raising it from 30 adds evaluations
#: where one costs under 10 s by the model (below about 9 400 rows at d = 32, 11 800 at
#: d = 8): of the real sets, pumadyn32nm (48) and kin40k's 10 000-row split (41; not re-run)
REFINE_SECONDS, REFINE_MAX, REFINE_MIN, REFINE_CG = 300.0, 50, 5, 15
CONTRACTION_FLOPS = (1.8e10, 2.5e9)
#: rows outside the θ sample on which the iterative path compares θ candidates when the
#: sample's fit ends with the noise at its floor (:func:`_held_out_choice`)
HELD_OUT_ROWS = 2000
#: ... when its noise ended within this factor of its floor (kin40k's 0.0025 is 25x it),
#: against a fit on half the sample whose noise floor is ALTERNATIVE_FLOOR x var(y)
NEAR_FLOOR, ALTERNATIVE_FLOOR = 10.0, 1e-2

#: solvers of the exact GP (``solver=``)
SOLVERS = ("auto", "cholesky", "cg")
#: on the iterative path, θ comes from an exact fit on a uniform sample of rows whose
#: estimated Cholesky fit (:func:`exact_seconds`) takes at most this long: 4000 rows, the
#: sample of issue 30's measurement (kin40k fold 0: RMSE 0.073 on all 36 000 rows with
#: θ from 4000 of them, against 0.163 for the exact GP on the 4000 alone)
SUBSAMPLE_SECONDS = 90.0


@register("exact", "exact GP, ML-II (or MAP-II with prior=) by L-BFGS: the reference; "
          "Cholesky up to a few thousand rows, beyond that θ from a row sample and the "
          "posterior on every row by preconditioned CG (solver=)", cluster=True)
def fit_exact(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, noise: float = 0.1,
              mean: str = "zero", max_iter: int = 200, restarts: int = 0,
              seed: int | None = None, progress: bool = False,
              device: torch.device | str | None = None,
              dtype: torch.dtype | str = torch.float64,
              prior: None | str | Mapping[str, Prior] = None,
              tol: float | None = 1e-4, patience: int = 3, init: str = "auto",
              restart_iter: int = 5, noise_floor: float = NOISE_FLOOR,
              solver: str = "auto", subsample: int | None = None, cg_tol: float = 1e-3,
              precond_rank: int | None = None, block_dtype: str | None = None,
              refine: int | str = "auto", probes: int = PROBES,
              client: Any = None) -> tuple[ExactGP | IterativeExactGP, FitResult]:
    """Exact GP by L-BFGS (:func:`gpscale.train.fit_lbfgs`); ``noise`` is the initial
    noise variance in the units of y given (standardised ones by default). Rows that
    repeat an input are merged first (:func:`gpscale.models.copies.merge_copies`: the
    same NLML and posterior, at the cost of the distinct inputs); the solver and the
    cost model count those.

    ``solver``: ``"cholesky"`` factorises C = K + σ²I at every step (O(n³)); ``"cg"``
    learns θ on a uniform sample of ``subsample`` rows (default: as many as the cost
    model fits in :data:`SUBSAMPLE_SECONDS`, 4000) by the Cholesky path, then computes
    the posterior on every row without an n × n matrix (:class:`IterativeExactGP`:
    weights by preconditioned CG to relative residual ``cg_tol``, preconditioned by a
    randomly pivoted Cholesky factor of rank ``precond_rank`` (default: grown until its
    trace error is small against nσ²), kernel blocks in ``block_dtype`` (default: the
    model's), the variance cache in the same passes); with ``client`` (a dask cluster, from
    ``gpscale.fit(..., workers=N)`` or ``scheduler=``) each product's row blocks run on
    its workers. ``"auto"``: Cholesky unless the size guard (:func:`size_guard`) finds
    the fit too long or too large, then CG.

    ``refine`` (with ``solver="cg"``): at most this many stochastic gradient evaluations
    of the NLML on every row (:func:`gpscale.train.exact_refine.refine_on_rows`, ``probes``
    probe vectors) between the sample's fit and the posterior; ``"auto"``: as many as
    :func:`refine_evaluations` fits in :data:`REFINE_SECONDS`; 0: θ from the sample.

    ``prior``: ``None`` for ML-II, ``"botorch"`` for BoTorch ``SingleTaskGP``'s default
    priors, or ``{name: gpscale.priors.Prior}``: MAP-II (see :mod:`gpscale.priors` for
    the parameterisation). ``tol`` / ``patience``: stop once the objective has moved by
    less than ``tol`` nats per training point in ``patience`` consecutive iterations
    (``tol=None``: only torch's absolute tests).

    ``init="auto"``: a stationary kernel whose lengthscales are all at the default (1)
    starts from √(its number of input columns) instead: standardised inputs are about
    √(2d) apart, so a lengthscale of 1 sees almost no correlation in many dimensions and
    the fit stalls on the plateau where the model explains y as noise. Lengthscales the
    kernel was given (any other value) are kept. A search from √d that ends with the
    noise at its floor gets a second one from the given values; the lower objective
    wins (:func:`gpscale.train.starts.fit_from_sqrt_d`). ``"given"`` uses the kernel's
    values as they are. ``restarts`` more starts perturb the initial values at random (seeded by
    ``seed``); each runs ``restart_iter`` iterations and only the best continues.

    ``noise_floor``: the noise variance stays above ``noise_floor · var(y)`` (default
    1e-4, GPyTorch's and BoTorch's floor on standardised y); on small, nearly
    noise-free sets ML-II otherwise can end in an interpolating optimum with σ² → 0
    whose predictive variances are far too small. Pass a smaller value for
    noise-free data (simulators). Warns (:class:`SizeWarning`) when the fit would not fit
    in the available memory or the cost model (:func:`exact_cost`) puts it at over ten
    minutes.
    """
    seed = None if seed is None else check_int("seed", seed, 0)
    if init not in ("auto", "given"):
        raise ValueError(f"init must be 'auto' or 'given', got {init!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    dtype = as_dtype(dtype)
    X, y, copies = merge_copies(X, y)
    n, d = int(X.shape[0]), int(X.shape[1])
    cholesky = functools.partial(
        _fit_cholesky, mean=mean, max_iter=max_iter, restarts=restarts, seed=seed,
        progress=progress, device=device, dtype=dtype, prior=prior, tol=tol,
        patience=patience, init=init, restart_iter=restart_iter)
    rbf = tiled_gradient(kernel)  # tiled contraction
    if solver == "auto":
        solver = "cg" if too_large(n, d, dtype, rbf) else "cholesky"
    if solver == "cg":
        rows = sample_size(n) if subsample is None else check_int("subsample", subsample, 2)
        if refine == "auto":
            refine = refine_evaluations(n, d, rbf)
        elif isinstance(refine, str):
            raise ValueError(f"refine must be 'auto' or an integer >= 0, got {refine!r}")
        refine = check_int("refine", refine, 0)
        keep = sample_rows(n, min(rows, n), 0 if seed is None else seed, X.device)
        refine = refine if n > len(keep) else 0  # a sample of every row: ML-II already
        given_kernel = copy.deepcopy(kernel)  # fit_exact trains the kernel it is given

        def sample_fit(rows: torch.Tensor, k: Kernel, floor: float, noise: float
                       ) -> tuple[ExactGP, FitResult]:
            return cholesky(X[rows], y[rows], None if copies is None else copies.subset(rows),
                            k, noise, floor)

        small, result = sample_fit(keep, kernel, noise_floor, noise)
        sampled, user_floor = small, ExactGP.noise.floor_of(small)
        if _near_floor(small) and n > len(keep):
            floor = max(noise_floor, ALTERNATIVE_FLOOR)
            start = max(noise, 10 * _noise_floor(floor, y, copies))
            refit = lambda rows: sample_fit(rows, given_kernel, floor, start)  # noqa: E731
            small = _smooth_start(small, result, keep, refit) if refine \
                else _held_out_choice(small, result, X, y, copies, keep, refit,
                                      0 if seed is None else seed)
        given = {k: v for k, v in (("precond_rank", precond_rank),
                                   ("block_dtype", block_dtype)) if v is not None}
        model = IterativeExactGP.from_exact(
            small, X, y, tol=check_positive("cg_tol", cg_tol), solve=False,
            noise_floor=user_floor if refine else None,
            seed=0 if seed is None else seed, client=client, copies=copies, **given)
        x0 = None
        if refine:
            with progress_bar(progress, total=refine, unit="eval",
                              desc=f"refining θ on {n} rows") as bar:
                steps = refine_on_rows(model, refine, probes=check_int("probes", probes, 1),
                                       seed=0 if seed is None else seed,
                                       callback=lambda evaluation, info: bar.update())
            result.history.extend(steps.history)
            result.wall_s += steps.wall_s
            result.theta = steps.theta
            model.refined = {"evaluations": steps.n_evals, "seconds": steps.wall_s,
                             "reason": steps.reason, "probes": probes,
                             "start": "half sample" if small is not sampled else "sample"}
            x0 = model.alpha
        model.solve(x0=x0, progress=progress)
        result.history.append({"phase": "all rows", **model.solve_info})
        result.wall_s += model.solve_info["seconds"]
        return model, result
    return cholesky(X, y, copies, kernel, noise, noise_floor)


def _fit_cholesky(X: torch.Tensor, y: torch.Tensor, copies: Copies | None, kernel: Kernel,
                  noise: float, noise_floor: float, *, mean: str, max_iter: int,
                  restarts: int, seed: int | None, progress: bool,
                  device: torch.device | str | None, dtype: torch.dtype,
                  prior: None | str | Mapping[str, Prior], tol: float | None,
                  patience: int, init: str, restart_iter: int) -> tuple[ExactGP, FitResult]:
    """:func:`fit_exact`'s Cholesky path on rows whose repeated inputs are merged
    (``copies``; :mod:`gpscale.models.copies`), after the size guard."""
    size_guard(int(X.shape[0]), int(X.shape[1]), dtype)
    floor = _noise_floor(check_positive("noise_floor", noise_floor), y, copies)
    noise = check_positive("noise", noise)
    if not noise > floor:
        raise ValueError(f"noise={noise:g} is not above the noise floor {floor:g} "
                         f"(noise_floor={noise_floor:g} x var(y)); pass a larger noise or "
                         "a smaller noise_floor")
    model = ExactGP(kernel, X, y, noise=noise, mean=mean, dtype=dtype, device=device,
                    noise_floor=floor, copies=copies)
    penalty = resolve_priors(model, prior, d=int(X.shape[1]))
    objective = (lambda: model.nlml() + penalty()) if penalty else model.nlml
    options = dict(max_iter=check_int("max_iter", max_iter, 1),
                   restarts=check_int("restarts", restarts, 0), seed=seed,
                   progress=progress, method="exact", tol=tol,
                   patience=check_int("patience", patience, 1),
                   restart_iter=check_int("restart_iter", restart_iter, 1))
    return model, fit_from_sqrt_d(model, lambda: fit_lbfgs(model, objective, **options),
                                  init)


def _held_out_choice(small: ExactGP, result: FitResult, X: torch.Tensor, y: torch.Tensor,
                     copies: Copies | None, keep: torch.Tensor, refit, seed: int) -> ExactGP:
    """θ for the iterative path when the sample's ML-II fit ended with the noise at or
    near its floor (:func:`_near_floor`), an interpolating optimum that can predict
    badly (pumadyn32nm fold 0: on 4000 of its 7 373 rows, σ² at 1.02x its floor and 4
    short lengthscales of 32, test RMSE 0.266; ML-II on 2000 rows: 0.214). Fit again on
    half the sample, from the given values, with the noise kept above
    :data:`ALTERNATIVE_FLOOR` x var(y), and keep whichever θ, conditioned on the whole
    sample, predicts rows outside the sample better (mean NLPD of y on up to
    :data:`HELD_OUT_ROWS` of them; a row merged from c copies is their mean, with noise
    σ²/c): noise-free data keep the interpolating θ, noisy
    data the other; warn either way, saying which."""
    outside = torch.ones(X.shape[0], dtype=torch.bool, device=X.device)
    outside[keep] = False
    held = outside.nonzero().reshape(-1)
    g = torch.Generator().manual_seed(seed)
    held = held[torch.randperm(held.numel(), generator=g)[:HELD_OUT_ROWS].to(held.device)]
    half, _ = refit(keep[: keep.numel() // 2])
    alt = copy.deepcopy(half)
    alt.X, alt.y = small.X, small.y  # the half's θ, conditioned on the whole sample
    keep_copies(alt, small.copies)
    counts = None if copies is None else copies.counts[held]
    scores = [_nlpd(m, X[held], y[held], counts) for m in (small, alt)]
    kept = alt if scores[1] < scores[0] else small
    result.history.append({"phase": "held-out check", "rows": int(held.numel()),
                           "nlpd_sample_theta": scores[0], "nlpd_half_sample_theta": scores[1],
                           "kept": "half sample" if kept is alt else "sample"})
    warnings.warn(
        f"the exact GP's hyperparameter fit on a sample of {keep.numel()} rows ended with "
        "the noise at or near its floor (an interpolating optimum?); a fit on half the "
        f"sample with the noise above {ALTERNATIVE_FLOOR:g} x var(y) "
        f"predicted {held.numel()} other rows with NLPD {scores[1]:.3f} against "
        f"{scores[0]:.3f}, so θ comes from the "
        f"{'half sample' if kept is alt else 'whole sample'}. Compare method='sgpr', or "
        "pass subsample= / noise_floor=", ConvergenceWarning, stacklevel=3)
    return kept


def _smooth_start(small: ExactGP, result: FitResult, keep: torch.Tensor, refit) -> ExactGP:
    """The start of ``refine`` when the sample's ML-II fit ended with the noise at or
    near its floor (:func:`_near_floor`): a fit on half the sample with the noise kept
    above :data:`ALTERNATIVE_FLOOR` x var(y), the fit :func:`_held_out_choice` compares.
    The refinement on every row then runs with the user's floor, so data that are
    noise-free take the noise back down; an interpolating optimum of the sample is a
    basin the refinement does not leave (pumadyn32nm fold 0: from the sample's θ the
    noise stayed at 1.04x its floor; from this start it went to the all-rows ML-II
    value)."""
    alt, _ = refit(keep[: keep.numel() // 2])
    result.history.append({"phase": "smooth start", "sample_noise": float(small.noise.detach()),
                           "start_noise": float(alt.noise.detach())})
    warnings.warn(
        f"the exact GP's hyperparameter fit on a sample of {keep.numel()} rows ended with "
        "the noise at or near its floor (an interpolating optimum?); the refinement on "
        f"every row starts instead from a fit on half the sample with the noise above "
        f"{ALTERNATIVE_FLOOR:g} x var(y)", ConvergenceWarning, stacklevel=3)
    return alt


def _near_floor(model: ExactGP) -> bool:
    """The noise ended within :data:`NEAR_FLOOR` times its floor: L-BFGS's last steps on
    the softplus scale stop short of the floor itself (pumadyn32nm fold 0: 1.02x)."""
    floor = ExactGP.noise.floor_of(model)
    noise = float(model.noise.detach())
    return bool(model.raw_noise.requires_grad) and noise < NEAR_FLOOR * floor


def _nlpd(model: ExactGP, X: torch.Tensor, y: torch.Tensor,
          counts: torch.Tensor | None = None) -> float:
    """Mean negative log predictive density of y at X (noise included; σ²/c where y is
    the mean of ``counts`` copies)."""
    pred = model.predict(X)
    noise = model.noise.detach()
    var = (pred.var + (noise if counts is None else noise / counts)).clamp_min(1e-12)
    r = y.to(var) - pred.mean
    return float((0.5 * torch.log(2 * math.pi * var) + 0.5 * r * r / var).mean())


def _noise_floor(relative: float, y: torch.Tensor, copies: Copies | None = None) -> float:
    """``relative`` · var(y) (y's rows, with copies those merged), or the model's own
    floor when y has no variance."""
    var = rows_variance(torch.as_tensor(y).detach().reshape(-1), copies)
    return relative * var if var > 0 and math.isfinite(var) else ExactGP.noise.floor


# -- the cost model and the size guard ------------------------------------------------
def exact_seconds(n: int, evals: int = EXACT_EVALS) -> float:
    """Rough wall time of an exact fit on n rows: ``evals`` evaluations of cost ∝ n³."""
    return evals * EXACT_N3_SECONDS * float(n) ** 3


def exact_bytes(n: int, d: int, dtype: torch.dtype = torch.float64) -> float:
    """Peak memory of an exact fit on n rows and d columns: three n × n matrices (module
    doc of :mod:`gpscale.models.exact`) and a few copies of the rows."""
    item = torch.empty((), dtype=dtype).element_size()
    return 3.0 * n * n * item + 4.0 * n * d * item


def exact_cost(n: int, d: int, dtype: torch.dtype = torch.float64,
               evals: int = EXACT_EVALS) -> dict[str, float]:
    """The exact fit's cost model, used by the size guard and by ``method="auto"``:
    estimated peak memory (bytes, :func:`exact_bytes`) and wall time (seconds,
    :func:`exact_seconds`) of a fit on n rows and d columns."""
    return {"memory_bytes": exact_bytes(n, d, dtype), "seconds": exact_seconds(n, evals)}


def refine_seconds(n: int, d: int, rbf: bool = True) -> float:
    """One gradient evaluation of ``refine`` on n rows of d columns: :data:`REFINE_CG`
    products with y − m and the probes (:func:`product_seconds`), and the contraction
    pass (per kernel entry a GEMM over the 1 + t right-hand sides, the kernel and its
    lengthscale sums): float32 tiles for an RBF (``rbf``), float64 ``Kernel.vjp`` slabs
    otherwise (:data:`CONTRACTION_FLOPS`)."""
    k = 1 + PROBES
    rate = CONTRACTION_FLOPS[0 if rbf else 1]
    contraction = float(n) * n * (2.0 * k + 4.0 * (d + 2) + 30.0) / rate
    return REFINE_CG * product_seconds(n, d, k) + contraction


def refine_evaluations(n: int, d: int, rbf: bool = True) -> int:
    """``refine="auto"``: as many gradient evaluations as :func:`refine_seconds` fits in
    :data:`REFINE_SECONDS`, at most :data:`REFINE_MAX`; none where fewer than
    :data:`REFINE_MIN` fit (a few L-BFGS steps move little)."""
    k = int(REFINE_SECONDS // refine_seconds(n, d, rbf))
    return min(REFINE_MAX, k) if k >= REFINE_MIN else 0


def iterative_seconds(n: int, d: int, rbf: bool = True) -> float:
    """Rough wall time (one thread) of ``solver="cg"`` at its defaults on n rows of d
    columns: the θ fit on :func:`sample_size` rows (:func:`exact_seconds`), the
    preconditioner at its largest rank (:func:`~gpscale.models.iterative.precond_cap`
    with the memory unknown; it stops earlier once its trace error is small) and
    :data:`CG_PRODUCTS` products with the mean's and
    the variance cache's right-hand sides (:func:`product_seconds`), plus ``refine="auto"``'s
    evaluations (:func:`refine_evaluations`; ``rbf``: the kernel's contraction is the
    tiled one). Like :func:`exact_seconds`, fixed rather than timed, so that a call gets
    the same answer on any machine and load."""
    rank = precond_cap(n)
    precond = float(n) * rank * rank / PRECOND_FLOPS
    return exact_seconds(sample_size(n)) + precond + CG_PRODUCTS * product_seconds(n, d) \
        + refine_evaluations(n, d, rbf) * refine_seconds(n, d, rbf)


def product_seconds(n: int, d: int, rhs: int = 1 + PATHWISE_SAMPLES) -> float:
    """One product C V on n rows with ``rhs`` right-hand sides, float32 tiles: per kernel
    entry a GEMM over d + 2 augmented columns, one map and ``rhs`` multiply-adds."""
    return float(n) * n * (2.0 * (d + 2) + 2.0 * rhs) / PRODUCT_FLOPS


def fit_seconds(n: int, d: int, solver: str = "auto", rbf: bool = True) -> float:
    """The cost model of :func:`fit_exact` with ``solver`` ("auto": the one its switch,
    :func:`too_large`, picks): :func:`exact_seconds` or :func:`iterative_seconds`
    (``rbf``: the kernel's gradient contraction is the tiled one)."""
    if solver == "auto":
        solver = "cg" if too_large(n, d, rbf=rbf) else "cholesky"
    return iterative_seconds(n, d, rbf) if solver == "cg" else exact_seconds(n)


def too_large(n: int, d: int, dtype: torch.dtype = torch.float64, rbf: bool = True
              ) -> bool:
    """Whether ``solver="auto"`` leaves the Cholesky path: from :data:`GUARD_MIN_N` rows
    on, when its n x n matrices would not fit in memory or when the cost model puts the
    iterative path (:func:`iterative_seconds`, ``rbf`` as there) ahead of it
    (:func:`exact_seconds`): for an RBF about 5 300 rows with d = 8, 6 200 with d = 32;
    for other kernels, whose refinement contracts by float64 slabs, about 6 300 and
    6 700. On pumadyn32nm's 7 373 rows the
    iterative fit took 362 s (48 refinement evaluations), the Cholesky ML-II fit on every
    row 72 evaluations, some 650 to 1 500 s. The Cholesky fit reaches the optimum on
    every row, where the iterative one refines a sample's θ by stochastic steps;
    ``solver="cholesky"`` asks for it at any size."""
    if n < GUARD_MIN_N:
        return False
    est, avail = exact_cost(n, d, dtype), available_memory()
    return est["seconds"] > iterative_seconds(n, d, rbf) or (
        avail is not None and est["memory_bytes"] > 0.8 * avail)


def sample_size(n: int) -> int:
    """Rows of the hyperparameter fit on the iterative path: the most, in hundreds, whose
    Cholesky fit the cost model puts within :data:`SUBSAMPLE_SECONDS` (at most n)."""
    rows = (SUBSAMPLE_SECONDS / (EXACT_EVALS * EXACT_N3_SECONDS)) ** (1 / 3)
    return min(n, max(2, 100 * int(rows // 100)))


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
            f"{est['seconds'] / 60:.0f} minutes at one thread's speed (dense n x n "
            f"Cholesky, O(n³) per evaluation); methods that scale: "
            f"{', '.join(SCALABLE_METHODS)} "
            "(method=...), or fit on a subset of the rows", SizeWarning, stacklevel=3)
    return est
