"""``gpscale bench grief-uci``: GP-GRIEF-II and GP-GRIEF-I on the UCI sets, the protocol
of Evans & Nair (2018), §6 and Table 1.

Every set in ``../shared/data/uci`` (or ``--datasets``), its fixed 90/10 folds
(``--folds``), X and y standardised on each fold's training rows, SE-ARD base kernel,
m̄ = 10. GRIEF-II: p = min(1000, 10^⌊log10 n⌋), L-BFGS from the exact-GP ML-II
initialisation on min(n, 1000) points. GRIEF-I: p = 1000 (capped at m = Π m̄ᵢ), MALA
for 10 000 iterations over (w, σ²), first 1000 burnt, every 50th kept, θ fixed at the
initialisation. Test RMSE is on the original scale of y (the paper's unit); training
time includes the initialisation (and the MCMC for GRIEF-I), as in the paper.

The paper's Table 1 values are copied into :data:`PAPER_TABLE1` for comparison; the
target per set and method is |RMSE_ours − RMSE_paper| ≤ the paper's standard deviation.

``--quick``: 2 folds of the small sets (n ≤ 200), GRIEF-I with 2000 MCMC iterations.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from gpscale.features.grief import GRIDS

from .harness import register

#: Evans & Nair (2018), "Scalable Gaussian Processes with Grid-Structured Eigenfunctions
#: (GP-GRIEF)", ICML, Table 1 — the paper's numbers, keyed by gpscale's set names:
#: (p, time in hours, RMSE mean, RMSE std) for GRIEF-II and GRIEF-I, and the RMSE
#: (mean, std) of Yang et al. (2015). Not measured here; printed beside our results.
PAPER_TABLE1: dict[str, dict[str, tuple[float, ...]]] = {
    "challenger": {"ii": (10, 0.0, 0.554, 0.277), "i": (1000, 0.178, 0.519, 0.261),
                   "yang": (0.63, 0.26)},
    "fertility": {"ii": (100, 0.001, 0.172, 0.055), "i": (1000, 0.66, 0.166, 0.051),
                  "yang": (0.21, 0.05)},
    "concreteslump": {"ii": (100, 0.0, 3.972, 1.891), "i": (1000, 0.566, 3.470, 1.712),
                      "yang": (4.72, 2.42)},
    "autos": {"ii": (100, 0.007, 0.145, 0.057), "i": (1000, 0.604, 0.111, 0.036),
              "yang": (0.18, 0.07)},
    "servo": {"ii": (100, 0.0, 0.280, 0.085), "i": (1000, 0.265, 0.268, 0.075),
              "yang": (0.28, 0.09)},
    "breastcancer": {"ii": (100, 0.007, 27.843, 3.910), "i": (1000, 0.667, 30.568, 3.340),
                     "yang": (35.0, 4.0)},
    "machine": {"ii": (100, 0.0, 0.408, 0.046), "i": (1000, 0.637, 0.402, 0.045),
                "yang": (0.43, 0.04)},
    "autompg": {"ii": (100, 0.001, 2.607, 0.356), "i": (1000, 0.594, 2.563, 0.369),
                "yang": (2.63, 0.38)},
    "forest": {"ii": (100, 0.001, 1.386, 0.14), "i": (1000, 0.621, 1.384, 0.139),
               "yang": (1.39, 0.16)},
    "stock": {"ii": (100, 0.001, 0.005, 0.000), "i": (1000, 0.567, 0.005, 0.000),
              "yang": (0.005, 0.001)},
    "solar": {"ii": (1000, 0.003, 0.786, 0.198), "i": (1000, 0.628, 0.809, 0.193),
              "yang": (0.83, 0.20)},
    "skillcraft": {"ii": (1000, 0.011, 0.248, 0.016), "i": (1000, 0.573, 0.248, 0.016),
                   "yang": (0.25, 0.02)},
    "pumadyn32nm": {"ii": (1000, 0.156, 0.20, 0.00), "i": (1000, 0.645, 0.212, 0.004),
                    "yang": (0.20, 0.00)},
    "elevators": {"ii": (1000, 0.283, 0.091, 0.002), "i": (1000, 0.664, 0.097, 0.001),
                  "yang": (0.090, 0.001)},
    "kin40k": {"ii": (1000, 0.38, 0.206, 0.004), "i": (1000, 0.649, 0.206, 0.004),
               "yang": (0.28, 0.01)},
    "keggundirected": {"ii": (1000, 3.642, 0.118, 0.003), "i": (1000, 0.704, 0.134, 0.005),
                       "yang": (0.12, 0.00)},
}
METHODS = ("grief-ii", "grief-i")
#: besides GRIEF: "exact", the SE-ARD exact GP by ML-II on min(n, 1000) training points
#: (GRIEF's own initialisation, so for n ≤ 1000 the exact GP GRIEF-I starts from)
#: "grief-i-rotated": GRIEF-I with the weights on the rotated basis of §5 and the grid
#: of distinct values (the variant before eq. 16 became the default)
CHOICES = (*METHODS, "exact", "grief-i-rotated")
QUICK_MAX_N = 200


def _arguments(p) -> None:
    p.add_argument("--datasets", nargs="+", default=None,
                   help="UCI sets (default: every set found; --quick: those with n <= 200)")
    p.add_argument("--folds", type=int, default=None,
                   help="number of folds, the first k of the 10 (default 10; --quick 2)")
    p.add_argument("--first-fold", type=int, default=0,
                   help="start at this fold (default 0): runs folds first … first + k − 1")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=CHOICES,
                   help="grief-ii and/or grief-i (default both), and/or exact (the exact "
                   "GP of GRIEF's initialisation, on the same folds)")
    p.add_argument("--large-n", type=int, default=3000,
                   help="sets with more rows than this use --large-folds / --large-methods")
    p.add_argument("--large-folds", type=int, default=None,
                   help="folds for the large sets (default: --folds)")
    p.add_argument("--large-methods", nargs="+", default=None, choices=CHOICES,
                   help="methods for the large sets (default: --methods)")
    p.add_argument("--mcmc-iter", type=int, default=None,
                   help="GRIEF-I MALA iterations (default 10000, the paper's; --quick 2000)")
    p.add_argument("--burn", type=int, default=None,
                   help="GRIEF-I burn-in (default 1000; --quick 500)")
    p.add_argument("--thin", type=int, default=50, help="GRIEF-I thinning (default 50)")
    p.add_argument("--max-iter", type=int, default=100,
                   help="GRIEF-II L-BFGS iterations (default 100)")
    p.add_argument("--p-i", type=int, default=1000, help="GRIEF-I p (default 1000)")
    p.add_argument("--basis", default="eigen", choices=("eigen", "rotated"),
                   help="GRIEF-I weights on the eigenfunctions (eigen, eq. 16, default) or "
                   "on the rotated basis of §5 (rotated, at most n weights)")
    p.add_argument("--no-fill", action="store_true",
                   help="GRIEF-I: keep a column's grid at its distinct values when it has "
                   "fewer than m̄ (caps p at Π m̄ᵢ; the default spans m̄ points)")
    p.add_argument("--grid", default="uniform", choices=GRIDS,
                   help="grid placement per column: evenly spaced over its range "
                   "(uniform, default) or at evenly spaced quantiles (quantile)")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds; no new (set, fold) is started after this (default: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the init subset and MCMC")


def available_sets(names=None) -> list[tuple[str, int, int]]:
    """(name, n, d) of the UCI sets present, smallest first (ValueError on a bad name)."""
    from gpscale.data import UCI_ALIASES, UCI_NAMES
    from gpscale.data.sources import data_dir

    root = data_dir() / "uci"
    if names is None:
        names = [k for k in UCI_NAMES if (root / f"{k}.npz").exists()]
    out = []
    for name in names:
        key = UCI_ALIASES.get(name.lower(), name.lower())
        if key not in UCI_NAMES:
            raise ValueError(f"unknown UCI set {name!r}; choose from {list(UCI_NAMES)}")
        path = root / f"{key}.npz"
        if not path.exists():
            raise FileNotFoundError(f"UCI set {key!r} not found at {path} (set GPSCALE_DATA)")
        with np.load(path) as f:
            n, d = f["X"].shape
        out.append((key, int(n), int(d)))
    return sorted(out, key=lambda t: t[1])


def _rmse_orig(split, mean: torch.Tensor) -> float:
    from gpscale.metrics import rmse

    m = split.scaler.inverse_y(mean.detach().cpu().numpy())
    return rmse(split.scaler.inverse_y(split.y_test), m)


def run_fold(name: str, fold: int, method: str, args, device) -> dict:
    """One (set, fold, method): fit on the training part, RMSE on the test part."""
    from gpscale.data import load_uci
    from gpscale.train.grief import fit_grief_i, fit_grief_ii

    split = load_uci(name, fold, standardize=True)
    X = torch.as_tensor(split.X_train, dtype=torch.float64, device=device)
    y = torch.as_tensor(split.y_train, dtype=torch.float64, device=device)
    Xs = torch.as_tensor(split.X_test, dtype=torch.float64, device=device)
    row = {"kind": "fold", "dataset": name, "fold": fold, "method": method,
           "n_train": X.shape[0], "d": X.shape[1]}
    t0 = time.perf_counter()
    if method == "exact":
        from gpscale.kernels import Scale
        from gpscale.models import ExactGP
        from gpscale.train.grief import init_exact, separable_kernel

        theta = init_exact(X, y, "rbf", seed=args.seed + fold)
        sub = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(
            args.seed + fold))[:1000].to(X.device)  # init_exact's subset
        model = ExactGP(Scale(separable_kernel("rbf", X.shape[1], theta["lengthscale"]),
                              float(theta["outputscale"])), X[sub], y[sub],
                        noise=float(theta["noise"]), device=device)
        train_s = time.perf_counter() - t0
        mean, _ = model.predict(Xs)
        row.update(p=None, log10_m=None)
    elif method == "grief-ii":
        model, res = fit_grief_ii(X, y, m_bar=10, kernel="rbf", grid=args.grid,
                                  max_iter=args.max_iter,
                                  seed=args.seed + fold, device=device)
        train_s = time.perf_counter() - t0
        mean, _ = model.predict(Xs)
        row.update(p=model.features.num_features, log10_m=model.features.log10_m,
                   iters=len(res.history), evals=res.n_evals, reason=res.reason)
    else:
        rotated = method == "grief-i-rotated"
        basis = "rotated" if rotated else getattr(args, "basis", "eigen")
        fill = not (rotated or getattr(args, "no_fill", False))
        post, chain = fit_grief_i(X, y, p=args.p_i, m_bar=10, kernel="rbf", grid=args.grid,
                                  n_iter=args.mcmc_iter, burn=args.burn, thin=args.thin,
                                  basis=basis, fill=fill,
                                  seed=args.seed + fold, device=device)
        mcmc_s = chain.wall_s
        train_s = time.perf_counter() - t0
        mean, _ = post.predict(Xs)
        if basis == "eigen":
            lik = post.likelihood
            row.update(form=lik.form, k=lik.k)
        row.update(p=post.features.num_features, log10_m=post.features.log10_m,
                   basis=basis, mcmc_s=mcmc_s, s_per_iter=mcmc_s / args.mcmc_iter,
                   p_tilde=post.rank, accept=chain.acceptance_rate,
                   ess_min=float(chain.ess.min()), samples=chain.samples.shape[0])
    row.update(rmse=_rmse_orig(split, mean), train_s=train_s)
    return row


def _fmt_pm(mean: float, std: float) -> str:
    return f"{mean:.4g} ± {std:.3g}"


@register("grief-uci", help="GP-GRIEF-II / -I on the UCI sets: RMSE and time vs the paper's "
          "Table 1", add_arguments=_arguments, plot=lambda fig, recs, row: plot(fig, recs, row))
def run(args, rec) -> None:
    quick = args.quick
    folds = args.folds or (2 if quick else 10)
    args.mcmc_iter = args.mcmc_iter or (2000 if quick else 10_000)
    args.burn = args.burn if args.burn is not None else (500 if quick else 1000)
    sets = available_sets(args.datasets)
    if quick and args.datasets is None:
        sets = [s for s in sets if s[1] <= QUICK_MAX_N]
    if not sets:
        raise FileNotFoundError("no UCI set found (set GPSCALE_DATA)")
    large_folds = args.large_folds or folds
    first = args.first_fold
    for name, k in (("--folds", folds), ("--large-folds", large_folds)):
        if not 1 <= k or first < 0 or first + k > 10:
            raise ValueError(f"{name} = {k} from --first-fold {first} leaves the 10 folds "
                             "0 … 9; lower one of them")
    large_methods = args.large_methods or args.methods
    t_start = time.perf_counter()
    skipped: list[str] = []
    failed: list[str] = []
    results: dict[tuple[str, str], list[dict]] = {}
    for name, n, _d in sets:
        big = n > args.large_n
        methods = large_methods if big else args.methods
        for fold in range(first, first + (large_folds if big else folds)):
            over = (args.time_budget is not None
                    and time.perf_counter() - t_start > args.time_budget)
            if over:
                skipped.append(f"{name} fold {fold}")
                continue
            for method in methods:
                try:
                    row = run_fold(name, fold, method, args, args.device)
                except (ValueError, RuntimeError) as err:  # reported, not fatal
                    msg = " ".join(str(err).split())
                    row = {"kind": "fold", "dataset": name, "fold": fold, "method": method,
                           "rmse": None, "error": f"{type(err).__name__}: {msg}"[:300]}
                    failed.append(f"{name} fold {fold} {method}: {row['error']}")
                results.setdefault((name, method), []).append(rec.record(**row))
    _summarise(rec, results, args)
    rec.summary(folds=folds, first_fold=first, large_folds=large_folds, large_n=args.large_n,
                grid=args.grid,
                methods=list(args.methods), large_methods=list(large_methods),
                time_budget_s=args.time_budget, skipped=len(skipped))
    rec.summary(failed_fits=len(failed))
    for f in failed:
        rec.note(f"fit failed (excluded from the mean): {f}")
    if skipped:
        rec.note(f"time budget ({args.time_budget:g} s) reached; not run: "
                 + ", ".join(skipped))


def _summarise(rec, results: dict, args) -> None:
    per_set: dict[str, dict] = {}
    met_ii = met_i = total_ii = total_i = 0
    beats_i = [0, 0]  # GRIEF-I sets whose mean RMSE is below the exact GP's (Yang et al.)
    for (name, method), all_rows in results.items():
        rows = [x for x in all_rows if x.get("rmse") is not None]
        if not rows:
            rec.record(kind="per set", dataset=name, method=method, folds=0,
                       failed=len(all_rows))
            continue
        r = np.array([x["rmse"] for x in rows])
        t = np.array([x["train_s"] for x in rows])
        mean, std = float(r.mean()), float(r.std(ddof=1)) if len(r) > 1 else math.nan
        key = {"grief-ii": "ii", "grief-i": "i", "grief-i-rotated": "i"}.get(method, "yang")
        paper = PAPER_TABLE1.get(name, {}).get(key) if key != "yang" else None
        ok = None
        if paper is not None and method in METHODS:
            # within one paper standard deviation (its table rounds std to 3 decimals)
            tol = max(paper[3], 0.0005)
            ok = abs(mean - paper[2]) <= tol
            if key == "ii":
                total_ii, met_ii = total_ii + 1, met_ii + int(ok)
            else:
                total_i, met_i = total_i + 1, met_i + int(ok)
        yang = PAPER_TABLE1.get(name, {}).get("yang")
        beats = None if yang is None else bool(mean < yang[0])
        if beats is not None and method == "grief-i":
            beats_i[0], beats_i[1] = beats_i[0] + int(beats), beats_i[1] + 1
        rec.record(kind="per set", dataset=name, method=method, folds=len(rows),
                   failed=len(all_rows) - len(rows),
                   n_train=rows[0]["n_train"], d=rows[0]["d"], p=rows[0]["p"],
                   log10_m=rows[0]["log10_m"], rmse=_fmt_pm(mean, std), rmse_mean=mean,
                   rmse_std=std, train_s_mean=float(t.mean()),
                   paper_rmse=_fmt_pm(paper[2], paper[3]) if paper else None,
                   paper_train_s=paper[1] * 3600 if paper else None,
                   yang2015=_fmt_pm(*yang) if yang else None, within_paper_std=ok,
                   beats_exact_gp=beats)
        per_set[f"{name}/{method}"] = mean
    paired = [n for n in {k[0] for k in results}
              if f"{n}/grief-i" in per_set and f"{n}/exact" in per_set]
    if paired:  # GRIEF-I against the exact GP it starts from, on the same folds
        wins = sum(per_set[f"{n}/grief-i"] < per_set[f"{n}/exact"] for n in paired)
        rec.summary(grief_i_beats_own_exact_gp=f"{wins}/{len(paired)}")
    rec.summary(sets=sorted({k[0] for k in results}), rmse_mean=per_set,
                within_paper_std_ii=f"{met_ii}/{total_ii}", within_paper_std_i=f"{met_i}/{total_i}",
                grief_i_beats_exact_gp=f"{beats_i[0]}/{beats_i[1]}")
    if total_ii:
        rec.target("GRIEF-II sets within one paper std", met_ii / total_ii, 1.0, ">=",
                   "fraction of the sets run whose mean RMSE is within the paper's std")
    if total_i:
        rec.target("GRIEF-I sets within one paper std", met_i / total_i, 1.0, ">=",
                   "fraction of the sets run whose mean RMSE is within the paper's std")
    rec.note("paper values: Evans & Nair (2018), GP-GRIEF, ICML, Table 1 (their times are "
             "in hours on two E5-2680 v3; converted to seconds here); Yang et al. (2015) "
             "is the exact-GP / Fastfood column of the same table.")
    rec.note(f"GRIEF-I: {args.mcmc_iter} MALA iterations, burn {args.burn}, thin "
             f"{args.thin}; GRIEF-II: at most {args.max_iter} L-BFGS iterations.")


def plot(fig, records: list[dict], row: dict) -> None:
    """RMSE / paper RMSE per set (with the paper's ±1 std band) and training time."""
    rows = [r for r in records if r.get("kind") == "per set" and r.get("folds")]
    if not rows:
        return
    ax1, ax2 = fig.subplots(1, 2)
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    x = np.arange(len(names))
    for j, method in enumerate(METHODS):
        sel = {r["dataset"]: r for r in rows if r["method"] == method}
        key = "ii" if method == "grief-ii" else "i"
        xs, ratio, err, band, times = [], [], [], [], []
        for i, nm in enumerate(names):
            if nm not in sel:
                continue
            paper = PAPER_TABLE1.get(nm, {}).get(key)
            r = sel[nm]
            xs.append(i + (j - 0.5) * 0.3)
            times.append(r["train_s_mean"])
            if paper and paper[2] > 0:
                ratio.append(r["rmse_mean"] / paper[2])
                err.append((r["rmse_std"] or 0.0) / paper[2])
                band.append(paper[3] / paper[2])
            else:
                ratio.append(np.nan)
                err.append(0.0)
                band.append(np.nan)
        if not xs:
            continue
        ax1.errorbar(xs, ratio, yerr=err, fmt="o", capsize=2, label=f"{method} (ours)")
        ax1.errorbar(xs, np.ones(len(xs)), yerr=band, fmt="none", alpha=0.35, lw=6,
                     label=f"{method} paper ±1 std")
        ax2.bar(xs, times, width=0.3, label=method)
    for ax in (ax1, ax2):
        ax.set_xticks(x, names, rotation=60, fontsize=7)
        ax.legend(fontsize=7)
    ax1.axhline(1.0, color="k", lw=0.6)
    ax1.set_ylabel("RMSE / paper's RMSE (mean ± std over folds)")
    ax2.set_yscale("log")
    ax2.set_ylabel("training time per fold (s)")
