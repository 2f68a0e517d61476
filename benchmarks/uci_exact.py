"""``gpscale bench uci-exact``: the exact GP as users meet it, on every UCI set.

For each UCI set (training part of a fold capped at ``--max-train`` rows, a seeded
random subset; test rows capped at ``--max-test``), ``gpscale.fit(X, y,
method="exact", ...)`` on the raw columns (the public entry point: it standardises)
with its defaults and with each ``prior=`` option, against the peers on the same rows
standardised on the training part: GPyTorch's tutorial recipe (Adam lr 0.1, 150 steps),
scikit-learn's GaussianProcessRegressor (ConstantKernel * RBF-ARD + WhiteKernel,
normalize_y, 2 optimiser restarts) and BoTorch's SingleTaskGP + fit_gpytorch_mll. Fit
wall time, test RMSE and NLPD of y in standardised units (all methods predict y with
noise). Per set: the mean over folds, the time ratios to GPyTorch and scikit-learn,
RMSE over the best peer's and NLPD minus the best peer's.

``--quick``: challenger and servo, one fold, no scikit-learn.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch

from .harness import register

PEERS = ("gpytorch", "sklearn", "botorch")
#: the gpscale configurations: label -> options of gpscale.fit(method="exact")
CONFIGS = {"gpscale": {}, "gpscale-botorch": {"prior": "botorch"}}
QUICK_SETS = ("challenger", "servo")


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=None, help="UCI sets (default: all found)")
    p.add_argument("--folds", type=int, default=None, help="folds 0..k-1 (default 3; quick 1)")
    p.add_argument("--max-train", type=int, default=2000, help="training rows cap (2000)")
    p.add_argument("--max-test", type=int, default=5000, help="test rows cap (5000)")
    p.add_argument("--peers", nargs="*", default=None,
                   help=f"peers to run, from {PEERS} (default: all; quick: gpytorch botorch)")
    p.add_argument("--configs", nargs="+", default=None,
                   help=f"gpscale configurations, from {sorted(CONFIGS)} (default: all)")
    p.add_argument("--sklearn-max-n", type=int, default=None,
                   help="run scikit-learn only where n_train <= this (default: always)")
    p.add_argument("--large-n", type=int, default=None,
                   help="sets with more training rows than this run only --large-folds folds")
    p.add_argument("--large-folds", type=int, default=1, help="folds of large sets (1)")
    p.add_argument("--gpytorch-iters", type=int, default=150, help="Adam steps (150)")


def _split(name: str, fold: int, max_train: int, max_test: int):
    from gpscale.data import load_uci

    s = load_uci(name, fold=fold, standardize=False)
    rng = np.random.default_rng(1000 + fold)
    tr = rng.permutation(len(s.X_train))[:max_train]
    te = rng.permutation(len(s.X_test))[:max_test]
    return s.X_train[tr], s.y_train[tr], s.X_test[te], s.y_test[te]


def _standardise(Xtr, ytr, Xte, yte):
    mx, sx = Xtr.mean(0), Xtr.std(0)
    sx = np.where(sx > 0, sx, 1.0)
    my, sy = ytr.mean(), ytr.std()
    return (Xtr - mx) / sx, (ytr - my) / sy, (Xte - mx) / sx, (yte - my) / sy, my, sy


def _metrics(y, mean, var) -> dict[str, float]:
    mean = mean.detach().cpu().numpy() if hasattr(mean, "detach") else np.asarray(mean)
    var = var.detach().cpu().numpy() if hasattr(var, "detach") else np.asarray(var)
    var = np.maximum(var, 1e-12)
    r = y - mean
    return {"rmse": float(np.sqrt(np.mean(r * r))),
            "nlpd": float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * r * r / var))}


def _fit_gpscale(opts, Xtr, ytr, Xte, my, sy) -> dict:
    import gpscale

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = gpscale.fit(Xtr, ytr, method="exact", **opts)
    fit_s = time.perf_counter() - t0
    mean, std = pred.predict(Xte, return_std=True)
    res = pred.result
    return {"mean": (mean - my) / sy, "var": (std / sy) ** 2, "fit_s": fit_s,
            "n_evals": res.n_evals, "iters": len(res.history), "stop": res.reason,
            "warnings": sorted({type(w.message).__name__ for w in caught})}


def _fit_peer(peer, Xs, ys, Xts, args) -> dict:
    from . import peers

    if peer == "sklearn":
        return peers.sklearn_recipe(Xs, ys, Xts, restarts=2)
    X = torch.as_tensor(Xs, dtype=torch.float64)
    y = torch.as_tensor(ys, dtype=torch.float64)
    Xt = torch.as_tensor(Xts, dtype=torch.float64)
    if peer == "gpytorch":
        return peers.gpytorch_recipe(X, y, Xt, iters=args.gpytorch_iters)
    return peers.botorch_single_task(X, y, Xt)


def _available(names, peers, rec) -> tuple[list[str], list[str]]:
    from gpscale.data.sources import data_dir

    found = [s for s in names if (data_dir() / "uci" / f"{s}.npz").exists()]
    if len(found) < len(names):
        rec.note(f"sets not found under {data_dir()}: {sorted(set(names) - set(found))}")
    mods = {"gpytorch": "gpytorch", "sklearn": "sklearn", "botorch": "botorch"}
    ok = []
    for p in peers:
        try:
            __import__(mods[p])
            ok.append(p)
        except ImportError as err:
            rec.note(f"peer {p} skipped: {err} (install the 'bench' extra)")
    return found, ok


@register("uci-exact", help="exact GP via gpscale.fit on 16 UCI sets (<= 2000 rows) vs "
          "GPyTorch's recipe, scikit-learn and BoTorch", add_arguments=_arguments,
          plot=lambda *a: _plot(*a))
def run(args, rec) -> None:
    from gpscale.data.loaders import UCI_NAMES

    sets = args.sets or (list(QUICK_SETS) if args.quick else list(UCI_NAMES))
    folds = args.folds or (1 if args.quick else 3)
    peers = args.peers if args.peers is not None else (
        ["gpytorch", "botorch"] if args.quick else list(PEERS))
    configs = args.configs or list(CONFIGS)
    bad = sorted(set(peers) - set(PEERS)) + sorted(set(configs) - set(CONFIGS))
    if bad or folds < 1 or args.max_train < 2:
        raise ValueError(f"unknown peers/configs {bad}, or --folds < 1 / --max-train < 2")
    sets, peers = _available(sets, peers, rec)
    rec.summary(sets=len(sets), folds=folds, max_train=args.max_train, peers=peers,
                configs=configs)
    rec.note("All fits on the same rows; times are fit wall times (gpscale: the whole "
             "gpscale.fit call on raw data, standardisation included; peers: model "
             "construction + optimisation on standardised data). RMSE/NLPD of y in units "
             "of the training part's standard deviation.")
    _warm_up(configs, peers, args)
    rec.note("Before the timed fits, each configuration and peer fitted once on 30 rows "
             "(untimed), so no fit pays the first call's imports and kernel set-up.")
    per_set = []
    for name in sets:
        rows: dict[str, list[dict]] = {}
        for fold in range(folds):
            Xtr, ytr, Xte, yte = _split(name, fold, args.max_train, args.max_test)
            if args.large_n and len(ytr) > args.large_n and fold >= args.large_folds:
                continue
            Xs, ys, Xts, yts, my, sy = _standardise(Xtr, ytr, Xte, yte)
            runs = {}
            for c in configs:
                runs[c] = _fit_gpscale(CONFIGS[c], Xtr, ytr, Xte, my, sy)
            for p in peers:
                if p == "sklearn" and args.sklearn_max_n and len(ytr) > args.sklearn_max_n:
                    continue
                runs[p] = _fit_peer(p, Xs, ys, Xts, args)
            for method, out in runs.items():
                row = rec.record(kind="fit", set=name, fold=fold, n=len(ytr),
                                 d=Xtr.shape[1], method=method, fit_s=out["fit_s"],
                                 **_metrics(yts, out["mean"], out["var"]),
                                 **{k: out[k] for k in ("iters", "n_evals", "stop",
                                                        "warnings") if k in out})
                rows.setdefault(method, []).append(row)
        per_set.append(_set_row(rec, name, rows, configs))
    _summarise(rec, per_set, configs)


def _warm_up(configs, peers, args) -> None:
    """Fit every configuration and peer once on 30 synthetic rows (not recorded)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    y = np.sin(X.sum(1)) + 0.1 * rng.standard_normal(30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in configs:
            _fit_gpscale(CONFIGS[c], X, y, X[:5], 0.0, 1.0)
        for p in peers:
            _fit_peer(p, X, y, X[:5], args)


def _mean(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def _set_row(rec, name, rows, configs) -> dict:
    m = {k: {f: _mean(v, f) for f in ("fit_s", "rmse", "nlpd")} for k, v in rows.items()}
    folds = {k: {r["fold"] for r in v} for k, v in rows.items()}

    def matched_time(c, p):  # mean times over the folds both ran
        both = folds[c] & folds[p]
        return (_mean([r for r in rows[c] if r["fold"] in both], "fit_s"),
                _mean([r for r in rows[p] if r["fold"] in both], "fit_s"))
    peer = [p for p in PEERS if p in m]
    best_rmse = min((m[p]["rmse"] for p in peer), default=None)
    best_nlpd = min((m[p]["nlpd"] for p in peer), default=None)
    any_rows = next(iter(rows.values()))
    out = {"set": name, "n": any_rows[0]["n"], "d": any_rows[0]["d"],
           "folds": len(folds[configs[0]])}
    for p in peer:
        out[f"{p}_s"] = m[p]["fit_s"]
    out["best_peer_rmse"], out["best_peer_nlpd"] = best_rmse, best_nlpd
    for c in configs:
        tag = c.replace("gpscale", "gs")
        out[f"{tag}_s"] = m[c]["fit_s"]
        out[f"{tag}_rmse"], out[f"{tag}_nlpd"] = m[c]["rmse"], m[c]["nlpd"]
        for p in ("gpytorch", "sklearn"):
            if p in m:
                mine, theirs = matched_time(c, p)
                out[f"{tag}_t/{p}"] = mine / theirs
        if best_rmse is not None:
            out[f"{tag}_rmse/best"] = m[c]["rmse"] / best_rmse
            out[f"{tag}_nlpd-best"] = m[c]["nlpd"] - best_nlpd
    return rec.record(kind="set", **out)


def _summarise(rec, per_set, configs) -> None:
    def col(tag, key):
        return [r[f"{tag}_{key}"] for r in per_set if r.get(f"{tag}_{key}") is not None]

    for c in configs:
        tag = c.replace("gpscale", "gs")
        tg, ts = col(tag, "t/gpytorch"), col(tag, "t/sklearn")
        rr, nd = col(tag, "rmse/best"), col(tag, "nlpd-best")
        fields = {
            f"{tag}_t/gpytorch_max": max(tg, default=None),
            f"{tag}_t/gpytorch_median": float(np.median(tg)) if tg else None,
            f"{tag}_t/sklearn_max": max(ts, default=None),
            f"{tag}_rmse/best_max": max(rr, default=None),
            f"{tag}_rmse_within_3pct": float(np.mean([v <= 1.03 for v in rr])) if rr else None,
            f"{tag}_nlpd-best_max": max(nd, default=None),
            f"{tag}_nlpd_within_0.05": float(np.mean([v <= 0.05 for v in nd])) if nd else None,
            f"{tag}_sets_timed_vs_sklearn": len(ts),
        }
        rec.summary(**fields)
        if c != "gpscale":
            continue
        f = rec.summary_fields
        rec.target("time/gpytorch (max over sets)", f[f"{tag}_t/gpytorch_max"], 0.5,
                   what="gpscale default fit time / GPyTorch recipe's, every set")
        rec.target("time/sklearn (max over sets)", f[f"{tag}_t/sklearn_max"], 0.1,
                   what="gpscale default fit time / scikit-learn's, every set timed")
        rec.target("share of sets with RMSE <= 1.03 x best peer",
                   f[f"{tag}_rmse_within_3pct"], 0.9, op=">=")
        rec.target("RMSE / best peer (max over sets)", f[f"{tag}_rmse/best_max"], 1.10)
        rec.target("share of sets with NLPD <= best peer + 0.05",
                   f[f"{tag}_nlpd_within_0.05"], 0.9, op=">=")
        rec.target("NLPD - best peer (max over sets)", f[f"{tag}_nlpd-best_max"], 0.2)


def _plot(fig, records, summary) -> None:
    sets = [r for r in records if r.get("kind") == "set"]
    axes = fig.subplots(1, 2)
    for ax, peer in zip(axes, ("gpytorch", "sklearn")):
        drawn = False
        for c, style in zip(CONFIGS, ("o", "s", "^")):
            tag = c.replace("gpscale", "gs")
            pts = [(r[f"{tag}_t/{peer}"], r[f"{tag}_rmse/best"]) for r in sets
                   if r.get(f"{tag}_t/{peer}") is not None and r.get(f"{tag}_rmse/best")]
            if pts:
                ax.plot(*zip(*pts), style, label=c, alpha=0.75, markerfacecolor="none")
                drawn = True
        ax.axhline(1.03, color="grey", lw=0.8, ls="--")
        ax.axvline(0.5 if peer == "gpytorch" else 0.1, color="grey", lw=0.8, ls=":")
        ax.set(xscale="log", xlabel=f"fit time / {peer}'s", ylabel="test RMSE / best peer's",
               title=f"per set (mean of folds): time vs {peer}")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
