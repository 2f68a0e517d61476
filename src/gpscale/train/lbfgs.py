"""ML-II by L-BFGS with a strong-Wolfe line search, in unconstrained parameter space."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..deadline import Deadline
from ..linalg import CholeskyError
from ..params import positive_params
from ..progress import MORE_TIME, progress_bar
from ..rng import as_generator
from .result import FitResult, restore, snapshot, theta_of
from .warning_types import ConvergenceWarning

#: the ways a run can end that mean "the budget ran out", not "it converged"
OUT_OF_BUDGET = ("max_iter", "max_evals")
#: the reason of a run that reached its deadline
OUT_OF_TIME = "time allowance"


def warn_if_out_of_time(result: FitResult, search: str,
                        kept: str = "θ is the best found so far") -> FitResult:
    """``result``, with a :class:`ConvergenceWarning` saying what was cut where its
    search stopped at the fit's deadline (``search``: which search, ``kept``: what the
    model holds)."""
    if result.reason == OUT_OF_TIME:
        warnings.warn(f"{search} stopped at the fit's time allowance after "
                      f"{result.n_evals} evaluations, before its stopping rule held; "
                      f"{kept}. {MORE_TIME}", ConvergenceWarning,
                      stacklevel=3)
    return result


def fit_lbfgs(
    model: nn.Module,
    objective: Callable[[], torch.Tensor] | None = None,
    max_iter: int = 200,
    restarts: int = 0,
    seed: int | torch.Generator | None = None,
    tol_grad: float = 1e-5,
    tol_change: float = 1e-9,
    history_size: int = 20,
    progress: bool = False,
    method: str = "exact",
    ftol: float | None = None,
    max_ls: int | None = None,
    *,
    tol: float | None = None,
    patience: int = 3,
    n_points: int | None = None,
    starts: Sequence[Callable[[nn.Module], None]] = (),
    restart_iter: int | None = None,
    warn: bool = True,
    deadline: Deadline | None = None,
) -> FitResult:
    """Minimise ``objective()`` (default ``model.nlml()``) over the trainable parameters.

    **Starts.** The first run starts from the model's current values. Each callable in
    ``starts`` gives one more run: it is called on the model (reset to the initial
    values) and may set any parameter. ``restarts`` more runs start from the initial
    values with every positive hyperparameter multiplied by exp(N(0, 1)) (seeded by
    ``seed``). Without ``restart_iter`` every run goes to the end and the lowest
    objective wins. With ``restart_iter`` (cheap restarts) every run does that many
    iterations, and only the one with the lowest objective continues, with its L-BFGS
    memory, to ``max_iter`` iterations in all.

    **Stopping.** ``tol`` (the rule for objectives that are sums over data points):
    stop (``reason="converged"``) once the best objective has moved by less than
    ``tol`` per point in each of ``patience`` consecutive iterations, i.e. by less than
    ``tol · n_points`` (``n_points`` defaults to ``model.n`` when the model has one,
    else 1). ``tol_grad`` and ``tol_change`` are torch's (absolute) tests. ``ftol`` adds
    scipy's relative one: stop once an iteration lowers the best objective by less than
    ftol·max(|f|, 1). For piecewise-smooth objectives (GRIEF's top-p selection jumps as
    the lengthscales move) this ends the search at the step where the line searches keep
    bracketing a jump with a gradient that never vanishes, instead of spending the
    evaluation budget there. ``max_ls`` (scipy's ``maxls``): stop
    (``reason="line_search"``) when one iteration needs more than this many
    evaluations; torch's own cap is 25 per bracketing and 25 per zoom phase.
    ``deadline`` (:class:`~gpscale.deadline.Deadline`): no iteration starts once
    it has passed (``reason`` :data:`OUT_OF_TIME`; the caller says so, not this
    function); a run still to start gets its first iteration.

    A run that ends on its budget (``max_iter`` iterations or ``2·max_iter + 10``
    evaluations) has ``converged=False`` and, with ``warn``, emits a
    :class:`ConvergenceWarning`. Evaluations where the covariance cannot be factorised
    count as a very large objective, so the line search backs off. Ctrl-C stops the
    search and keeps the best parameters seen so far.
    """
    _check_stopping(ftol, tol, max_ls, restart_iter, patience)
    objective = objective if objective is not None else model.nlml
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    stop_below = None if tol is None else tol * _points(model, n_points)
    gen = as_generator(seed)
    start = snapshot(params)
    t0 = time.perf_counter()
    inits: list[Callable[[nn.Module], None] | None] = [None, *starts]
    inits += [lambda m: _perturb(m, gen)] * restarts
    cheap = restart_iter is not None and len(inits) > 1 and restart_iter < max_iter

    def new_run(k: int) -> _Run:
        return _Run(model, objective, params, max_iter, tol_grad, tol_change, history_size,
                    progress, t0, ftol, max_ls, stop_below, patience, index=k,
                    deadline=deadline)

    runs = _start_runs(model, params, start, inits, new_run,
                       restart_iter if cheap else max_iter)
    finite = _finite_runs(runs, params, start)
    best = min(finite, key=lambda r: r.best_f)
    interrupted = runs[-1].reason == "interrupted"
    if cheap and best.reason in OUT_OF_BUDGET and not interrupted:
        restore(params, best.end)
        best.advance(max_iter)
    restore(params, best.best_params)
    # Ctrl-C in any run ends the fit as interrupted, even when an earlier run is the best
    reason = "interrupted" if interrupted else best.reason
    if warn and reason in OUT_OF_BUDGET:
        warnings.warn(
            f"L-BFGS stopped on its budget ({best.reason}: {best.iterations} iterations, "
            f"{best.n_evals} evaluations) before its stopping rule held; raise max_iter, "
            "or loosen tol", ConvergenceWarning, stacklevel=2)
    return FitResult(
        method=method,
        theta=theta_of(model),
        objective=best.best_f,
        history=best.history,
        converged=reason == "converged",
        reason=reason,
        wall_s=time.perf_counter() - t0,
        n_evals=sum(r.n_evals for r in runs),
    )


def _check_stopping(ftol: float | None, tol: float | None, max_ls: int | None,
                    restart_iter: int | None, patience: int) -> None:
    """ValueError naming the first stopping option of :func:`fit_lbfgs` that is bad."""
    if ftol is not None and not ftol >= 0:
        raise ValueError(f"ftol must be a non-negative number or None, got {ftol!r}")
    if tol is not None and not tol >= 0:
        raise ValueError(f"tol must be a non-negative number or None, got {tol!r}")
    for name, v in (("max_ls", max_ls), ("restart_iter", restart_iter)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} must be a positive int or None, got {v!r}")
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        raise ValueError(f"patience must be a positive int, got {patience!r}")


def _points(model: nn.Module, n_points: int | None) -> int:
    """The points ``tol`` is per: ``n_points``, else the model's rows of data (an exact
    GP's merged copies count each), else 1."""
    if n_points is None:
        n = getattr(model, "observations", getattr(model, "n", None))
        n_points = n if isinstance(n, int) and n > 0 else 1
    return n_points


def _start_runs(model: nn.Module, params: list[torch.Tensor], start: list[torch.Tensor],
                inits: list[Callable[[nn.Module], None] | None],
                new_run: Callable[[int], _Run], iterations: int) -> list[_Run]:
    """One run per start, each from the initial values ``start`` (then ``init``),
    advanced ``iterations`` iterations; Ctrl-C ends the list at the run it stopped."""
    runs: list[_Run] = []
    for k, init in enumerate(inits):
        restore(params, start)
        if init is not None:
            init(model)
        run = new_run(k)
        run.advance(iterations)
        runs.append(run)
        if run.reason == "interrupted":
            break
    return runs


def _finite_runs(runs: list[_Run], params: list[torch.Tensor],
                 start: list[torch.Tensor]) -> list[_Run]:
    """The runs whose best objective is finite; KeyboardInterrupt (parameters back at
    ``start``) when Ctrl-C came before any evaluation finished, NoFiniteObjective (a
    RuntimeError) when no evaluation was finite."""
    finite = [r for r in runs if math.isfinite(r.best_f)]
    if not finite and runs and runs[-1].reason == "interrupted":
        restore(params, start)
        raise KeyboardInterrupt  # stopped before any evaluation finished: nothing to keep
    if not finite:
        raise NoFiniteObjective(
            "L-BFGS found no evaluation with a finite objective; check the data "
            "(standardise X and y) and the initial hyperparameters"
        )
    return finite


def guarded(objective: Callable[[], torch.Tensor], best_f: float,
            dtype: torch.dtype) -> torch.Tensor:
    """``objective()``, or, when it is not finite or the covariance cannot be factorised,
    a constant far above ``best_f`` (no gradient), so that a line search backs off."""
    try:
        f = objective()
        if bool(torch.isfinite(f)):
            return f
    except CholeskyError:
        pass
    bad = abs(best_f) * 10 + 1e10 if math.isfinite(best_f) else 1e30
    return torch.tensor(bad, dtype=dtype)


def _perturb(model: nn.Module, gen: torch.Generator) -> None:
    for _, sub, desc in positive_params(model):
        raw = getattr(sub, desc.raw_name)
        if not raw.requires_grad:
            continue
        value = getattr(sub, desc.name).detach()
        factor = torch.exp(torch.randn(value.shape, generator=gen, dtype=value.dtype))
        setattr(sub, desc.name, (value * factor.to(value.device)).clamp_min(2 * desc.floor_of(sub)))


class NoFiniteObjective(RuntimeError):
    """No evaluation of a search had a finite objective: its start was unusable."""


class _Stop(Exception):
    """A stopping rule (``tol``, ``ftol``) or the line-search cap ``max_ls`` ended the
    search."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _LBFGS(torch.optim.LBFGS):
    """torch's L-BFGS without the one-time import of ``torch._dynamo`` (seconds) that
    ``Optimizer.add_param_group`` and ``zero_grad`` trigger through their
    ``torch._disable_dynamo`` wrappers; nothing here is compiled, so the undecorated
    functions (``__wrapped__``) are the same code."""

    def add_param_group(self, param_group):  # noqa: D102
        plain = torch.optim.Optimizer.add_param_group
        return getattr(plain, "__wrapped__", plain)(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:  # noqa: D102
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None


class _Run:
    """One L-BFGS run; :meth:`advance` can be called again to continue it (cheap
    restarts), keeping torch's L-BFGS memory."""

    def __init__(self, model, objective, params, max_iter, tol_grad, tol_change,
                 history_size, progress, t0, ftol, max_ls, stop_below, patience, index=0,
                 deadline=None):
        self.objective, self.params, self.t0, self.deadline = objective, params, t0, deadline
        self.ftol, self.max_ls, self.stop_below, self.patience = (ftol, max_ls, stop_below,
                                                                  patience)
        self.index, self.progress = index, progress
        self.opt = _LBFGS(
            params, lr=1.0, max_iter=max_iter, max_eval=max_iter * 2 + 10,
            tolerance_grad=tol_grad, tolerance_change=tol_change,
            history_size=history_size, line_search_fn="strong_wolfe")
        self.best_f, self.best_params = math.inf, snapshot(params)
        self.end = self.best_params
        self.n_evals, self.iter, self.iter_evals, self.stalled = 0, 0, 0, 0
        self.best_at_iter_start = math.inf
        self.per_iter: dict[int, dict] = {}
        self.reason = ""
        self.bar = None

    @property
    def iterations(self) -> int:
        return self.opt.state[self.opt._params[0]].get("n_iter", 0) if self.opt.state else 0

    @property
    def history(self) -> list[dict]:
        return [self.per_iter[k] for k in sorted(self.per_iter)]

    def _new_iteration(self, it: int) -> None:
        if self.deadline is not None and self.deadline.passed():
            raise _Stop(OUT_OF_TIME)
        before, now = self.best_at_iter_start, self.best_f
        if math.isfinite(before):
            drop = before - now
            if self.ftol is not None and drop < self.ftol * max(abs(now), 1.0):
                raise _Stop("converged")
            if self.stop_below is not None:
                self.stalled = self.stalled + 1 if drop < self.stop_below else 0
                if self.stalled >= self.patience:
                    raise _Stop("converged")
        self.iter, self.best_at_iter_start, self.iter_evals = it, now, 0

    def closure(self):
        it = self.iterations
        if it != self.iter:  # the first evaluation of a new iteration
            self._new_iteration(it)
        self.iter_evals += 1
        if self.max_ls is not None and it > 0 and self.iter_evals > self.max_ls:
            raise _Stop("line_search")
        self.opt.zero_grad()
        self.n_evals += 1
        f = guarded(self.objective, self.best_f, self.params[0].dtype)
        if not f.requires_grad:  # failed evaluation: a large value backs the search off
            return f
        f.backward()
        fv = float(f.detach())
        if fv < self.best_f:
            self.best_f, self.best_params = fv, snapshot(self.params)
        grad_norm = math.sqrt(sum(float((p.grad**2).sum()) for p in self.params
                                  if p.grad is not None))
        self.per_iter[it] = {"iter": it, "objective": fv, "grad_norm": grad_norm,
                             "time_s": time.perf_counter() - self.t0, "run": self.index}
        if self.bar is not None and self.bar.n < it:
            self.bar.update(it - self.bar.n)
            self.bar.set_postfix(objective=f"{fv:.5g}")
        return f

    def advance(self, total_iter: int) -> None:
        """Run until ``total_iter`` iterations in all (or a stopping rule)."""
        todo = total_iter - self.iterations
        if todo <= 0:
            return
        group = self.opt.param_groups[0]
        group["max_iter"], group["max_eval"] = todo, todo * 2 + 10
        evals_before = self.n_evals
        self.bar = progress_bar(self.progress, total=total_iter, initial=self.iterations,
                                desc="L-BFGS", leave=False)
        reason = "converged"
        try:
            self.opt.step(self.closure)
            if self.iterations >= total_iter:
                reason = "max_iter"
            elif self.n_evals - evals_before >= group["max_eval"]:
                reason = "max_evals"  # the line searches spent the budget
        except _Stop as stop:
            reason = stop.reason
        except KeyboardInterrupt:
            reason = "interrupted"
        finally:
            self.bar.close()
            self.bar = None
        self.reason = reason
        self.end = snapshot(self.params)
