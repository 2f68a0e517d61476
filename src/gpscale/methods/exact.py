"""``exact``: the exact GP, ML-II (marginal likelihood) or MAP-II (with hyperparameter
priors) by L-BFGS — the baseline every paper measures against.

:func:`fit_exact`, the registered method, builds an :class:`ExactFit` (its options,
checked) and runs it: the start policy of :func:`gpscale.train.starts.fit_from_sqrt_d`
on every row or, past the Cholesky limit, θ fitted on a row sample, refined on every row
and the posterior solved by CG. Its cost model, which picks the solver
(:meth:`ExactFit.solver_for`), is in :mod:`gpscale.methods.cost`."""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from ..deadline import Deadline
from ..kernels import Kernel, gap_rows
from ..kernels.chunked import tiled_gradient
from ..metrics import nlpd
from ..models import ConjugateGradients, ExactGP
from ..models.copies import Copies, keep_copies, merge_copies, rows_variance
from ..models.skill import fit_skill
from ..priors import Prior, resolve_priors
from ..progress import MORE_TIME, progress_bar, progress_note
from ..train import FitResult, fit_lbfgs
from ..train.exact_refine import PROBES, refine_on_rows
from ..train.lbfgs import OUT_OF_TIME, warn_if_out_of_time
from ..train.starts import fit_from_sqrt_d, sample_rows
from ..train.warning_types import ConvergenceWarning
from ..validation import as_dtype, check_int, check_optional_int, check_positive
from .cost import (
    REFINE_SECONDS,
    refine_evaluations,
    refine_seconds,
    sample_size,
    size_guard,
    solve_seconds,
    too_large,
)
from .options import takes_options
from .registry import register

#: default noise floor of ``fit_exact``, relative to the variance of y (GPyTorch's and
#: BoTorch's 1e-4 on standardised y)
NOISE_FLOOR = 1e-4
#: rows outside the θ sample on which the iterative path compares θ candidates when the
#: sample's fit ends with the noise at its floor (:func:`_held_out_choice`)
HELD_OUT_ROWS = 2000
#: ... when its noise ended within this factor of its floor, against a fit on half the
#: sample whose noise floor is ALTERNATIVE_FLOOR x var(y)
#: (benchmarks/results/exact-large/README.md)
NEAR_FLOOR, ALTERNATIVE_FLOOR = 10.0, 1e-2
#: solvers of the exact GP (``solver=``)
SOLVERS = ("auto", "cholesky", "cg")
#: with ``time_limit``, the stages before the posterior's solve leave it this many times
#: its estimate (:func:`~gpscale.methods.cost.solve_seconds`)
SOLVE_MARGIN = 2.0


@dataclass
class ExactFit:
    """The exact GP's fit (:func:`fit_exact`, whose docstring says what each option
    does): its options, typed and checked once, and its stages. :meth:`solver_for` makes
    the Cholesky-or-CG choice on the rows the fit uses (copies merged; :meth:`solver_on`
    counts them for whoever asks before the fit: the kernel choice, ``method="auto"``).
    :meth:`fit` runs the Cholesky fit, or on the CG path the fit on a row sample, the
    refinement on every row and the posterior's solve, all within one
    :class:`~gpscale.deadline.Deadline` that starts when :meth:`fit` does."""

    noise: float = 0.1
    mean: str = "zero"
    max_iter: int = 200
    restarts: int = 0
    seed: int | None = None
    progress: bool = False
    device: torch.device | str | None = None
    dtype: torch.dtype | str = torch.float64
    prior: None | str | Mapping[str, Prior] = None
    tol: float | None = 1e-4
    patience: int = 3
    init: str = "auto"
    restart_iter: int = 5
    noise_floor: float = NOISE_FLOOR
    solver: str = "auto"
    subsample: int | None = None
    cg_tol: float = 1e-3
    precond_rank: int | None = None
    block_dtype: str | None = None
    refine: int | str = "auto"
    probes: int = PROBES
    client: Any = None
    time_limit: float | Deadline | None = None

    #: the options only the CG path reads: a fit by Cholesky ignores them
    CG_OPTIONS: ClassVar[tuple[str, ...]] = ("subsample", "cg_tol", "precond_rank",
                                             "block_dtype", "refine", "probes")

    def __post_init__(self) -> None:
        # the options every path reads; the CG path's own are checked where it starts
        # (:meth:`_cg_options`), so a Cholesky fit ignores them
        self.seed = check_optional_int("seed", self.seed, 0)
        if self.init not in ("auto", "given"):
            raise ValueError(f"init must be 'auto' or 'given', got {self.init!r}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        self.dtype = as_dtype(self.dtype)
        Deadline.check(self.time_limit)
        for name, low in (("max_iter", 1), ("restarts", 0), ("patience", 1),
                          ("restart_iter", 1)):
            setattr(self, name, check_int(name, getattr(self, name), low))
        self.noise_floor = check_positive("noise_floor", self.noise_floor)
        self.noise = check_positive("noise", self.noise)

    def solver_for(self, n: int, d: int, rbf: bool) -> str:
        """``"cholesky"`` or ``"cg"`` for n distinct rows of d columns: the ``solver``
        given, or for ``"auto"`` the cost model's (:func:`~gpscale.methods.cost.too_large`;
        ``rbf``: the kernel's gradient is the tiled contraction)."""
        if self.solver != "auto":
            return self.solver
        return "cg" if too_large(n, d, self.dtype, rbf) else "cholesky"

    def solver_on(self, X: torch.Tensor, kernel: Kernel | None = None) -> str:
        """:meth:`solver_for` on the rows a fit on X would use: its repeated inputs merged
        (:func:`~gpscale.models.copies.merge_copies`, the rows of ``kernel``'s gap terms
        apart). ``kernel`` None: whatever the family, so the switch of a kernel without
        the tiled contraction, the later one."""
        d, rbf = int(X.shape[1]), kernel is not None and tiled_gradient(kernel)
        solver = self.solver_for(int(X.shape[0]), d, rbf)
        # the switch comes with more rows: where every row stays on Cholesky the
        # distinct ones do too, so they are counted only where every row would switch
        if solver == "cg" and self.solver == "auto":
            apart = None if kernel is None else gap_rows(kernel, X)
            n = int(merge_copies(X, X.new_zeros(X.shape[0]), apart=apart)[0].shape[0])
            solver = self.solver_for(n, d, rbf)
        return solver

    def fit(self, X: torch.Tensor, y: torch.Tensor, kernel: Kernel
            ) -> tuple[ExactGP, FitResult]:
        """Fit on (X, y) with ``kernel`` (trained in place), its skill checked
        (:func:`_skill_checked`)."""
        deadline = Deadline.of(self.time_limit)
        t0 = time.perf_counter()
        X, y, copies = merge_copies(X, y, apart=gap_rows(kernel, X))
        rows = _Rows(X, y, copies, tiled_gradient(kernel))
        if self.solver_for(rows.n, rows.d, rows.rbf) == "cg":
            return _skill_checked(*self._iterative(rows, kernel, deadline, t0))
        return _skill_checked(*self._cholesky(rows, kernel, self.noise, self.noise_floor,
                                              deadline))

    @property
    def _seed(self) -> int:
        """The seed of the CG path's sample, probes and preconditioner."""
        return 0 if self.seed is None else self.seed

    def _cholesky(self, rows: _Rows, kernel: Kernel, noise: float, noise_floor: float,
                  deadline: Deadline | None) -> tuple[ExactGP, FitResult]:
        """The Cholesky fit on ``rows`` (every row, or the CG path's sample), after the
        size guard; the search stops at ``deadline`` (and warns)."""
        size_guard(rows.n, rows.d, self.dtype)
        floor = _noise_floor(noise_floor, rows.y, rows.copies)
        if not noise > floor:
            raise ValueError(f"noise={noise:g} is not above the noise floor {floor:g} "
                             f"(noise_floor={noise_floor:g} x var(y)); pass a larger noise "
                             "or a smaller noise_floor")
        model = ExactGP(kernel, rows.X, rows.y, noise=noise, mean=self.mean, dtype=self.dtype,
                        device=self.device, noise_floor=floor, copies=rows.copies)
        penalty = resolve_priors(model, self.prior, d=rows.d)
        objective = (lambda: model.nlml() + penalty()) if penalty else model.nlml
        options = dict(max_iter=self.max_iter, restarts=self.restarts, seed=self.seed,
                       progress=self.progress, method="exact", tol=self.tol,
                       patience=self.patience, restart_iter=self.restart_iter,
                       deadline=deadline)
        result = fit_from_sqrt_d(model, lambda: fit_lbfgs(model, objective, **options),
                                 self.init)
        return model, warn_if_out_of_time(result, f"the hyperparameter search on {model.n} rows")

    def _cg_options(self, rows: _Rows) -> tuple[int, int, float | None, ConjugateGradients]:
        """The CG path's options, checked: the sample's size, the refinement's gradient
        evaluations and the time planned for them (``refine="auto"``: as many as fit in
        :data:`~gpscale.methods.cost.REFINE_SECONDS`, kept to), and the solver."""
        sample = sample_size(rows.n) if self.subsample is None else \
            check_int("subsample", self.subsample, 2)
        refine, planned = self.refine, None
        if refine == "auto":
            refine, planned = refine_evaluations(rows.n, rows.d, rows.rbf), REFINE_SECONDS
        elif isinstance(refine, str):
            raise ValueError(f"refine must be 'auto' or an integer >= 0, got {refine!r}")
        refine = check_int("refine", refine, 0)
        check_int("probes", self.probes, 1)
        given = {k: v for k, v in (("precond_rank", self.precond_rank),
                                   ("block_dtype", self.block_dtype)) if v is not None}
        solver = ConjugateGradients(tol=check_positive("cg_tol", self.cg_tol), seed=self._seed,
                                    client=self.client, **given)
        return sample, refine, planned, solver

    def _iterative(self, rows: _Rows, kernel: Kernel, deadline: Deadline | None, t0: float
                   ) -> tuple[ExactGP, FitResult]:
        """The CG path: θ on a row sample (:meth:`_fit_sample`), refined on every row
        (:meth:`_refine`), the posterior solved by CG; the stages after the sample's fit
        planned within the time left (:func:`_plan_rest`)."""
        sample, refine, planned, solver = self._cg_options(rows)
        keep = sample_rows(rows.n, min(sample, rows.n), self._seed, rows.X.device)
        refine = refine if rows.n > len(keep) else 0  # a sample of every row: ML-II already
        small, result, user_floor, start = self._fit_sample(rows, keep, kernel, refine,
                                                            deadline)
        plan = _plan_rest(solver, small, rows.n, rows.d, rows.rbf, refine, planned, deadline)
        refine, planned = plan["refine"], plan["refine_allowance_s"]
        result.history.append({"phase": "plan", "seconds": time.perf_counter() - t0, **plan})
        progress_note(self.progress,
                      _plan_line(plan, len(keep), rows.n, time.perf_counter() - t0))
        model = small.with_solver(solver, rows.X, rows.y, copies=rows.copies,
                                  noise_floor=user_floor if refine else None)
        x0 = self._refine(model, result, rows, refine, planned, start) if refine else None
        info = model.solve(x0=x0, progress=self.progress, deadline=deadline)
        result.history.append({"phase": "all rows", **info})
        result.wall_s += info["seconds"]
        return model, result

    def _fit_sample(self, rows: _Rows, keep: torch.Tensor, kernel: Kernel, refine: int,
                    deadline: Deadline | None
                    ) -> tuple[ExactGP, FitResult, float, str]:
        """θ by the Cholesky fit on the sample ``keep``, stopping in time to leave the
        posterior's solve :data:`SOLVE_MARGIN` times its estimate. Where it ends with the
        noise near its floor, the start of the refinement (:func:`_smooth_start`) or θ
        (:func:`_held_out_choice`) comes from a fit on half the sample instead. Returns
        the model, the sample's FitResult, the user's noise floor on the sample and which
        sample θ came from."""
        given_kernel = copy.deepcopy(kernel)  # the sample's fit trains the kernel it is given
        early = None if deadline is None else \
            deadline.sooner(deadline.left() - SOLVE_MARGIN * solve_seconds(rows.n, rows.d))

        def sample_fit(idx: torch.Tensor, k: Kernel, floor: float, noise: float
                       ) -> tuple[ExactGP, FitResult]:
            fit = self._cholesky(rows.subset(idx), k, noise, floor, early)
            if fit[1].reason == "interrupted":  # Ctrl-C: stop before the work on every row
                raise KeyboardInterrupt
            return fit

        small, result = sample_fit(keep, kernel, self.noise_floor, self.noise)
        sampled, user_floor = small, ExactGP.noise.floor_of(small)
        if _near_floor(small) and rows.n > len(keep) and result.reason != OUT_OF_TIME:
            floor = max(self.noise_floor, ALTERNATIVE_FLOOR)
            start = max(self.noise, 10 * _noise_floor(floor, rows.y, rows.copies))
            refit = lambda idx: sample_fit(idx, given_kernel, floor, start)  # noqa: E731
            small = _smooth_start(small, result, keep, refit) if refine \
                else _held_out_choice(small, result, rows.X, rows.y, rows.copies, keep, refit,
                                      self._seed)
        return small, result, user_floor, "half sample" if small is not sampled else "sample"

    def _refine(self, model: ExactGP, result: FitResult, rows: _Rows, refine: int,
                planned: float | None, start: str) -> torch.Tensor:
        """At most ``refine`` stochastic gradient evaluations of the NLML on every row
        (:func:`~gpscale.train.exact_refine.refine_on_rows`) within ``planned`` seconds,
        recorded in ``result``; returns the weights they leave, CG's start."""
        with progress_bar(self.progress, total=refine, unit="eval",
                          desc=f"refining θ on {rows.n} rows") as bar:
            steps = refine_on_rows(model, refine, probes=self.probes, seed=self._seed,
                                   callback=lambda evaluation, info: bar.update(),
                                   time_limit=planned,  # a step may run past it by
                                   grace=refine_seconds(rows.n, rows.d, rows.rbf))
        if steps.reason.startswith(OUT_OF_TIME):
            warnings.warn(
                f"the refinement of θ on every row stopped at its planned "
                f"{planned:.3g} s after {steps.n_evals} of {refine} gradient "
                "evaluations (CG took more iterations than the cost model assumed, or "
                "the budget left no more time); θ is the last accepted step's",
                ConvergenceWarning, stacklevel=5)  # fit_exact's caller
        result.history.extend(steps.history)
        result.wall_s += steps.wall_s
        result.theta = steps.theta
        model.solver.refined = {"evaluations": steps.n_evals, "seconds": steps.wall_s,
                                "reason": steps.reason, "probes": self.probes,
                                "start": start}
        return model.solver.alpha


@dataclass(frozen=True)
class _Rows:
    """The rows an exact fit uses: repeated inputs merged (``copies``,
    :mod:`gpscale.models.copies`)."""

    X: torch.Tensor
    y: torch.Tensor
    copies: Copies | None
    #: the kernel's gradient is the tiled contraction (:func:`tiled_gradient`): the cost
    #: model's rate for the refinement
    rbf: bool

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    def subset(self, idx: torch.Tensor) -> _Rows:
        return _Rows(self.X[idx], self.y[idx],
                     None if self.copies is None else self.copies.subset(idx), self.rbf)


@register("exact", "exact GP, ML-II (or MAP-II with prior=) by L-BFGS: the reference; "
          "Cholesky up to a few thousand rows, beyond that θ from a row sample and the "
          "posterior on every row by preconditioned CG (solver=)", cluster=True,
          chooses_kernel=True, exact=True)
@takes_options(ExactFit)
def fit_exact(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, **options: Any
              ) -> tuple[ExactGP, FitResult]:
    """Exact GP by L-BFGS (:func:`gpscale.train.fit_lbfgs`); ``noise`` is the initial
    noise variance in the units of y given (standardised ones by default). Rows that
    repeat an input are merged first (:func:`gpscale.models.copies.merge_copies`: the
    same NLML and posterior, at the cost of the distinct inputs); the solver and the
    cost model count those.

    ``solver``: ``"cholesky"`` factorises C = K + σ²I at every step (O(n³)); ``"cg"``
    learns θ on a uniform sample of ``subsample`` rows (default: as many as the cost
    model fits in :data:`~gpscale.methods.cost.SUBSAMPLE_SECONDS`, 4000) by the Cholesky
    path, then computes the posterior on every row without an n × n matrix (the model's
    solver is then :class:`~gpscale.models.ConjugateGradients`: weights by preconditioned
    CG to relative residual ``cg_tol``, preconditioned by a randomly pivoted Cholesky
    factor of rank ``precond_rank`` (default: grown until its trace error is small against
    nσ²), kernel blocks in ``block_dtype`` (default: the model's), the variance cache in
    the same passes); with ``client`` (a dask cluster, from ``gpscale.fit(...,
    workers=N)`` or ``scheduler=``) each product's row blocks run on its workers.
    ``"auto"``: Cholesky unless the cost model (:func:`~gpscale.methods.cost.too_large`)
    finds the fit too long or too large, then CG.

    ``refine`` (with ``solver="cg"``): at most this many stochastic gradient evaluations
    of the NLML on every row (:func:`gpscale.train.exact_refine.refine_on_rows`, ``probes``
    probe vectors) between the sample's fit and the posterior; ``"auto"``: as many as
    :func:`~gpscale.methods.cost.refine_evaluations` fits in its time; 0: θ from the
    sample.

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
    in the available memory or the cost model
    (:func:`~gpscale.methods.cost.exact_cost`) puts it at over ten minutes.

    ``time_limit`` (seconds, or a :class:`~gpscale.deadline.Deadline`: ``gpscale.fit`` hands
    down its own, under ``method="auto"`` what is left of the budget): the
    fit ends within it. The hyperparameter search stops between iterations at the best
    θ so far; on the CG path the search on the sample and the refinement stop in time to
    leave the posterior's solve :data:`SOLVE_MARGIN` times its estimate (the
    preconditioner's rank estimated from the sample's fit,
    :meth:`~gpscale.models.ConjugateGradients.rank_for`), and CG ends at the deadline
    once its residual is within :data:`~gpscale.models.exact_cg.LOOSE_TOL`. Each cut
    is warned, saying what it cost.
    """
    return ExactFit(**options).fit(X, y, kernel)


def _skill_checked(model: ExactGP, result: FitResult) -> tuple[ExactGP, FitResult]:
    """The fit with its skill check in ``result.skill``
    (:func:`gpscale.models.skill.fit_skill`: leave-one-out R², lengthscales against the
    inputs' spread); a ConvergenceWarning when it finds no skill."""
    if result.reason != "interrupted":
        result.skill = fit_skill(model)
        if result.skill["problem"]:
            warnings.warn(result.skill["problem"], ConvergenceWarning,
                          stacklevel=5)  # the frame fit_exact's caller was called from
    return model, result


def _plan_rest(solver: ConjugateGradients, sample: ExactGP, n: int, d: int, rbf: bool,
               refine: int, planned: float | None, deadline: Deadline | None
               ) -> dict[str, Any]:
    """What is left of an iterative fit once θ is fitted on the sample: the posterior's
    solve, estimated with the preconditioner's rank that the sample's fit needs
    (:meth:`~gpscale.models.ConjugateGradients.rank_for`: the noise against the signal
    sets it), and the refinement's evaluations and allowance within the time left (all
    of them dropped, and warned, where not even one fits)."""
    rank = solver.rank_for(sample, n)
    solve_s = solve_seconds(n, d, rank)
    left = None if deadline is None else deadline.left()
    if refine and left is not None:
        room = left - SOLVE_MARGIN * solve_s
        planned = room if planned is None else min(planned, room)
        if planned < refine_seconds(n, d, rbf):
            warnings.warn(
                f"the budget leaves no time to refine θ on all {n} rows (about "
                f"{left:.0f} s left, the posterior's solve estimated at {solve_s:.0f} s); "
                f"θ is the sample's. {MORE_TIME}", ConvergenceWarning,
                stacklevel=5)  # fit_exact's caller
            refine, planned = 0, None
    each = refine_seconds(n, d, rbf) if refine else 0.0
    refine_s = min(refine * each, planned) if planned is not None else refine * each
    return {"precond_rank_estimate": rank, "solve_estimate_s": solve_s, "refine": refine,
            "refine_allowance_s": planned, "rest_estimate_s": solve_s + refine_s,
            "time_left_s": left}


def _plan_line(plan: dict[str, Any], rows: int, n: int, spent: float) -> str:
    """The stage line a long fit shows once θ is fitted on its sample."""
    refine = (f"refine θ on all {n} rows ({plan['refine']} gradient evaluations at most), "
              if plan["refine"] else "")
    return (f"θ fitted on {rows} rows ({spent:.0f} s so far); next: {refine}the posterior "
            f"by CG (preconditioner of rank about {plan['precond_rank_estimate']}): about "
            f"{plan['rest_estimate_s'] / 60:.1f} min left")


def _held_out_choice(small: ExactGP, result: FitResult, X: torch.Tensor, y: torch.Tensor,
                     copies: Copies | None, keep: torch.Tensor, refit, seed: int) -> ExactGP:
    """θ for the iterative path when the sample's ML-II fit ended with the noise at or
    near its floor (:func:`_near_floor`), an interpolating optimum that can predict
    badly (benchmarks/results/design-measurements.md). Fit again on
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
        "pass subsample= / noise_floor=", ConvergenceWarning,
        stacklevel=6)  # fit_exact's caller
    return kept


def _smooth_start(small: ExactGP, result: FitResult, keep: torch.Tensor, refit) -> ExactGP:
    """The start of ``refine`` when the sample's ML-II fit ended with the noise at or
    near its floor (:func:`_near_floor`): a fit on half the sample with the noise kept
    above :data:`ALTERNATIVE_FLOOR` x var(y), the fit :func:`_held_out_choice` compares.
    The refinement on every row then runs with the user's floor, so data that are
    noise-free take the noise back down; an interpolating optimum of the sample is a
    basin the refinement does not leave (benchmarks/results/design-measurements.md)."""
    alt, _ = refit(keep[: keep.numel() // 2])
    result.history.append({"phase": "smooth start", "sample_noise": float(small.noise.detach()),
                           "start_noise": float(alt.noise.detach())})
    warnings.warn(
        f"the exact GP's hyperparameter fit on a sample of {keep.numel()} rows ended with "
        "the noise at or near its floor (an interpolating optimum?); the refinement on "
        f"every row starts instead from a fit on half the sample with the noise above "
        f"{ALTERNATIVE_FLOOR:g} x var(y)", ConvergenceWarning,
        stacklevel=6)  # fit_exact's caller
    return alt


def _near_floor(model: ExactGP) -> bool:
    """The noise ended within :data:`NEAR_FLOOR` times its floor: L-BFGS's last steps on
    the softplus scale stop short of the floor itself (design-measurements.md)."""
    floor = ExactGP.noise.floor_of(model)
    noise = float(model.noise.detach())
    return bool(model.raw_noise.requires_grad) and noise < NEAR_FLOOR * floor


def _nlpd(model: ExactGP, X: torch.Tensor, y: torch.Tensor,
          counts: torch.Tensor | None = None) -> float:
    """Mean NLPD of y at X (:func:`gpscale.metrics.nlpd`; the noise σ²/c where y is the
    mean of ``counts`` copies)."""
    pred = model.predict(X)
    noise = model.noise.detach()
    var = pred.var + (noise if counts is None else noise / counts)
    return nlpd(y.to(var).cpu().numpy(), pred.mean.cpu().numpy(), var.cpu().numpy())


def _noise_floor(relative: float, y: torch.Tensor, copies: Copies | None = None) -> float:
    """``relative`` · var(y) (y's rows, with copies those merged), or the model's own
    floor when y has no variance."""
    var = rows_variance(torch.as_tensor(y).detach().reshape(-1), copies)
    return relative * var if var > 0 and math.isfinite(var) else ExactGP.noise.floor
