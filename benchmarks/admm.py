"""``gpscale bench admm-synthetic``: the GPCV-ADMM paper's Table 1 protocol.

Data: :func:`gpscale.data.synthetic.synthetic_admm` — SE (l = 0.5), LP (l = 0.5, p = 1)
and SE+LP (l₁ = 3, l₂ = 1, p = 2), σ² = 1, n = 500 on [0, 10] and n = 1000, 2000 on
[0, 20], 20 test points, noise variance ``--noise``; trial t uses seed t.

Every method starts from the same θ⁰ (each l and p times ``--init-scale``, noise
``--init-noise``) and estimates the lengthscales, periods and the noise; σ² is held at
1 as in the paper (its Table 1 reports l and p only; a CV loss cannot identify σ²
and σ_e² jointly, the predictive mean being invariant to scaling both). Methods:
``admm-hocv`` (½ validation), ``admm-kfold`` (the naive two-fold scheme the paper's
experiments use), ``admm-consensus`` (two folds) — ρ = 5, λ⁰ = 1, at most 100
iterations — and exact ML-II (``exact``, L-BFGS). Test MSE is
‖y* − m̄(X*)‖²/20 with the ADMM means from :func:`gpscale.train.admm.cg_predict`
(no O(n³) step) and the exact one from the Cholesky predictor.

Reported per (kernel, n, method): mean (std) of each estimate over the trials, the
mean test MSE and RMSE, next to the paper's Table 1, and the mean test NLPD of the
Cholesky predictor at the fitted θ (outside the timed fit). Target (per kernel and n,
``admm-kfold``): every mean estimate within two of the paper's standard deviations of
the true value.

``--quick``: n = 500, one trial, at most 25 ADMM iterations.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np
import torch

from gpscale.data.synthetic import PAPER_THETA, paper_kernel, synthetic_admm
from gpscale.models import ExactGP
from gpscale.params import positive_params
from gpscale.train import FitResult, fit_lbfgs
from gpscale.train.admm import (
    PRESETS,
    cg_predict,
    fit_admm_consensus,
    fit_admm_hocv,
    fit_admm_kfold,
    kfold_indices,
)
from gpscale.train.result import theta_of

from .harness import register

KERNELS = ("se", "lp", "se+lp")
METHODS = ("admm-hocv", "admm-kfold", "admm-consensus", "exact", "cv-optimum")
#: estimated hyperparameters per kernel, in Table 1's order
PARAMS = {"se": ("l",), "lp": ("l", "p"), "se+lp": ("l1", "l2", "p")}
#: Table 1 of the paper: {kernel: {n: (GPCV-ADMM [(mean, std)], GPML [(mean, std)],
#: test MSE ADMM, test MSE GPML)}}
PAPER_TABLE1: dict[str, dict[int, tuple]] = {
    "se": {500: ([(0.46, 0.054)], [(0.52, 0.018)], 0.12, 0.13),
           1000: ([(0.50, 0.044)], [(0.50, 0.017)], 0.12, 0.14),
           2000: ([(0.50, 0.017)], [(0.53, 0.020)], 0.12, 0.14)},
    "lp": {500: ([(0.34, 0.023), (1.13, 0.080)], [(0.55, 0.052), (1.06, 0.090)], 0.13, 0.36),
           1000: ([(0.39, 0.014), (1.06, 0.063)], [(0.52, 0.058), (1.16, 0.130)], 0.17, 0.44),
           2000: ([(0.44, 0.082), (1.19, 0.008)], [(0.53, 0.013), (1.02, 0.019)], 0.26, 0.28)},
    "se+lp": {500: ([(3.73, 0.280), (0.94, 0.100), (2.38, 0.150)],
                    [(3.62, 0.630), (1.08, 0.210), (2.38, 0.860)], 0.18, 0.21),
              1000: ([(3.74, 0.250), (0.95, 0.110), (2.14, 0.090)],
                     [(3.61, 0.560), (1.05, 0.180), (2.27, 0.600)], 0.13, 0.15),
              2000: ([(3.94, 0.075), (0.99, 0.120), (2.10, 0.080)],
                     [(3.69, 0.390), (1.09, 0.130), (2.13, 0.290)], 0.34, 0.37)},
}


def paper_z(name: str, n: int) -> float | None:
    """The Table 1 target's statistic on the paper's own GPCV-ADMM row: max over the
    estimated hyperparameters of |paper mean − true| / paper std (None: not in Table 1).
    The paper's ADMM estimates meet "≤ 2" in 3 of its 9 cells (SE only)."""
    paper = PAPER_TABLE1.get(name, {}).get(n)
    if paper is None:
        return None
    true = PAPER_THETA[name]
    return max(abs(m - true[k]) / sd for k, (m, sd) in zip(PARAMS[name], paper[0]))


def _arguments(p) -> None:
    p.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="training sizes (default 500 1000 2000; --quick 500)")
    p.add_argument("--trials", type=int, default=None,
                   help="Monte-Carlo trials (paper: 50; default 10; --quick 1)")
    p.add_argument("--first-trial", type=int, default=0,
                   help="seed of the first trial (default 0): --first-trial 5 --trials 5 "
                        "runs trials 5-9, to extend an earlier run")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--noise", type=float, default=0.1, help="noise variance of the data")
    p.add_argument("--init-scale", type=float, default=1.2,
                   help="θ⁰ = true l, p times this (default 1.2)")
    p.add_argument("--init-noise", type=float, default=0.2, help="initial noise variance")
    p.add_argument("--fix-noise", action="store_true",
                   help="hold the noise variance at --init-noise for every method (the "
                        "paper's eq. 17-18 differentiate the kernel's θ_h only)")
    p.add_argument("--rho", type=float, default=5.0, help="ρ (paper: 5)")
    p.add_argument("--eps", type=float, default=None,
                   help="stop when ‖Δθ‖ < eps (Alg. 1: 1e-2; default: the preset's, for "
                        "'paper' 0 = no ε test, max-iter iterations as in Fig. 2)")
    p.add_argument("--preset", default="paper", choices=sorted(PRESETS),
                   help="GPCV-ADMM's steps: 'paper' (default: coordinate descent with line "
                        "minimisation, the z-step by CG to the minimiser of (13), maxItr "
                        "iterations; --eps 1e-2 adds Alg. 1's stop), 'lbfgs-cg' or "
                        "'tangent' (ours; see gpscale.train.admm.PRESETS)")
    p.add_argument("--max-iter", type=int, default=None,
                   help="ADMM iterations (paper: 100; --quick 25)")
    p.add_argument("--tangent", action="store_true",
                   help="the same as --preset tangent (ours: coupling='tangent', ρ = 20, "
                        "adjoint λ⁰, ε = 1e-2); overrides --rho and --eps")
    p.add_argument("--adaptive-rho", action="store_true",
                   help="residual-balancing ρ (Boyd et al. §3.4.1, μ = 2, τ = 2) with the "
                        "adjoint λ⁰ instead of the paper's fixed ρ and λ⁰ = 1")


def _model(name: str, ds, init_scale: float, init_noise: float,
           device: torch.device, fix_noise: bool = False) -> ExactGP:
    th0 = {k: (v * init_scale if k != "sigma2" else v) for k, v in PAPER_THETA[name].items()}
    kernel = paper_kernel(name, th0)
    for mod in kernel.modules():
        if hasattr(mod, "raw_outputscale"):
            mod.raw_outputscale.requires_grad_(False)  # σ² = 1 as in the paper
    model = ExactGP(kernel, ds.X, ds.y, noise=init_noise, device=device)
    model.raw_noise.requires_grad_(not fix_noise)
    return model


def _estimates(name: str, model: ExactGP) -> dict[str, float]:
    k = model.kernel
    if name == "se":
        out = {"l": k.base.lengthscale}
    elif name == "lp":
        out = {"l": k.base.lengthscale, "p": k.base.period}
    else:
        out = {"l1": k.kernels[0].base.lengthscale, "l2": k.kernels[1].base.lengthscale,
               "p": k.kernels[1].base.period}
    out["noise"] = model.noise
    return {key: float(v.detach().reshape(-1)[0]) for key, v in out.items()}


def _convergence(rec, name: str, n: int, res) -> None:
    """Fig. 2 of the paper: a hyperparameter, ‖z‖, the constraint gap and L_ρ by
    iteration (about ten rows of the first hold-out run per kernel)."""
    key = {"se": "kernel.base.lengthscale", "lp": "kernel.base.lengthscale",
           "se+lp": "kernel.kernels.0.base.lengthscale"}[name]
    step = max(1, len(res.history) // 10)
    for h in res.history[::step] + ([res.history[-1]] if len(res.history) % step != 1 else []):
        rec.record(kind="convergence", kernel=name, n=n, iter=h["iter"],
                   hyperparameter=h["theta"][key][0], z_norm=h["z_norm"],
                   residual=h["residual"], lrho=h["lrho"], cv_loss=h["cv_loss"])


def _stop_iters(method: str, res) -> list[int]:
    """ADMM iterations each run took (per fold for admm-kfold; rounds for consensus;
    the L-BFGS iterations for exact)."""
    if method in ("admm-kfold", "cv-optimum"):
        folds = sorted({h["fold"] for h in res.history})
        return [max(h["iter"] for h in res.history if h["fold"] == k) for k in folds]
    return [max(h.get("iter", 0) for h in res.history) if res.history else 0]


def _cv_optimum(model: ExactGP, trial: int):
    """The naive two-fold scheme's target found directly: each fold's exact hold-out CV
    optimum (L-BFGS on the dense CV loss, :func:`benchmarks.admm_scaling.holdout_cv_reference`;
    a reference, not a method), averaged in the hyperparameters' units as
    :func:`fit_admm_kfold` averages, on the same folds (seed = trial)."""
    from .admm_scaling import holdout_cv_reference

    fits = []
    for fold in kfold_indices(model.n, 2, trial):
        m = copy.deepcopy(model)
        info = holdout_cv_reference(m, validation=fold)
        fits.append((m, info))
    with torch.no_grad():
        for (_, sub, d), *others in zip(positive_params(model),
                                           *(positive_params(m) for m, _ in fits)):
            if getattr(sub, d.raw_name).requires_grad:
                vals = [getattr(o[1], o[2].name) for o in others]
                setattr(sub, d.name, sum(vals) / len(vals))
    return FitResult(method="cv-optimum", theta=theta_of(model), objective=math.nan,
                     history=[{"fold": k, "iter": info["iters"]}
                              for k, (_, info) in enumerate(fits)],
                     converged=True, reason="converged", wall_s=0.0)


def _test_nlpd(model: ExactGP, ds) -> float:
    """Test NLPD of the noisy targets from the Cholesky predictor (mean and variance at
    the fitted θ, O(n³), outside the timed fit; ADMM's own mean is the O(n²) CG one)."""
    from gpscale.metrics import nlpd

    with torch.no_grad():
        mean, var = model.predict(ds.X_test, include_noise=True)
    return nlpd(ds.y_test.cpu().numpy(), mean.cpu().numpy(), var.cpu().numpy())


def _fit(method: str, model: ExactGP, trial: int, opts: dict[str, Any]):
    if method == "exact":
        return fit_lbfgs(model, max_iter=200)
    if method == "cv-optimum":
        return _cv_optimum(model, trial)
    fit = {"admm-hocv": fit_admm_hocv, "admm-kfold": fit_admm_kfold,
           "admm-consensus": fit_admm_consensus}[method]
    extra = {} if method == "admm-hocv" else {"k": 2}
    return fit(model, seed=trial, **extra, **opts)


def _plot(fig, records: list[dict], summary: dict) -> None:
    """One panel per kernel: every trial's estimate / true value by method and n."""
    trials = [r for r in records if r.get("kind") == "trial"]
    conv = [r for r in records if r.get("kind") == "convergence"]
    kernels = [k for k in KERNELS if any(r["kernel"] == k for r in trials)]
    grid = fig.subplots(2 if conv else 1, max(1, len(kernels)), squeeze=False)
    axes = grid[0]
    for ax, name in zip(grid[1] if conv else [], kernels):
        rs = [r for r in conv if r["kernel"] == name]
        it = [r["iter"] for r in rs]
        for j, (key, label) in enumerate((("hyperparameter", "first l"), ("z_norm", "‖z‖"),
                                          ("residual", "‖Cz−y‖/‖y‖"), ("lrho", "L_ρ"))):
            vals = np.array([r[key] for r in rs], dtype=float)
            span = np.ptp(vals) or 1.0
            ax.plot(it, (vals - vals.min()) / span, label=label, color=f"C{j}")
        ax.set_title(f"{name}: hold-out run, each curve rescaled to [0, 1]", fontsize=8)
        ax.set_xlabel("ADMM iteration", fontsize=8)
    if conv and kernels:
        grid[1][0].legend(fontsize=7)
    markers = dict(zip(METHODS, "osD^v"))
    for ax, name in zip(axes, kernels):
        rs = [r for r in trials if r["kernel"] == name]
        ns = sorted({r["n"] for r in rs})
        methods = [m for m in METHODS if any(r["method"] == m for r in rs)]
        for j, key in enumerate(PARAMS[name]):
            for i, method in enumerate(methods):
                for k, n in enumerate(ns):
                    vals = [r[key] / PAPER_THETA[name][key] for r in rs
                            if r["method"] == method and r["n"] == n]
                    x = j * (len(ns) + 1) + k + (i - len(methods) / 2) * 0.12
                    ax.plot([x] * len(vals), vals, markers[method], ms=4, alpha=0.7,
                            color=f"C{i}", label=method if (j, k) == (0, 0) else None)
        ax.axhline(1.0, color="k", lw=0.8)
        ticks = [j * (len(ns) + 1) + k for j in range(len(PARAMS[name]))
                 for k in range(len(ns))]
        ax.set_xticks(ticks, [f"{key}\nn={n}" for key in PARAMS[name] for n in ns],
                      fontsize=7)
        ax.set_title(f"{name}: estimate / true value", fontsize=9)
    if kernels:
        axes[0].legend(fontsize=7)


@register("admm-synthetic", help="GPCV-ADMM paper Table 1: estimates and test MSE on "
          "SE / LP / SE+LP synthetic data, ADMM variants vs exact ML-II",
          add_arguments=_arguments, plot=_plot)
def run(args, rec) -> None:
    """Table 1 protocol (see the module docstring)."""
    ns = args.n or ([500] if args.quick else [500, 1000, 2000])
    trials = args.trials or (1 if args.quick else 10)
    max_iter = args.max_iter or (25 if args.quick else 100)
    preset = "tangent" if args.tangent else getattr(args, "preset", "paper")
    opts = {"rho": args.rho, "eps": 1e-2, "max_iter": max_iter, "lam0": 1.0,
            **PRESETS[preset], "preset": preset}
    if args.eps is not None:
        opts["eps"] = args.eps
    if preset == "tangent":
        opts.pop("rho"), opts.pop("eps")
        opts.update(PRESETS["tangent"])
    if args.adaptive_rho:
        opts.update(adaptive_rho=True, rho_mu=2.0, lam_init="adjoint")
    rows: dict[tuple[str, int, str], list[dict]] = {}
    for name in args.kernels:
        for n in ns:
            first = getattr(args, "first_trial", 0)
            for trial in range(first, first + trials):
                ds = synthetic_admm(name, n, seed=trial, noise=args.noise,
                                    device=args.device)
                for method in args.methods:
                    model = _model(name, ds, args.init_scale, args.init_noise, args.device,
                                   getattr(args, "fix_noise", False))
                    t0 = time.perf_counter()
                    try:
                        res = _fit(method, model, trial, opts)
                        fit_s = time.perf_counter() - t0
                        mean = (model.predict(ds.X_test)[0] if method in ("exact", "cv-optimum")
                                else cg_predict(model, ds.X_test))
                        mse = float(((mean - ds.y_test) ** 2).mean())
                        nlpd = _test_nlpd(model, ds)
                    except (RuntimeError, ValueError) as err:  # a failed fit is a result too
                        rec.record(kind="failed", kernel=name, n=n, trial=trial,
                                   method=method, error=f"{type(err).__name__}: {err}"[:300],
                                   fit_s=time.perf_counter() - t0)
                        continue
                    row = rec.record(kind="trial", kernel=name, n=n, trial=trial,
                                     method=method, **_estimates(name, model), test_mse=mse,
                                     test_rmse=math.sqrt(mse), test_nlpd=nlpd,
                                     fit_s=fit_s, iterations=len(res.history),
                                     stop_iters=_stop_iters(method, res),
                                     reason=res.reason)
                    rows.setdefault((name, n, method), []).append(row)
                    if method == "admm-hocv" and trial == 0 and n == ns[0]:
                        _convergence(rec, name, n, res)
    summary: dict[str, Any] = {"trials": trials, "n": ns, "eps": opts["eps"],
                               "max_iter": max_iter, "adaptive_rho": args.adaptive_rho,
                               "preset": preset, "tangent": preset == "tangent",
                               "fix_noise": getattr(args, "fix_noise", False)}
    for (name, n, method), rs in rows.items():
        est = {}
        for key in (*PARAMS[name], "noise"):
            vals = np.array([r[key] for r in rs])
            est[key] = f"{vals.mean():.3f} ({vals.std(ddof=1) if len(vals) > 1 else 0:.3f})"
        paper = PAPER_TABLE1.get(name, {}).get(n)
        ref = None
        if paper is not None:
            ref = paper[0] if method != "exact" else paper[1]
            ref_mse = paper[2] if method != "exact" else paper[3]
        stops = [i for r in rs for i in r["stop_iters"]]
        by_eps = [r["reason"] == "converged" for r in rs]
        z_se = None
        if paper is not None and method != "exact":
            # |our mean − paper mean| / standard error of the difference (paper: 50 trials)
            z_se = max(abs(np.mean([r[key] for r in rs]) - m)
                       / math.sqrt((np.std([r[key] for r in rs], ddof=1) ** 2 / len(rs)
                                    if len(rs) > 1 else 0.0) + sd ** 2 / 50)
                       for key, (m, sd) in zip(PARAMS[name], paper[0]))
            summary[f"zse_{method}_{name}_{n}"] = z_se
        rec.record(kind="table", kernel=name, n=n, method=method, **est,
                   median_iters=float(np.median(stops)), stopped_by_eps=float(np.mean(by_eps)),
                   z_se_paper=z_se,
                   test_mse=float(np.mean([r["test_mse"] for r in rs])),
                   test_rmse=float(np.mean([r["test_rmse"] for r in rs])),
                   test_nlpd=float(np.mean([r["test_nlpd"] for r in rs])),
                   fit_s=float(np.mean([r["fit_s"] for r in rs])),
                   paper=(", ".join(f"{m:.2f}({s:.3f})" for m, s in ref) if ref else None),
                   paper_mse=ref_mse if ref else None)
        if method == "admm-kfold":
            rec.target(f"median_iters_{name}_{n}", float(np.median(stops)), 19.0, "<=",
                       "median over trials and folds of the ADMM iterations, fewer than 20 "
                       "(admm-kfold; issue 57's target: Fig. 2 in the authors' slides "
                       "shows its runs descending for all 100 iterations)")
        if method == "admm-kfold" and paper is not None:
            true = PAPER_THETA[name]
            z = max(abs(np.mean([r[key] for r in rs]) - true[key]) / sd
                    for key, (_, sd) in zip(PARAMS[name], paper[0]))
            summary[f"z_{name}_{n}"] = z
            summary[f"paper_z_{name}_{n}"] = paper_z(name, n)
            rec.target(f"z_{name}_{n}", z, 2.0, "<=",
                       f"max over {', '.join(PARAMS[name])} of |mean − true| / paper std "
                       f"(admm-kfold, {len(rs)} trial(s); the paper's own GPCV-ADMM row: "
                       f"{paper_z(name, n):.3g})")
    rec.summary(**summary)
    met = [f"{k} n = {n}" for k, row in PAPER_TABLE1.items() for n in row
           if paper_z(k, n) <= 2.0]
    rec.note("paper_z_*: the targets' statistic on the paper's own GPCV-ADMM row (its "
             f"mean and std against the true value): ≤ 2 in {len(met)} of "
             f"{sum(map(len, PAPER_TABLE1.values()))} cells ({', '.join(met)}).")
    rec.note("σ² is held at 1 (the paper's Table 1 reports l and p only); the noise is "
             "estimated by every method. Estimates are in the kernels' own units.")
    if preset == "tangent":
        rec.note(f"Tangent θ-step (ours, not the paper's): {PRESETS['tangent']}; z moves "
                 "with θ "
                 "along the curve that holds the constraint residual, so ADMM stops on "
                 "the paper's ε = 1e-2 near the CV optimum.")
    else:
        rec.note(f"ADMM steps: preset {preset!r} ({PRESETS[preset] or 'the defaults'}); "
                 f"stop on ‖Δθ‖ < {opts['eps']:g}.")
    rec.note("z_se_paper: max over the kernel's l, p of |our mean − the paper's GPCV-ADMM "
             "mean| / sqrt(our std² / trials + paper std² / 50): ≤ 2 is 'within 2 standard "
             "errors of the paper's mean'.")
    rec.note("ρ: " + ("residual balancing (μ = 2, τ = 2, relative residuals) from "
                      f"ρ⁰ = {opts['rho']:g}, adjoint λ⁰" if args.adaptive_rho else
                      f"fixed ρ = {opts['rho']:g}, λ⁰ = "
                      + ("the adjoint" if args.tangent else "1 (the paper)")) + ".")
    if trials < 20:
        rec.note(f"{trials} trial(s) only (paper: 50): the std columns are rough.")
    if math.isfinite(args.noise) and args.noise != 0.1:
        rec.note(f"data noise variance {args.noise:g} (default 0.1).")
