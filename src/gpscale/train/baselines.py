"""Selection baselines trained as in Cao et al. (2013) §4.1: inducing-set selection
alternating with hyperparameter fitting of the same objective (VFE or DTC).

Titsias's greedy method "provides no way to refine the inducing set after
hyperparameter optimization, except to discard all previous inducing points and
restart selection" (Cao et al. §1.1): each epoch therefore re-runs the selector from
scratch with the current hyperparameters, then runs a bounded number of objective
evaluations of continuous optimisation with the set fixed (the paper's
min(20, max(15, 2d)) per epoch). Random selection draws its set once. The best
(lowest-objective) model over the epochs is returned, since restarts need not improve.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from ..kernels import Kernel
from ..models.sparse import SparseGP
from .cholqr import evals_per_epoch, fit_hyperparameters
from .result import FitResult, restore, snapshot, theta_of
from .selectors import select_greedy, select_ivm, select_random, select_variance

Selector = Callable[..., torch.Tensor]


def _named(name: str, candidates: int) -> tuple[str, Selector]:
    key = name.lower()
    if key == "random":
        return key, lambda kernel, X, y, noise, m, seed: select_random(X.shape[0], m, seed,
                                                                       X.device)
    if key == "variance":
        return key, lambda kernel, X, y, noise, m, seed: select_variance(kernel, X, m)
    if key == "ivm":
        return key, lambda kernel, X, y, noise, m, seed: select_ivm(kernel, X, y, noise, m)
    if key.startswith("titsias") or key == "greedy":
        c = int(key.split("-")[1]) if "-" in key else candidates
        return f"titsias-{c}", lambda kernel, X, y, noise, m, seed: select_greedy(
            kernel, X, y, noise, m, candidates=c, seed=seed)
    raise ValueError(f"unknown selector {name!r}; choose 'random', 'variance', 'ivm', "
                     "'greedy' or 'titsias-<candidates>', or pass a callable")


def fit_selected(
    selector: str | Selector,
    X: torch.Tensor,
    y: torch.Tensor,
    kernel: Kernel,
    m: int,
    objective: str = "vfe",
    noise: float = 0.1,
    seed: int = 0,
    epochs: int = 10,
    max_time: float | None = None,
    max_evals: int | None = None,
    candidates: int = 16,
    tol: float = 1e-4,
):
    """Alternate selection and hyperparameter fitting; returns (SparseGP, FitResult).

    ``selector``: ``"random"``, ``"variance"``, ``"ivm"``, ``"greedy"`` (Titsias with
    ``candidates``) / ``"titsias-512"``, or a callable
    ``(kernel, X, y, noise, m, seed) -> LongTensor``. Each epoch: select (with
    hyperparameters fixed), then ``fit_hyperparameters(model, max_evals)`` of
    :mod:`gpscale.train.cholqr` (default max_evals = min(20, max(15, 2 d)), d the number
    of hyperparameters incl. the noise). Stops after ``epochs``, after ``max_time``
    seconds, or when an epoch improves the objective by less than ``tol`` · |F|.
    """
    if isinstance(selector, str):
        name, select = _named(selector, candidates)
    elif callable(selector):
        name, select = getattr(selector, "__name__", "custom"), selector
    else:
        raise ValueError(f"selector must be a name or a callable, got {type(selector).__name__}")
    if int(epochs) < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if max_time is not None and not max_time > 0:
        raise ValueError(f"max_time must be positive seconds, got {max_time}")
    t0 = time.perf_counter()
    deadline = None if max_time is None else t0 + max_time
    history: list[dict] = []
    best = (math.inf, None, None)  # objective, inducing, parameter snapshot
    model, inducing, total_evals, reason = None, None, 0, "max_epochs"
    prev = math.inf
    for epoch in range(int(epochs)):
        cur_noise = noise if model is None else float(model.noise.detach())
        if inducing is None or name != "random":
            inducing = select(kernel, X, y, cur_noise, m, seed + epoch).to(X.device)
        model = SparseGP(kernel, X, y, inducing, noise=cur_noise, objective=objective)
        params = [p for p in model.parameters() if p.requires_grad]
        evals = max_evals if max_evals is not None else evals_per_epoch(model)
        total_evals += int(fit_hyperparameters(model, evals, deadline))
        with torch.no_grad():
            f = float(model.objective().detach())
        history.append({"iter": epoch + 1, "objective": f, "time_s": time.perf_counter() - t0,
                        "n_evals": total_evals, "m": int(inducing.numel())})
        if f < best[0]:
            best = (f, inducing.clone(), snapshot(params))
        if max_time is not None and time.perf_counter() - t0 > max_time:
            reason = "max_time"
            break
        if math.isfinite(prev) and prev - f < tol * max(1.0, abs(f)):
            reason = "converged"
            break
        prev = f
    f_best, ind_best, values = best
    if ind_best is None:
        raise RuntimeError("no epoch produced a finite objective; check the data scaling")
    final = SparseGP(kernel, X, y, ind_best, noise=float(model.noise.detach()),
                     objective=objective)
    restore([p for p in final.parameters() if p.requires_grad], values)
    result = FitResult(method=f"{name}-{objective}", theta=theta_of(final), objective=f_best,
                       history=history, converged=reason == "converged", reason=reason,
                       wall_s=time.perf_counter() - t0, n_evals=total_evals)
    return final, result
