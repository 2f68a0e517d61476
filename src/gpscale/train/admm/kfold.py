"""K-fold GPCV-ADMM (paper §3.2): the naive scheme (Algorithm 1 per fold, θ averaged)
and the principled consensus scheme (eq. 15–16).

Each fold is a pure function of (fold data, options) — :func:`run_fold` and
:func:`consensus_local` take a picklable :class:`FoldSpec` and return plain data —
so folds run in-process (``workers=1``), on a local process pool
(``concurrent.futures.ProcessPoolExecutor``), or as tasks on a dask.distributed cluster
(``client=``, see :func:`gpscale.parallel.cluster.fold_map`).

Consensus ADMM over local raw hyperparameters θ_k and the global θ̄ (eq. 16):

    θ_k ← argmin l_k(θ_k) + μ_kᵀ(θ_k − θ̄) + τ/2 ‖θ_k − θ̄‖²   (each fold, inexactly:
          ``local_iters`` iterations of Algorithm 1 with the proximal term in the θ-step)
    θ̄  ← mean_k (θ_k + μ_k / τ)
    μ_k ← μ_k + τ (θ_k − θ̄)
"""

from __future__ import annotations

import copy
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

import torch

from ...kernels import Kernel
from ...models.exact import ExactGP
from ...parallel.cluster import fold_map
from ...params import positive_params
from ...rng import as_generator
from ..result import FitResult, theta_of
from .core import HoldoutADMM
from .options import DEFAULT_PRESET, ADMMOptions, make_options
from .run import check_fit_args, finish_fit, run_holdout


@dataclass
class FoldSpec:
    """One fold: the hyperparameters' starting point (kernel, raw noise, trainability,
    fixed mean) and its training / validation data. Picklable."""

    kernel: Kernel
    raw_noise: torch.Tensor
    noise_trainable: bool
    mean: float
    X_T: torch.Tensor
    y_T: torch.Tensor
    X_V: torch.Tensor
    y_V: torch.Tensor


def kfold_indices(n: int, k: int, seed: int | torch.Generator | None = 0) -> list[torch.Tensor]:
    """Validation index sets of a seeded random K-fold partition of range(n)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise ValueError(f"k (number of folds) must be an int >= 2, got {k!r}")
    if n < 2 * k:
        raise ValueError(f"n={n} points are too few for k={k} folds (need at least {2 * k})")
    perm = torch.randperm(n, generator=as_generator(seed))
    return [part.sort().values for part in torch.tensor_split(perm, k)]


def fold_specs(model: ExactGP, folds: list[torch.Tensor]) -> list[FoldSpec]:
    """FoldSpec per fold: fold k validates, the rest trains (θ from ``model``)."""
    specs, n = [], model.n
    for idx_V in folds:
        mask = torch.ones(n, dtype=torch.bool)
        mask[idx_V] = False
        iT, iV = mask.nonzero()[:, 0].to(model.X.device), idx_V.to(model.X.device)
        specs.append(FoldSpec(copy.deepcopy(model.kernel), model.raw_noise.detach().clone(),
                              model.raw_noise.requires_grad, float(model.mean_constant.detach()),
                              model.X[iT], model.y[iT], model.X[iV], model.y[iV]))
    return specs


def _state(spec: FoldSpec, opts: ADMMOptions) -> HoldoutADMM:
    model = ExactGP(copy.deepcopy(spec.kernel), spec.X_T, spec.y_T, noise=1.0,
                    dtype=spec.X_T.dtype, device=spec.X_T.device)
    with torch.no_grad():
        model.raw_noise.copy_(spec.raw_noise)
        model.mean_constant.fill_(spec.mean)
    model.raw_noise.requires_grad_(spec.noise_trainable)
    return HoldoutADMM(model, spec.X_T, spec.y_T, spec.X_V, spec.y_V, opts)


def _values(model: ExactGP) -> dict[str, torch.Tensor]:
    return {name: getattr(sub, d.name).detach().clone()
            for name, sub, d in positive_params(model) if getattr(sub, d.raw_name).requires_grad}


def run_fold(spec: FoldSpec, opts: ADMMOptions) -> dict[str, Any]:
    """Naive scheme, one fold: Algorithm 1 from the spec's θ; returns its θ and history."""
    state = _state(spec, opts)
    state.init()
    out = run_holdout(state, opts.max_iter)
    out["values"] = _values(state.model)
    return out


def consensus_local(spec: FoldSpec, opts: ADMMOptions, local: dict[str, Any] | None,
                    prox: tuple[torch.Tensor, torch.Tensor, float],
                    iters: int) -> dict[str, Any]:
    """Consensus scheme, one fold, one round: ``iters`` iterations of Algorithm 1 with the
    proximal consensus term μᵀ(θ − θ̄) + τ/2‖θ − θ̄‖² from the fold's (θ, z, λ)."""
    state = _state(spec, opts)
    if local is None:
        state.set_theta(prox[1])
        state.init()
    else:
        state.set_theta(local["theta"])
        state.init(z0=local["z"], lam0=local["lam"])
        state.descent.pairs = list(local["pairs"])
        state.z_dir, state.z_gg = local["z_dir"], local["z_gg"]  # the FR z-step's memory
        state.theta_update.steps = dict(local.get("steps", {}))
        state.rho = local["rho"]  # adaptive ρ carries over between rounds
    state.prox = prox
    rec = state.diagnostics()
    for _ in range(iters):
        rec = state.iterate()
    return {"theta": state.theta(), "z": state.z, "lam": state.lam,
            "pairs": state.descent.pairs, "z_dir": state.z_dir, "z_gg": state.z_gg,
            "steps": getattr(state.theta_update, "steps", {}),
            "rho": state.rho, "rec": rec, "n_evals": state.n_evals}


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)  # in the worker process only


def _star(args: tuple, task) -> Any:
    return task(*args)


class _Runner:
    """map() over folds: in-process for ``workers=1``, a spawned process pool for more,
    or tasks on a dask.distributed ``client``."""

    def __init__(self, workers: int, client: Any = None) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        if client is not None and workers > 1:
            raise ValueError("give client= (a dask cluster runs the folds) or workers > 1 "
                             "(a local process pool), not both")
        self.pool, self.client = None, client
        if workers > 1:
            threads = max(1, (os.cpu_count() or 1) // workers)
            self.pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                                            initializer=_init_worker, initargs=(threads,))

    def map(self, fn, *iterables) -> list[Any]:
        if self.client is not None:
            return fold_map(self.client, _star, list(zip(*iterables)), task=fn)
        if self.pool is None:
            return [fn(*args) for args in zip(*iterables)]
        return list(self.pool.map(fn, *iterables))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def kfold_cv_loss(model: ExactGP, folds: list[torch.Tensor], tol: float = 1e-10) -> float:
    """Mean over folds of the validation MSE ‖y_V − K_VT C_T⁻¹ y_T‖²/n_V at the model's θ
    (C_T⁻¹ y_T by CG: no O(n³) step)."""
    losses = []
    with torch.no_grad():
        for spec in fold_specs(model, folds):
            state = HoldoutADMM(model, spec.X_T, spec.y_T, spec.X_V, spec.y_V,
                                make_options(cg_tol=tol, cg_max_iter=None))
            state.init()
            losses.append(state.diagnostics()["cv_loss"])
    return sum(losses) / len(losses)


def _check_device(model: ExactGP, workers: int) -> None:
    if workers > 1 and model.X.device.type != "cpu":
        raise ValueError("workers > 1 runs folds in CPU processes; use workers=1 for a model "
                         f"on {model.X.device}")


def fit_admm_kfold(model: ExactGP, k: int = 2, *, seed: int | torch.Generator | None = 0,
                   workers: int = 1, client: Any = None, options: ADMMOptions | None = None,
                   preset: str = DEFAULT_PRESET, on_divergence: str = "warn", scale: str = "ml",
                   **overrides: Any) -> FitResult:
    """Naive K-fold GPCV-ADMM (§3.2; method ``admm-kfold``): Algorithm 1 on every fold
    (fold k validates, the rest trains), then θ = mean_k θ^(k) in the hyperparameters'
    own units (the paper's average). ``preset``: as
    :func:`~gpscale.train.admm.fit_admm_hocv`. ``objective`` is :func:`kfold_cv_loss` at the
    averaged θ; ``history`` holds every fold's iterations (key ``fold``). Ctrl-C ends
    the run with the average of the folds finished so far (each at its best θ). Folds
    run in this process, in ``workers`` local processes, or as tasks of a dask
    ``client``.
    ``scale``: as :func:`~gpscale.train.admm.fit_admm_hocv` (after the averaging)."""
    check_fit_args(model, on_divergence, scale)
    _check_device(model, workers)
    opts = make_options(options, preset, **overrides)
    t0 = time.perf_counter()
    folds = kfold_indices(model.n, k, seed)
    specs, outs, stopped = fold_specs(model, folds), [], False
    runner = _Runner(workers, client)
    try:
        if workers == 1 and client is None:  # a Ctrl-C inside a fold ends the rest
            for spec in specs:
                outs.append(run_fold(spec, opts))
                if outs[-1]["reason"] == "interrupted":
                    break
        else:
            outs = runner.map(run_fold, specs, [opts] * k)
    except KeyboardInterrupt:
        stopped = True
    finally:
        runner.close()
    with torch.no_grad():  # the average of the folds that finished (none: θ⁰ kept)
        for name, sub, d in positive_params(model):
            if outs and getattr(sub, d.raw_name).requires_grad:
                setattr(sub, d.name, sum(o["values"][name] for o in outs) / len(outs))
    history = [{"fold": i, **rec} for i, o in enumerate(outs) for rec in o["history"]]
    reasons = [o["reason"] for o in outs] + (["interrupted"] if stopped else [])
    reason = next((r for r in ("interrupted", "diverged", "max_iter") if r in reasons),
                  "converged")
    out = {"history": history, "reason": reason,
           "message": "; ".join(f"fold {i}: {o['message']}" for i, o in enumerate(outs)
                                if o["reason"] == "diverged"),
           "cv_loss": kfold_cv_loss(model, folds, opts.cg_tol),
           "n_evals": sum(o["n_evals"] for o in outs)}
    return finish_fit(out, model, "admm-kfold", t0, on_divergence, scale, opts, client)


def fit_admm_consensus(model: ExactGP, k: int = 2, *, seed: int | torch.Generator | None = 0,
                       workers: int = 1, client: Any = None, tau: float | None = None,
                       local_iters: int = 1,
                       options: ADMMOptions | None = None, preset: str = DEFAULT_PRESET,
                       on_divergence: str = "warn", scale: str = "ml",
                       **overrides: Any) -> FitResult:
    """Consensus K-fold GPCV-ADMM (eq. 15–16; method ``admm-consensus``).

    ``tau`` is the consensus penalty τ (default: the mean validation-fold size, the scale
    of each l_k); ``local_iters`` hold-out ADMM iterations per fold and round. Rounds stop
    when ‖Δθ̄‖ < ε (constrained units, the change over the last ``window`` rounds, see
    :class:`ADMMOptions`) and max_k ‖θ_k − θ̄‖ < ε (raw), or after
    ``max_iter`` rounds. On divergence or Ctrl-C the best θ̄ (lowest mean fold
    validation MSE among feasible rounds) is kept. ``scale``: as
    :func:`~gpscale.train.admm.fit_admm_hocv` (applied to θ̄). The folds of each round
    run as in :func:`fit_admm_kfold` (``workers`` or ``client``).

    The default τ holds θ_k near θ̄, so θ̄ moves slowly: with the ``TANGENT`` preset's
    ε = 1e-2 on the paper's synthetic sets the rounds can stop as converged with θ̄
    still at or near θ⁰ (benchmarks/results/admm-synthetic-tangent/admm-synthetic.md).
    Pass a smaller ``tau`` or ``eps`` there."""
    check_fit_args(model, on_divergence, scale)
    _check_device(model, workers)
    opts = make_options(options, preset, **overrides)
    if isinstance(local_iters, bool) or not isinstance(local_iters, int) or local_iters < 1:
        raise ValueError(f"local_iters must be an int >= 1, got {local_iters!r}")
    t0 = time.perf_counter()
    folds = kfold_indices(model.n, k, seed)
    specs = fold_specs(model, folds)
    tau = float(sum(len(f) for f in folds) / k) if tau is None else float(tau)
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a positive number, got {tau!r}")
    probe = _state(specs[0], opts)
    bar_theta = probe.theta()
    mus = [torch.zeros_like(bar_theta) for _ in range(k)]
    locals_: list[dict[str, Any] | None] = [None] * k

    def values_of(theta: torch.Tensor) -> torch.Tensor:
        probe.set_theta(theta)
        return probe.values()

    history: list[dict[str, Any]] = []
    path = [values_of(bar_theta)]  # θ̄ per round, for the windowed stop test
    best = (math.inf, bar_theta.clone(), 0)
    reason, message, n_evals = "max_iter", "", 0
    runner = _Runner(workers, client)
    try:
        for it in range(1, opts.max_iter + 1):
            proxes = [(mu, bar_theta, tau) for mu in mus]
            locals_ = runner.map(consensus_local, specs, [opts] * k, locals_, proxes,
                                 [local_iters] * k)
            n_evals += sum(lo["n_evals"] for lo in locals_)
            recs = [lo["rec"] for lo in locals_]
            old_values = values_of(bar_theta)
            bar_theta = sum(lo["theta"] + mu / tau for lo, mu in zip(locals_, mus)) / k
            mus = [mu + tau * (lo["theta"] - bar_theta) for lo, mu in zip(locals_, mus)]
            primal = max(float((lo["theta"] - bar_theta).norm()) for lo in locals_)
            dtheta = float((values_of(bar_theta) - old_values).norm())
            rec = {"iter": it, "cv_loss": sum(r["cv_loss"] for r in recs) / k,
                   "lrho": sum(r["lrho"] for r in recs),
                   "residual": max(r["residual"] for r in recs),
                   "z_norm": max(r["z_norm"] for r in recs), "primal": primal,
                   "dtheta": dtheta, "time_s": time.perf_counter() - t0}
            rec["objective"] = rec["cv_loss"]
            probe.set_theta(bar_theta)
            rec["theta"] = theta_of(probe.model)
            history.append(rec)
            bad = not all(math.isfinite(v) for v in (rec["cv_loss"], rec["lrho"],
                                                     rec["residual"], primal, dtheta))
            if bad or rec["residual"] > opts.diverge_tol:
                reason = "diverged"
                message = (f"GPCV-ADMM consensus diverged at round {it}: "
                           + ("a non-finite value (NaN/inf)" if bad else
                              f"an exploding constraint residual {rec['residual']:.3g} > "
                              f"diverge_tol = {opts.diverge_tol:g}")
                           + f". Kept the best hyperparameters so far (round {best[2]}). "
                           "Try a larger rho or tau, or a smaller max_step.")
                break
            if rec["residual"] <= opts.feasible_tol and rec["cv_loss"] < best[0]:
                best = (rec["cv_loss"], bar_theta.clone(), it)
            path.append(values_of(bar_theta))
            if len(path) > opts.window:
                rec["dtheta_window"] = float((path[-1] - path[-1 - opts.window]).norm())
                del path[0]
            if rec.get("dtheta_window", math.inf) < opts.eps and primal < opts.eps:
                reason = "converged"
                break
    except KeyboardInterrupt:
        reason, message = "interrupted", "interrupted (Ctrl-C): kept the best hyperparameters"
    finally:
        runner.close()
    final = best[1] if reason in ("diverged", "interrupted") else bar_theta
    _set_raw(model, probe, final)
    out = {"history": history, "reason": reason, "message": message,
           "cv_loss": kfold_cv_loss(model, folds, opts.cg_tol), "n_evals": n_evals}
    return finish_fit(out, model, "admm-consensus", t0, on_divergence, scale, opts, client)


def _set_raw(model: ExactGP, probe: HoldoutADMM, theta: torch.Tensor) -> None:
    """Copy the raw vector θ (ordered as in ``probe``) onto ``model``'s parameters."""
    probe.set_theta(theta)
    mine = [p for p in model.kernel.parameters() if p.requires_grad]
    mine += [model.raw_noise] if model.raw_noise.requires_grad else []
    with torch.no_grad():
        for p, q in zip(mine, probe.params):
            p.copy_(q.detach().to(p.device))
