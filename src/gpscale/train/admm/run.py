"""Running GPCV-ADMM to a :class:`FitResult`, shared by the hold-out trainer
(:mod:`gpscale.train.admm.holdout`) and the K-fold ones (:mod:`gpscale.train.admm.kfold`):
argument checks, the iteration loop of Algorithm 1 with its stopping rules, and the
result at the end (ML overall scale, divergence warning or error)."""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import torch

from ...models.exact import ExactGP
from ...progress import progress_bar
from ..result import FitResult, theta_of
from .core import HoldoutADMM
from .options import ADMMOptions
from .scale import calibrate_scale


class ADMMDivergenceError(RuntimeError):
    """GPCV-ADMM diverged; ``result`` holds the best hyperparameters kept (the model
    holds them too)."""

    def __init__(self, message: str, result: FitResult) -> None:
        super().__init__(message)
        self.result = result


def check_fit_args(model: ExactGP, on_divergence: str, scale: str = "ml") -> None:
    """ValueError naming the argument for a bad ``model``, ``on_divergence`` or ``scale``
    of any GPCV-ADMM trainer."""
    check_choices(on_divergence, scale)
    if not isinstance(model, ExactGP):
        raise ValueError(f"model must be an ExactGP, got {type(model).__name__}")


def check_choices(on_divergence: str, scale: str) -> None:
    """ValueError naming a bad ``on_divergence`` or ``scale`` of any GPCV-ADMM trainer."""
    if scale not in ("ml", "keep"):
        raise ValueError(f"scale must be 'ml' (maximum-likelihood overall scale after "
                         f"training) or 'keep', got {scale!r}")
    if on_divergence not in ("warn", "raise"):
        raise ValueError(f"on_divergence must be 'warn' or 'raise', got {on_divergence!r}")


def run_holdout(state: HoldoutADMM, max_iter: int, progress: bool = False,
                desc: str = "GPCV-ADMM", t0: float | None = None) -> dict[str, Any]:
    """Iterate Algorithm 1 until ‖θ^η − θ^(η−window)‖ < ε (and the residual below
    ``res_tol`` if set),
    ``max_iter``, divergence or Ctrl-C. On divergence or Ctrl-C the best feasible
    iterate (lowest validation MSE among those with a relative constraint residual
    below ``feasible_tol``; the start is one) is restored. Returns a plain dict
    (history, reason, message, best_iter) so that it can cross process boundaries."""
    o, model = state.opts, state.model
    t0 = time.perf_counter() if t0 is None else t0

    def record(it: int, extra: dict[str, float]) -> dict[str, Any]:
        return {"iter": it, **extra, "objective": extra["cv_loss"],
                "theta": theta_of(model), "time_s": time.perf_counter() - t0}

    history = [record(0, state.diagnostics())]
    path = [state.values()]  # θ in constrained units, per iteration, for the stop test
    best = (history[0]["cv_loss"], 0, state.theta(), state.z.clone(), state.lam.clone())
    reason, message = "max_iter", ""
    bar = progress_bar(progress, total=max_iter, desc=desc, leave=False)
    try:
        for it in range(1, max_iter + 1):
            rec = record(it, state.iterate())
            history.append(rec)
            bar.update(1)
            bar.set_postfix(cv=f"{rec['cv_loss']:.4g}", res=f"{rec['residual']:.2g}")
            finite = all(math.isfinite(rec[k]) for k in ("cv_loss", "lrho", "residual",
                                                        "z_norm", "dtheta"))
            finite = finite and bool(torch.isfinite(state.theta()).all())
            if not finite or rec["residual"] > o.diverge_tol:
                what = ("a non-finite value (NaN/inf) in L_ρ, z or θ" if not finite else
                        f"an exploding constraint residual ‖Cz − y_T‖/‖y_T‖ = "
                        f"{rec['residual']:.3g} > diverge_tol = {o.diverge_tol:g}")
                reason = "diverged"
                message = (f"GPCV-ADMM diverged at iteration {it}: {what}. Kept the best "
                           f"hyperparameters so far (iteration {best[1]}, validation MSE "
                           f"{best[0]:.4g}). Try a larger rho, a smaller rho_dual, a "
                           "smaller max_step or better initial hyperparameters.")
                break
            if rec["residual"] <= o.feasible_tol and rec["cv_loss"] < best[0]:
                best = (rec["cv_loss"], it, state.theta(), state.z.clone(), state.lam.clone())
            path.append(state.values())
            if len(path) > o.window:
                rec["dtheta_window"] = float((path[-1] - path[-1 - o.window]).norm())
                del path[0]
            if rec.get("dtheta_window", math.inf) < o.eps and (
                    o.res_tol is None or rec["residual"] <= o.res_tol):
                reason = "converged"
                break
    except KeyboardInterrupt:
        reason, message = "interrupted", "interrupted (Ctrl-C): kept the best hyperparameters"
    finally:
        bar.close()
    best_iter = len(history) - 1
    if reason in ("diverged", "interrupted"):
        state.set_theta(best[2])
        state.z, state.lam, best_iter = best[3], best[4], best[1]
    return {"history": history, "reason": reason, "message": message,
            "best_iter": best_iter, "cv_loss": history[best_iter]["cv_loss"],
            "n_evals": state.n_evals}


#: rank of the preconditioner of the one CG solve on all n points for the ML scale: with
#: σ² near its floor a low rank costs many CG iterations (benchmarks/results/precond.md)
SCALE_PRECOND_RANK = 1000


def scale_cg_options(opts: ADMMOptions, n: int) -> dict[str, Any]:
    """CG settings of the ML-scale solve after a run: ``opts``'s preconditioner kind
    at rank ≥ min(1000, n) (one solve on all n points, where σ² is often near its
    floor, and a low rank then costs many CG iterations: benchmarks/results/precond.md),
    and a relative residual of 1e-6 (``cg_tol`` when that is looser) — enough, since
    the factor yᵀC⁻¹y/n from CG started at 0 is off by exactly ‖e‖²_C, second order in
    the error. K is held densely within ``dense_bytes`` (not with ``memory="chunked"``)."""
    rank = 0 if opts.preconditioner == "none" else max(opts.precond_rank,
                                                       min(SCALE_PRECOND_RANK, n))
    return {"tol": max(opts.cg_tol, 1e-6), "preconditioner": opts.preconditioner,
            "precond_rank": rank, "block": opts.block,
            "dense_bytes": 0 if opts.memory == "chunked" else opts.dense_bytes}


def finish_fit(out: dict[str, Any], model: ExactGP, method: str, t0: float,
               on_divergence: str, scale: str, opts: ADMMOptions, client: Any = None
               ) -> FitResult:
    """FitResult from a run's dict; warn or raise on divergence (model keeps best θ).

    After a run that ended normally (converged or max_iter), ``scale="ml"`` sets the
    overall variance scale, which the CV loss cannot identify, to its maximum-likelihood
    value (:mod:`gpscale.train.admm.scale`); the factor goes into the last history row
    as ``scale_factor`` (None: not applicable); its CG solve is set by
    :func:`scale_cg_options` (on ``client``'s workers when given). Diverged or
    interrupted runs keep the best θ exactly as it was."""
    if scale == "ml" and out["history"] and out["reason"] in ("converged", "max_iter"):
        factor = calibrate_scale(model, **scale_cg_options(opts, model.n), client=client)
        out["history"][-1] = {**out["history"][-1], "scale_factor": factor,
                              "theta_before_scale": out["history"][-1].get("theta")}
    result = FitResult(method=method, theta=theta_of(model), objective=out["cv_loss"],
                       history=out["history"], converged=out["reason"] == "converged",
                       reason=out["reason"], wall_s=time.perf_counter() - t0,
                       n_evals=out["n_evals"])
    if out["reason"] == "diverged":
        if on_divergence == "raise":
            raise ADMMDivergenceError(out["message"], result)
        warnings.warn(out["message"], RuntimeWarning, stacklevel=3)
    return result
