"""GPCV-ADMM trainers (Xu, Yin, Zhang, Luo, Cui): hold-out CV (Algorithm 1), and the
K-fold schemes of §3.2 (:mod:`gpscale.train.admm_kfold`), plus a CG predictive mean.

``fit_admm_hocv(model)`` splits the model's data into D_T and D_V (seeded, validation
fraction ½ by default), runs Algorithm 1 (see :mod:`gpscale.train.admm_core`) and
leaves the model holding the learned hyperparameters. Nothing here is O(n³): the
z-steps and the final predictive solve are (preconditioned) conjugate gradients.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import torch
from tqdm.auto import tqdm

from ..models.exact import ExactGP
from ..rng import as_generator
from ..validation import as_matrix
from .admm_core import HoldoutADMM
from .admm_ops import solve_full
from .admm_options import ADMMOptions, make_options
from .admm_scale import calibrate_scale
from .result import FitResult, theta_of


class ADMMDivergenceError(RuntimeError):
    """GPCV-ADMM diverged; ``result`` holds the best hyperparameters kept (the model
    holds them too)."""

    def __init__(self, message: str, result: FitResult) -> None:
        super().__init__(message)
        self.result = result


def holdout_split(n: int, val_fraction: float = 0.5,
                  seed: int | torch.Generator | None = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (train, validation) index split of range(n), seeded, on the CPU."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction!r}")
    n_v = int(round(val_fraction * n))
    if n_v < 1 or n - n_v < 1:
        raise ValueError(f"n={n} points are too few for val_fraction={val_fraction}: "
                         "both parts need at least one point")
    perm = torch.randperm(n, generator=as_generator(seed))
    return perm[n_v:].sort().values, perm[:n_v].sort().values


def validation_split(n: int, validation: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices of range(n) from a given validation part: a boolean
    mask of length n or distinct integer indices in [0, n) (a tensor, array or list).
    Sorted, on the CPU; both parts must be non-empty."""
    v = torch.as_tensor(validation).cpu()
    v = v.long() if v.numel() == 0 else v  # an empty list comes as float
    if v.dtype == torch.bool:
        if v.shape != (n,):
            raise ValueError(f"a validation mask needs shape ({n},) (one entry per data "
                             f"point), got {tuple(v.shape)}")
        mask = v.clone()
    elif v.dtype.is_floating_point or v.dtype.is_complex or v.ndim != 1:
        raise ValueError("validation must be a boolean mask or a 1-D sequence of integer "
                         f"indices, got dtype {v.dtype} with shape {tuple(v.shape)}")
    else:
        if v.numel() and (int(v.min()) < 0 or int(v.max()) >= n):
            raise ValueError(f"validation indices must lie in [0, {n}), got "
                             f"{int(v.min())} … {int(v.max())}")
        if v.unique().numel() != v.numel():
            raise ValueError("validation indices must be distinct (a repeated index "
                             "would weight its point twice)")
        mask = torch.zeros(n, dtype=torch.bool)
        mask[v.long()] = True
    n_v = int(mask.sum())
    if n_v == 0 or n_v == n:
        raise ValueError(f"the validation part has {n_v} of {n} points; both the training "
                         "and the validation part need at least one point")
    return (~mask).nonzero()[:, 0], mask.nonzero()[:, 0]


def run_holdout(state: HoldoutADMM, max_iter: int, progress: bool = False,
                desc: str = "GPCV-ADMM", t0: float | None = None) -> dict[str, Any]:
    """Iterate Algorithm 1 until ‖Δθ‖ < ε (and the residual below ``res_tol`` if set),
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
    best = (history[0]["cv_loss"], 0, state.theta(), state.z.clone(), state.lam.clone())
    reason, message = "max_iter", ""
    bar = tqdm(total=max_iter, desc=desc, disable=not progress, leave=False)
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
            if rec["dtheta"] < o.eps and (o.res_tol is None or rec["residual"] <= o.res_tol):
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


#: rank of the preconditioner of the one CG solve on all n points for the ML scale
SCALE_PRECOND_RANK = 1000


def scale_cg_options(opts: ADMMOptions, n: int) -> dict[str, Any]:
    """CG settings of the ML-scale solve after a run: ``opts``'s preconditioner kind
    at rank ≥ min(1000, n) (one solve on all n points, where σ² is often near its
    floor: on kin40k n = 8000 rank 100 took 184 s, rank 1000 72 s), and a relative
    residual of 1e-6 (``cg_tol`` when that is looser) — enough, since the factor
    yᵀC⁻¹y/n from CG started at 0 is off by exactly ‖e‖²_C, second order in the
    error. K is held densely within ``dense_bytes`` (not with ``memory="chunked"``)."""
    rank = 0 if opts.preconditioner == "none" else max(opts.precond_rank,
                                                       min(SCALE_PRECOND_RANK, n))
    return {"tol": max(opts.cg_tol, 1e-6), "preconditioner": opts.preconditioner,
            "precond_rank": rank, "block": opts.block,
            "dense_bytes": 0 if opts.memory == "chunked" else opts.dense_bytes}


def finish(out: dict[str, Any], model: ExactGP, method: str, t0: float,
           on_divergence: str, scale: str, opts: ADMMOptions) -> FitResult:
    """FitResult from a run's dict; warn or raise on divergence (model keeps best θ).

    After a run that ended normally (converged or max_iter), ``scale="ml"`` sets the
    overall variance scale, which the CV loss cannot identify, to its maximum-likelihood
    value (:mod:`gpscale.train.admm_scale`); the factor goes into the last history row
    as ``scale_factor`` (None: not applicable); its CG solve is set by
    :func:`scale_cg_options`. Diverged or interrupted runs keep the
    best θ exactly as it was."""
    if scale == "ml" and out["history"] and out["reason"] in ("converged", "max_iter"):
        factor = calibrate_scale(model, **scale_cg_options(opts, model.n))
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


def _check_common(model: ExactGP, on_divergence: str, scale: str = "ml") -> None:
    if scale not in ("ml", "keep"):
        raise ValueError(f"scale must be 'ml' (maximum-likelihood overall scale after "
                         f"training) or 'keep', got {scale!r}")
    if not isinstance(model, ExactGP):
        raise ValueError(f"model must be an ExactGP, got {type(model).__name__}")
    if on_divergence not in ("warn", "raise"):
        raise ValueError(f"on_divergence must be 'warn' or 'raise', got {on_divergence!r}")


def fit_admm_hocv(
    model: ExactGP,
    *,
    val_fraction: float = 0.5,
    seed: int | torch.Generator | None = 0,
    validation: Any = None,
    options: ADMMOptions | None = None,
    progress: bool = False,
    on_divergence: str = "warn",
    scale: str = "ml",
    **overrides: Any,
) -> FitResult:
    """Hold-out GPCV-ADMM (Algorithm 1) on the model's data; method ``admm-hocv``.

    The validation part D_V is a seeded random ``val_fraction`` of the points, or the
    points ``validation`` names (a boolean mask or integer indices; it overrides
    ``val_fraction`` and ``seed``) — e.g. the latest times, for a model meant to
    forecast, where a random D_V scores interpolation. Options
    are :class:`ADMMOptions` fields (``rho=5, eps=1e-2, max_iter=100, ...``), given as
    ``options`` and/or keywords. ``objective`` and the history's ``cv_loss`` are the
    validation MSE ‖y_V − K_VT z‖²/n_V. On divergence the best θ is kept and a
    RuntimeWarning (``on_divergence="warn"``) or :class:`ADMMDivergenceError` is raised.
    ``scale="ml"`` (default) then sets the overall variance scale, which CV leaves
    undetermined, to its maximum-likelihood value by one CG solve (``"keep"``: as ADMM
    left it; see :mod:`gpscale.train.admm_scale`).

    The defaults are the paper's (fixed ρ = 5, λ⁰ = 1, ε = 1e-2, z held in the
    θ-step), with which θ moves little per iteration (see
    :mod:`gpscale.train.admm_core`, "Convergence"). For a run that reaches the CV
    optimum in about ten iterations pass ``**TANGENT`` (``coupling="tangent"``: our
    θ-step, not the paper's; ρ = 20, the adjoint λ⁰, see :data:`TANGENT`).
    ``adaptive_rho=True, rho_mu=2.0, lam_init="adjoint"`` with a smaller ``eps`` keeps
    the paper's θ-step and gets near it in ~100 iterations.
    """
    _check_common(model, on_divergence, scale)
    opts = make_options(options, **overrides)
    t0 = time.perf_counter()
    idx_T, idx_V = (holdout_split(model.n, val_fraction, seed) if validation is None
                    else validation_split(model.n, validation))
    idx_T, idx_V = idx_T.to(model.X.device), idx_V.to(model.X.device)
    state = HoldoutADMM(model, model.X[idx_T], model.y[idx_T], model.X[idx_V],
                        model.y[idx_V], opts)
    state.init()
    out = run_holdout(state, opts.max_iter, progress, "GPCV-ADMM (hold-out)", t0)
    return finish(out, model, "admm-hocv", t0, on_divergence, scale, opts)


#: options of the tangent-θ-step variant used in the benchmarks (``coupling="tangent"``,
#: ours, not the paper's): ρ = 20, the adjoint λ⁰, CG ≤ 50 iterations per solve, the
#: paper's ε = 1e-2, and at most 7 backtracks (μ ≥ 1/64 of the L-BFGS step). The
#: backtrack cap trades time for precision near the optimum, where the inexact solves
#: make the line search fail; it was chosen on kin40k (admm-quality, RBF-ARD), where
#: 5 / 7 / 10 backtracks gave test RMSE 1.008 / 1.012 / 1.008x exact ML-II's in 50 / 56 /
#: 78-82 s at n = 8000, and 1.055 / 1.045 / 1.047x in 149 / 236 / 248 s at n = 16 000.
#: ``fit_admm_hocv(model, **TANGENT)``.
TANGENT: dict[str, Any] = {"coupling": "tangent", "lam_init": "adjoint", "rho": 20.0,
                           "cg_max_iter": 50, "max_backtracks": 7, "eps": 1e-2}

#: method names for ``--method`` and the estimator
ADMM_METHODS = ("admm-hocv", "admm-kfold", "admm-consensus")


def fit_admm(model: ExactGP, method: str = "admm-hocv", **kwargs: Any) -> FitResult:
    """Dispatch on the method name: ``admm-hocv`` → :func:`fit_admm_hocv`, ``admm-kfold``
    → :func:`~gpscale.train.admm_kfold.fit_admm_kfold`, ``admm-consensus`` →
    :func:`~gpscale.train.admm_kfold.fit_admm_consensus` (keywords passed through)."""
    from .admm_kfold import fit_admm_consensus, fit_admm_kfold

    fits = dict(zip(ADMM_METHODS, (fit_admm_hocv, fit_admm_kfold, fit_admm_consensus)))
    if method not in fits:
        raise ValueError(f"unknown method {method!r}; choose one of {list(ADMM_METHODS)}")
    return fits[method](model, **kwargs)


# -- prediction without O(n³) -------------------------------------------------------------

def cg_predict(
    model: ExactGP,
    X_new,
    *,
    tol: float = 1e-8,
    max_iter: int | None = None,
    precond_rank: int = 50,
    block: int | None = None,
    return_info: bool = False,
    preconditioner: str = "pivchol",
    dense_bytes: int = 2**30,
):
    """Posterior mean K(X*, X) C⁻¹ (y − m) + m with C⁻¹(y − m) from preconditioned CG
    (``preconditioner`` "pivchol": L Lᵀ + σ²I, L a rank-``precond_rank`` pivoted
    Cholesky factor of K; "grief": s ΦΦᵀ + σ²I with p = ``precond_rank`` GRIEF
    eigenfunctions, separable kernels only; both applied by Woodbury; "none" or rank 0:
    plain CG; see :mod:`gpscale.models.precond`). K is held densely when its n² entries
    fit in ``dense_bytes``, else its products are chunked (``block`` rows): O(n² ·
    iterations) time, O(n · block) memory beyond that budget, no O(n³) step.
    With ``return_info`` also returns the :class:`~gpscale.linalg.CGInfo`."""
    Xs = as_matrix(X_new, "X_new", model.X.dtype, model.X.device)
    if Xs.shape[1] != model.X.shape[1]:
        raise ValueError(f"X_new has {Xs.shape[1]} columns but the model was trained on "
                         f"{model.X.shape[1]}")
    alpha, info = solve_full(model, tol, max_iter, precond_rank, block, preconditioner,
                             dense_bytes)
    with torch.no_grad():
        mean = model.kernel.matmul(Xs, model.X, alpha, block) + model.mean_constant.detach()
    return (mean, info) if return_info else mean
