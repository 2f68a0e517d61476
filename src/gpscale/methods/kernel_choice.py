"""The kernel chosen from the data: when a user names no kernel (``kernel="auto"``), the
stationary ARD families of :data:`CANDIDATES` are each fitted by the exact GP on a
uniform sample of rows and scored by how well they predict rows they were not fitted on;
the best family is then fitted by the method on every row.

The score is the mean negative log predictive density (NLPD) of y:

- on up to :data:`HELD_OUT_ROWS` rows outside the sample, each candidate's posterior
  conditioned on the sample, when there are rows outside it;
- otherwise (the sample is every row) the leave-one-out NLPD from the Cholesky factor
  (Rasmussen & Williams 2006, eq. 5.12: μ₋ᵢ = yᵢ − [C⁻¹r]ᵢ / [C⁻¹]ᵢᵢ,
  σ²₋ᵢ = 1 / [C⁻¹]ᵢᵢ, r = y − m).

The family with the lowest score is chosen where it beats :data:`PRIOR_FAMILY`
(Matérn-5/2) by more than :data:`SE_MARGIN` standard errors of the paired per-row
differences; within that noise Matérn-5/2 is kept. Why these rules and not the sample's
evidence or the lowest score alone: benchmarks/results/kernel-choice/ compares them
against each family's test accuracy on every real set.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from ..deadline import Deadline
from ..kernels import GapVariance, Kernel, make_kernel, with_gaps
from ..linalg import robust_cholesky
from ..metrics import nlpd_terms
from ..models import ExactGP
from ..models.skill import loo_residuals
from ..train import FitResult
from ..train.starts import sample_rows
from .cost import exact_seconds
from .exact import ExactFit, fit_exact
from .registry import Method

__all__ = ["AUTO_KERNEL", "DEFAULT_KERNEL", "CANDIDATES", "KernelChoice", "choose_kernel",
           "kernel_for", "loo_predictions"]

#: the kernel name that asks for the family to be chosen from the data
AUTO_KERNEL = "auto"
#: what ``kernel="auto"`` fits with a method that does not choose
#: (:attr:`~gpscale.methods.Method.chooses_kernel`)
DEFAULT_KERNEL = "rbf-ard"

#: the families a kernel is chosen from (each with a lengthscale per input column)
CANDIDATES = ("rbf-ard", "matern12-ard", "matern32-ard", "matern52-ard", "rq-ard")
#: the family kept unless another scores lower by more than SE_MARGIN standard errors
#: of the paired per-row differences (benchmarks/results/kernel-choice/)
PRIOR_FAMILY, SE_MARGIN = "matern52-ard", 2.0
#: rows each candidate is fitted on
SAMPLE_ROWS = 1000
#: rows outside the sample each candidate is scored on
HELD_OUT_ROWS = 2000
#: L-BFGS iterations of each candidate's fit for a method other than the exact GP (whose
#: candidates take its own options)
CANDIDATE_ITER = 100
#: with a time budget, the candidates' fits take at most this share of it (by the exact
#: GP's cost model), which sizes their sample below SAMPLE_ROWS; with a deadline, the
#: choice stops at twice that share of the time left
BUDGET_SHARE = 0.1


@dataclass(frozen=True)
class KernelChoice:
    """Which kernel family was chosen from the data, on what, and every candidate's score
    (lower is better)."""

    kernel: str
    criterion: str
    rows: int
    scored_rows: int
    scores: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    #: why the lowest score did not win, where it did not
    note: str = ""

    def __str__(self) -> str:
        ranked = sorted(self.scores.items(), key=lambda kv: kv[1])
        listed = ", ".join(f"{k} {v:.4g}" for k, v in ranked)
        how = self.note or f"the lowest {self.criterion}"
        return (f"{self.kernel}, {how} ({self.criterion} of {len(self.scores)} kernel "
                f"families fitted on {self.rows} rows: {listed}; {self.seconds:.0f} s)")


def loo_predictions(model: ExactGP) -> tuple[torch.Tensor, torch.Tensor]:
    """Leave-one-out predictive means and variances of y at the model's rows from one
    Cholesky factor (:func:`gpscale.models.skill.loo_residuals`, R&W eq. 5.12); rows
    merged from copies leave out all their copies."""
    with torch.no_grad():
        L = robust_cholesky(model.covariance())
        alpha = torch.cholesky_solve((model.y - model.mean_constant)[:, None], L)[:, 0]
        residual, var = loo_residuals(L, alpha)
        return model.y - residual, var


@dataclass
class Candidate:
    """One family's fit on the sample: the model, its FitResult, the warnings it raised."""

    model: ExactGP
    result: FitResult
    warned: list[warnings.WarningMessage]


def choose_kernel(X: torch.Tensor, y: torch.Tensor, *, candidates: tuple[str, ...] = CANDIDATES,
                  rows: int = SAMPLE_ROWS, held_out: int = HELD_OUT_ROWS, seed: int = 0,
                  deadline: Deadline | None = None, gaps: tuple[int, ...] = (),
                  **fit_options: Any) -> tuple[KernelChoice, dict[str, Candidate]]:
    """Fit every candidate family by :func:`~gpscale.methods.exact.fit_exact` (Cholesky)
    on ``rows`` uniformly sampled rows of (X, y) (standardised; every row, in their
    order, when there are no more) and score each (module docstring). Returns the
    choice and the candidates' fits. A candidate whose fit fails scores +inf; one that
    was interrupted (Ctrl-C) ends the choice with that candidate as the kernel;
    ``fit_options`` go to each fit (``seed`` seeds the sample and, unless they name
    their own, the fits). ``deadline``: each candidate's fit gets an equal share of
    the time left before it (its search stops there); candidates not begun by then are
    not fitted, and the choice's note says so. ``gaps``: X's columns marking a table's
    missing numbers, each candidate fitted with their
    :class:`~gpscale.kernels.GapVariance` added."""
    t0 = time.perf_counter()
    n, d = int(X.shape[0]), int(X.shape[1])
    every = rows >= n
    keep = torch.arange(n, device=X.device) if every else sample_rows(n, rows, seed, X.device)
    outside = torch.ones(n, dtype=torch.bool, device=X.device)
    outside[keep] = False
    held = outside.nonzero().reshape(-1)
    gen = torch.Generator().manual_seed(int(seed))
    held = held[torch.randperm(held.numel(), generator=gen)[:held_out].to(held.device)]
    criterion = "leave-one-out NLPD" if every else "held-out NLPD"
    options = {"seed": seed, **fit_options, "solver": "cholesky"}
    Xs, ys = (X, y) if every else (X[keep], y[keep])
    terms: dict[str, np.ndarray] = {}
    fits: dict[str, Candidate] = {}
    skipped: list[str] = []
    for i, name in enumerate(candidates):
        if deadline is not None:
            if deadline.passed() and terms:
                skipped.append(name)
                continue
            options["time_limit"] = deadline.sooner(deadline.left() / (len(candidates) - i))
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                model, result = fit_exact(Xs, ys, with_gaps(make_kernel(name, d), gaps),
                                          **options)
            except (RuntimeError, ValueError):  # a Cholesky that failed: not this family
                terms[name] = np.full(1, np.inf)
                continue
        fits[name] = Candidate(model, result, list(warned))
        if result.reason == "interrupted":  # Ctrl-C: the choice stops with this fit
            scores = {k: float(np.mean(v)) for k, v in terms.items()}
            return KernelChoice(name, criterion, int(keep.numel()), 0, scores,
                                time.perf_counter() - t0,
                                f"interrupted while fitting {name}"), fits
        terms[name] = _loo_terms(model) if every else _terms(model, X[held], y[held])
    scores = {k: float(np.mean(v)) for k, v in terms.items()}
    best, note = _pick(terms, scores)
    if skipped:
        note = "; ".join(filter(None, [note, f"not fitted within the time allowance: "
                                       f"{', '.join(skipped)}"]))
    choice = KernelChoice(best, criterion, int(keep.numel()),
                          int(keep.numel()) if every else int(held.numel()), scores,
                          time.perf_counter() - t0, note)
    return choice, fits


def _pick(terms: dict[str, np.ndarray], scores: dict[str, float]) -> tuple[str, str]:
    """The lowest score, unless it beats :data:`PRIOR_FAMILY`'s by no more than
    :data:`SE_MARGIN` standard errors of the per-row differences: then the prior family,
    and a note saying so."""
    best = min(scores, key=lambda k: scores[k])
    prior = terms.get(PRIOR_FAMILY)
    if best == PRIOR_FAMILY or prior is None or not np.isfinite(scores[PRIOR_FAMILY]):
        return best, ""
    diff = prior - terms[best]
    se = float(np.std(diff, ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else np.inf
    if float(np.mean(diff)) > SE_MARGIN * se:
        return best, ""
    return PRIOR_FAMILY, (f"the default family, kept: {best} scores lower by "
                          f"{float(np.mean(diff)):.2g}, less than {SE_MARGIN:g} standard "
                          f"errors of the difference (one is {se:.2g})")


def _terms(model: ExactGP, X: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    pred = model.predict(X, include_noise=True)
    return nlpd_terms(y.cpu().numpy(), pred.mean.cpu().numpy(), pred.var.cpu().numpy())


def _loo_terms(model: ExactGP) -> np.ndarray:
    mean, var = loo_predictions(model)  # var holds the row's noise (σ²/c for c copies)
    return nlpd_terms(model.y.cpu().numpy(), mean.cpu().numpy(), var.cpu().numpy())


def _iterative(method: Method, options: dict[str, Any], X: torch.Tensor) -> bool:
    """Whether the exact method's fit will take its iterative path (CG) on these rows,
    whatever family is chosen (the solver switch of the slower, non-RBF contraction):
    the fit's own decision (:meth:`~gpscale.methods.exact.ExactFit.solver_on`)."""
    return method.exact and _solver_of(options).solver_on(X) == "cg"


def _solver_of(options: dict[str, Any]) -> ExactFit:
    """The exact fit with the options that decide its solver."""
    return ExactFit(**{k: options[k] for k in ("solver", "dtype") if k in options})


def sample_size(budget: float | None, candidates: int = len(CANDIDATES)) -> int:
    """Rows of the candidates' sample: :data:`SAMPLE_ROWS`, fewer (in hundreds, at least
    100) where their fits by the exact GP's cost model would take more than
    :data:`BUDGET_SHARE` of ``budget`` seconds."""
    rows = SAMPLE_ROWS
    while budget is not None and rows > 100 and \
            candidates * exact_seconds(rows) > BUDGET_SHARE * budget:
        rows -= 100
    return rows


#: the exact method's options that only its CG solver reads: a candidate fit on a sample
#: is always by Cholesky
_CG_OPTIONS = ("solver", *ExactFit.CG_OPTIONS)


@dataclass(frozen=True)
class KernelPick:
    """What ``kernel="auto"`` fits with: the kernel, its name, the choice (None when the
    method does not choose) and, where the chosen candidate's fit is the method's own
    (the exact GP by Cholesky on every row, with the method's options), that fit."""

    kernel: Kernel
    name: str
    choice: KernelChoice | None = None
    fitted: tuple[ExactGP, FitResult] | None = None


def kernel_for(method: Method, X: torch.Tensor, y: torch.Tensor, options: dict[str, Any], *,
               budget: float | None = None, deadline: Deadline | None = None,
               gaps: tuple[int, ...] = ()) -> KernelPick:
    """The kernel a fit with ``kernel="auto"`` uses: chosen from the (standardised) rows
    by :func:`choose_kernel` when ``method`` chooses, else :data:`DEFAULT_KERNEL`. The
    candidates take the method's options where it is the exact GP (its CG options aside),
    else its ``max_iter`` at most; when they are fitted on every row by the exact
    method's own Cholesky fit, the chosen one is the fit (its warnings raised again).
    ``deadline``: the fit's; the choice stops at :data:`BUDGET_SHARE` x 2 of the time
    left, or at the deadline itself where its candidates are the fit. ``gaps``: X's
    columns marking a table's missing numbers; where :func:`modelled_gaps` keeps them,
    every candidate and the kernel returned have their
    :class:`~gpscale.kernels.GapVariance`."""
    d = int(X.shape[1])
    gaps = modelled_gaps(method, options, X, gaps)
    if not method.chooses_kernel:
        return KernelPick(make_kernel(DEFAULT_KERNEL, d), DEFAULT_KERNEL)
    rows = sample_size(budget)
    seed = options.get("seed")
    candidates = CANDIDATES
    if _iterative(method, options, X):  # pathwise variances need a spectral density
        candidates = tuple(c for c in CANDIDATES
                           if make_kernel(c, d).spectral_density() is not None)
    if method.exact:  # the candidates are fits of this very method
        fit_options = {k: v for k, v in options.items()
                       if k not in _CG_OPTIONS + ("seed", "time_limit")}
        # a fit's seed moves only its restarts: without one, no fit repeats another
        own = rows >= X.shape[0] and (seed is not None or not options.get("restarts"))
    else:
        fit_options = {"max_iter": min(int(options.get("max_iter", CANDIDATE_ITER)),
                                       CANDIDATE_ITER)}
        own = False
    within = None
    if deadline is not None:
        within = deadline if own else deadline.sooner(2 * BUDGET_SHARE * deadline.left())
    choice, fits = choose_kernel(X, y, rows=rows, seed=0 if seed is None else seed,
                                 deadline=within, candidates=candidates, gaps=gaps,
                                 **fit_options)
    if candidates != CANDIDATES:
        left = ", ".join(c for c in CANDIDATES if c not in candidates)
        choice = replace(choice, note="; ".join(filter(None, [
            choice.note, f"{left} not a candidate: on the exact GP's iterative path its "
            "variances would come from the Lanczos cache, too wide where the noise is "
            "small (benchmarks/results/design-measurements.md)"])))
    picked = fits.get(choice.kernel)
    if own:  # the method's own fit is by Cholesky only where its solver is
        own = _solver_of(options).solver_on(
            X, with_gaps(make_kernel(choice.kernel, d), gaps)) == "cholesky"
    stopped = picked is not None and picked.result.reason == "interrupted"
    if picked is not None and (own or stopped):  # the method's own fit, or Ctrl-C's
        for w in picked.warned:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return KernelPick(picked.model.kernel, choice.kernel, choice,
                          (picked.model, picked.result))
    return KernelPick(with_gaps(make_kernel(choice.kernel, d), gaps), choice.kernel, choice)


def modelled_gaps(method: Method, options: dict[str, Any], X: torch.Tensor,
                  gaps: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """The gap columns a fit models with :class:`~gpscale.kernels.GapVariance`: all of
    ``gaps`` for the exact GP by Cholesky, none elsewhere (the iterative path and the
    other methods read a kernel through its spectral density or tiled form, which a
    white term has not; they keep the indicator columns alone)."""
    if not gaps or not method.exact:
        return ()
    # asked with the gap term alone: its rows kept apart, no tiled contraction
    if _solver_of(options).solver_on(X, GapVariance(list(gaps))) == "cg":
        return ()
    return tuple(int(c) for c in gaps)
