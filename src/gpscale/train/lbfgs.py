"""ML-II by L-BFGS with a strong-Wolfe line search, in unconstrained parameter space."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
from torch import nn
from tqdm.auto import tqdm

from ..linalg import CholeskyError
from ..params import positive_params
from ..rng import as_generator
from .result import FitResult, restore, snapshot, theta_of


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
) -> FitResult:
    """Minimise ``objective()`` (default ``model.nlml()``) over the trainable parameters.

    ``restarts`` extra runs start from the initial values with every positive
    hyperparameter multiplied by exp(N(0, 1)) (seeded by ``seed``); the run with the
    lowest objective wins. Evaluations where the covariance cannot be factorised
    count as a very large objective, so the line search backs off. Ctrl-C stops the
    search and keeps the best parameters seen so far.

    ``tol_grad`` and ``tol_change`` are torch's (absolute) tests. ``ftol`` adds
    scipy's relative one: stop (``reason="converged"``) once an iteration lowers the
    best objective by less than ftol·max(|f|, 1). For piecewise-smooth objectives
    (GRIEF's top-p selection jumps as the lengthscales move) this ends the search at
    the step where the line searches keep bracketing a jump with a gradient that
    never vanishes, instead of spending the evaluation budget there. ``max_ls``
    (scipy's ``maxls``): stop (``reason="line_search"``) when one iteration needs
    more than this many evaluations; torch's own cap is 25 per bracketing and 25 per
    zoom phase. Either way the best parameters seen are kept.
    """
    if ftol is not None and not ftol >= 0:
        raise ValueError(f"ftol must be a non-negative number or None, got {ftol!r}")
    if max_ls is not None and (isinstance(max_ls, bool) or not isinstance(max_ls, int)
                               or max_ls < 1):
        raise ValueError(f"max_ls must be a positive int or None, got {max_ls!r}")
    objective = objective if objective is not None else model.nlml
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    gen = as_generator(seed)
    start = snapshot(params)
    t0 = time.perf_counter()
    best_f, best_params, best_run = math.inf, start, None
    total_evals = 0
    for run in range(restarts + 1):
        restore(params, start)
        if run > 0:
            _perturb(model, gen)
        out = _one_run(model, objective, params, max_iter, tol_grad, tol_change,
                       history_size, progress, t0, ftol, max_ls)
        total_evals += out["n_evals"]
        if out["best_f"] < best_f or best_run is None:
            best_f, best_params, best_run = out["best_f"], out["best_params"], out
        if out["reason"] == "interrupted":
            break
    if best_run is not None and best_run["reason"] == "interrupted" and not math.isfinite(
            best_f):
        restore(params, start)
        raise KeyboardInterrupt  # stopped before any evaluation finished: nothing to keep
    if best_run is None or not math.isfinite(best_f):
        raise RuntimeError(
            "L-BFGS found no evaluation with a finite objective; check the data "
            "(standardise X and y) and the initial hyperparameters"
        )
    restore(params, best_params)
    return FitResult(
        method=method,
        theta=theta_of(model),
        objective=best_f,
        history=best_run["history"],
        converged=best_run["reason"] == "converged",
        reason=best_run["reason"],
        wall_s=time.perf_counter() - t0,
        n_evals=total_evals,
    )


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
        setattr(sub, desc.name, (value * factor.to(value.device)).clamp_min(2 * desc.floor))


class _Stop(Exception):
    """The relative ``ftol`` or the line-search cap ``max_ls`` ended the search."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _one_run(model, objective, params, max_iter, tol_grad, tol_change, history_size,
             progress, t0, ftol=None, max_ls=None):
    max_eval = max_iter * 2 + 10
    opt = torch.optim.LBFGS(
        params, lr=1.0, max_iter=max_iter, max_eval=max_eval,
        tolerance_grad=tol_grad, tolerance_change=tol_change,
        history_size=history_size, line_search_fn="strong_wolfe",
    )
    state = {"best_f": math.inf, "best_params": snapshot(params), "n_evals": 0,
             "iter": 0, "best_at_iter_start": math.inf, "iter_evals": 0}
    per_iter: dict[int, dict] = {}
    bar = tqdm(total=max_iter, desc="L-BFGS", disable=not progress, leave=False)

    def closure():
        it = opt.state[opt._params[0]].get("n_iter", 0)
        if it != state["iter"]:  # the first evaluation of a new iteration
            before, now = state["best_at_iter_start"], state["best_f"]
            if (ftol is not None and math.isfinite(before)
                    and before - now < ftol * max(abs(now), 1.0)):
                raise _Stop("converged")
            state["iter"], state["best_at_iter_start"], state["iter_evals"] = it, now, 0
        state["iter_evals"] += 1
        if max_ls is not None and it > 0 and state["iter_evals"] > max_ls:
            raise _Stop("line_search")
        opt.zero_grad()
        state["n_evals"] += 1
        f = guarded(objective, state["best_f"], params[0].dtype)
        if not f.requires_grad:  # failed evaluation: a large value backs the search off
            return f
        f.backward()
        fv = float(f.detach())
        if fv < state["best_f"]:
            state["best_f"], state["best_params"] = fv, snapshot(params)
        grad_norm = math.sqrt(sum(float((p.grad**2).sum()) for p in params
                                  if p.grad is not None))
        per_iter[it] = {"iter": it, "objective": fv, "grad_norm": grad_norm,
                        "time_s": time.perf_counter() - t0}
        if bar.n < it:
            bar.update(it - bar.n)
            bar.set_postfix(objective=f"{fv:.5g}")
        return f

    reason = "converged"
    try:
        opt.step(closure)
        n_iter = opt.state[opt._params[0]].get("n_iter", 0)
        if n_iter >= max_iter:
            reason = "max_iter"
        elif state["n_evals"] >= max_eval:  # the line searches spent the budget
            reason = "max_evals"
    except _Stop as stop:
        reason = stop.reason
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        bar.close()
    state["history"] = [per_iter[k] for k in sorted(per_iter)]
    state["reason"] = reason
    return state
