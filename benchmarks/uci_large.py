"""``gpscale bench uci-large``: every gpscale method at its defaults, and ``auto``, on the
large UCI sets (issue 21), against GPyTorch's SGPR and SVGP as their tutorials fit them.

Per set (kin40k, keggundirected, elevators, pumadyn32nm, skillcraft) and fold (the
GP-GRIEF splits, ``load_uci(name, fold=k)``), on the full training part (``--max-train``
caps it to a seeded random subset, ``--max-test`` the test rows):

* every method of :data:`gpscale.METHODS` and ``method="auto"`` through the public entry
  point, ``gpscale.fit(X, y, method=NAME, seed=0)`` on the raw columns (it
  standardises), timed as the wall time of the whole call; the methods with dense n × n
  matrices (``exact``, ``admm-*``) only where n ≤ ``--dense-max-n`` (a ``skip`` row with
  the memory and time they would need elsewhere);
* GPyTorch SGPR (512 inducing points at random training rows, ScaleKernel(RBF-ARD),
  Adam lr 0.1, 200 full-batch steps) and GPyTorch SVGP (500 learned inducing points,
  batches of 1024, Adam lr 0.01, 20 epochs) on the rows standardised on the training
  part, timed from model construction to the end of training.

Test RMSE and NLPD of y (noise included) in units of the training part's standard
deviation. Per set (mean over folds): each method's time, RMSE, NLPD and rank, the best
gpscale method by RMSE against GPyTorch SGPR, and ``auto`` against that best method
(``uci_large_report``). A fit that raises gives an ``error`` row and the run goes on.

``--resume FILE``: the JSON lines of an earlier run (its stdout, or its ``.jsonl``); its
``fit`` rows are recorded again as they are and those fits are not run again.
``--quick``: skillcraft fold 0 on 1500 training rows, ``rff``, ``svgp``, ``auto`` and
both peers (20 SGPR steps, 1 SVGP epoch).
"""

from __future__ import annotations

import gc
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch

from .harness import register
from .uci_exact import _metrics, _standardise
from .uci_large_report import plot, set_summary, summarise

SETS = ("kin40k", "keggundirected", "elevators", "pumadyn32nm", "skillcraft")
PEERS = ("gpytorch-sgpr", "gpytorch-svgp")
SGPR_M, SGPR_LR, SVGP_M, SVGP_LR, SVGP_BATCH = 512, 0.1, 500, 0.01, 1024
QUICK = {"sets": ["skillcraft"], "folds": [0], "max_train": 1500, "max_test": 1000,
         "methods": ["rff", "svgp", "auto"], "sgpr_steps": 20, "svgp_epochs": 1}


def dense(method: str) -> bool:
    """Whether ``method`` holds n × n matrices (run only up to ``--dense-max-n`` rows)."""
    return method == "exact" or method.startswith("admm-")


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=None, help=f"UCI sets (default: {SETS})")
    p.add_argument("--folds", type=int, default=None, help="folds 0..k-1 (default 3)")
    p.add_argument("--fold-list", type=int, nargs="+", default=None,
                   help="these folds instead of 0..k-1, e.g. --fold-list 0")
    p.add_argument("--max-train", type=int, default=None,
                   help="training rows cap, a seeded subset (default: all)")
    p.add_argument("--max-test", type=int, default=None, help="test rows cap (default: all)")
    p.add_argument("--methods", nargs="+", default=None,
                   help="gpscale methods and/or auto (default: every registered one + auto)")
    p.add_argument("--skip-methods", nargs="+", default=[], help="gpscale methods left out")
    p.add_argument("--peers", nargs="*", default=None, help=f"from {PEERS} (default: both)")
    p.add_argument("--dense-max-n", type=int, default=4000,
                   help="run exact and admm-* only where n_train <= this (4000)")
    p.add_argument("--sgpr-steps", type=int, default=None, help="GPyTorch SGPR Adam steps (200)")
    p.add_argument("--svgp-epochs", type=int, default=None, help="GPyTorch SVGP epochs (20)")
    p.add_argument("--resume", default=None, metavar="PATH",
                   help="JSON lines of an earlier run: its fit rows are kept, not refitted")
    p.add_argument("--report-only", action="store_true",
                   help="with --resume: fit nothing; fits missing from it get a skip row "
                        "saying they were not run (a report assembled from partial runs)")


def _options(args) -> dict:
    import gpscale

    q = QUICK if args.quick else {}
    o = {"sets": args.sets or q.get("sets") or list(SETS),
         "folds": args.fold_list or (list(range(args.folds)) if args.folds else None)
         or q.get("folds") or [0, 1, 2],
         "max_train": args.max_train or q.get("max_train"),
         "max_test": args.max_test or q.get("max_test"),
         "sgpr_steps": args.sgpr_steps or q.get("sgpr_steps", 200),
         "svgp_epochs": args.svgp_epochs or q.get("svgp_epochs", 20),
         "peers": list(PEERS) if args.peers is None else args.peers}
    known = [*gpscale.METHODS, "auto"]
    methods = args.methods or q.get("methods") or known
    bad = sorted(set(methods) - set(known)) + sorted(set(args.skip_methods) - set(known))
    bad += sorted(set(o["peers"]) - set(PEERS))
    if bad:
        raise ValueError(f"unknown methods/peers {bad}; methods: {known}, peers: {PEERS}")
    o["methods"] = [m for m in methods if m not in args.skip_methods]
    if args.report_only and not args.resume:
        raise ValueError("--report-only needs --resume FILE: the fits to report")
    if min(o["folds"]) < 0 or (o["max_train"] or 2) < 2 or args.dense_max_n < 0:
        raise ValueError("folds must be >= 0, --max-train >= 2, --dense-max-n >= 0")
    return o


def _split(name: str, fold: int, max_train: int | None, max_test: int | None):
    from gpscale.data import load_uci

    s = load_uci(name, fold=fold, standardize=False)
    rng = np.random.default_rng(1000 + fold)
    tr = rng.permutation(len(s.y_train))[:max_train] if max_train else slice(None)
    te = rng.permutation(len(s.y_test))[:max_test] if max_test else slice(None)
    return s.X_train[tr], s.y_train[tr], s.X_test[te], s.y_test[te]


def load_resume(path: str | Path | None) -> dict[tuple[str, int, str], dict]:
    """The ``fit`` rows of an earlier run's JSON lines by (set, fold, method); lines that
    are not JSON objects (a cut-off last line, other output) are ignored."""
    if path is None:
        return {}
    out = {}
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("kind") == "fit" and row.get("bench") in (
                None, "uci-large"):
            out[(row["set"], int(row["fold"]), row["method"])] = row
    return out


def _fit_gpscale(method, Xtr, ytr, Xte, my, sy) -> dict:
    import gpscale

    torch.manual_seed(0)
    t0 = time.perf_counter()
    pred = gpscale.fit(Xtr, ytr, method=method, seed=0)
    fit_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    mean, std = pred.predict(Xte, return_std=True)  # y's std, noise included
    out = {"mean": (mean - my) / sy, "var": (std / sy) ** 2, "fit_s": fit_s,
           "predict_s": time.perf_counter() - t1}
    res = pred.result
    if res is not None:
        out.update(iters=len(res.history), n_evals=res.n_evals, stop=res.reason)
    if method == "auto":
        c = pred.choice
        opts = ", ".join(f"{k}={v}" for k, v in c.options.items())
        out.update(picked=f"{c.method}{f' ({opts})' if opts else ''}", choice=str(c))
    return out


def _fit_peer(peer, Xs, ys, Xts, o) -> dict:
    from .peers import gpytorch_sgpr, gpytorch_svgp

    torch.manual_seed(0)
    X, y, Xt = (torch.as_tensor(a, dtype=torch.float64) for a in (Xs, ys, Xts))
    t0 = time.perf_counter()
    if peer == "gpytorch-sgpr":
        predict = gpytorch_sgpr(X, y, SGPR_M, o["sgpr_steps"], seed=0, lr=SGPR_LR,
                                mean="constant")
        info = {"m": SGPR_M, "iters": o["sgpr_steps"]}
    else:
        predict = gpytorch_svgp(X, y, SVGP_M, o["svgp_epochs"], seed=0, lr=SVGP_LR,
                                batch_size=SVGP_BATCH)
        info = {"m": SVGP_M, "epochs": o["svgp_epochs"]}
    fit_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    mean, var = predict(Xt)
    return {"mean": mean, "var": var, "fit_s": fit_s, "predict_s": time.perf_counter() - t1,
            **info}


def _guarded(fn, *a):
    """``fn(*a)`` with its warnings caught: (output or None, error text, warning names)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out, err = fn(*a), None
        except Exception as exc:  # noqa: BLE001 - recorded as an error row, run goes on
            traceback.print_exc(file=sys.stderr)
            out, err = None, f"{type(exc).__name__}: {exc}"
    return out, err, sorted({type(w.message).__name__ for w in caught})


def _skip_reason(n: int, limit: int) -> dict:
    from gpscale.methods.cost import exact_seconds

    gib, secs = 3 * 8.0 * n * n / 2**30, exact_seconds(n)
    return {"mem_gib": gib, "est_s": secs,
            "reason": f"n={n} > --dense-max-n={limit}: three n x n float64 matrices "
                      f"({gib:.3g} GiB) and about {secs / 3600:.3g} h for the exact GP's "
                      "fit (methods.auto.exact_seconds)"}


def _warm_up(methods, peers, o) -> None:
    """Fit every method and peer once on 200 synthetic rows (untimed, not recorded), so
    no timed fit pays the first call's imports and set-up."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = np.sin(X.sum(1)) + 0.1 * rng.standard_normal(200)
    small = {**o, "sgpr_steps": 2, "svgp_epochs": 1}
    for m in methods:
        _guarded(_fit_gpscale, m, X, y, X[:20], 0.0, 1.0)
    for p in peers:
        _guarded(_fit_peer, p, X, y, X[:20], small)


@register("uci-large", help="every gpscale method at its defaults and auto on the large UCI "
          "sets vs GPyTorch SGPR and SVGP (issue 21)", add_arguments=_arguments,
          plot=lambda *a: plot(*a))
def run(args, rec) -> None:
    from gpscale.data.sources import data_dir

    o = _options(args)
    found = [s for s in o["sets"] if (data_dir() / "uci" / f"{s}.npz").exists()]
    if len(found) < len(o["sets"]):
        rec.note(f"sets not found under {data_dir()}: {sorted(set(o['sets']) - set(found))}")
    peers = []
    if o["peers"]:
        try:
            import gpytorch  # noqa: F401
            peers = o["peers"]
        except ImportError as err:
            rec.note(f"GPyTorch peers skipped: {err} (install the 'bench' extra)")
    done = load_resume(args.resume)
    rec.summary(sets=found, folds=o["folds"], methods=o["methods"], peers=peers,
                max_train=o["max_train"], max_test=o["max_test"],
                dense_max_n=args.dense_max_n, sgpr_steps=o["sgpr_steps"],
                svgp_epochs=o["svgp_epochs"], resumed_from=args.resume)
    todo = [m for m in [*o["methods"], *peers]
            if any((s, f, m) not in done for s in found for f in o["folds"])]
    if not args.report_only:
        _warm_up([m for m in o["methods"] if m in todo], [p for p in peers if p in todo], o)
    per_set, resumed = [], 0
    for name in found:
        rows: list[dict] = []
        for fold in o["folds"]:
            Xtr, ytr, Xte, yte = _split(name, fold, o["max_train"], o["max_test"])
            Xs, ys, Xts, yts, my, sy = _standardise(Xtr, ytr, Xte, yte)
            base = {"set": name, "fold": fold, "n": len(ytr), "n_test": len(yte),
                    "d": Xtr.shape[1]}
            for method in [*peers, *o["methods"]]:  # the reference first
                family = "peer" if method in PEERS else "auto" if method == "auto" else \
                    "gpscale"
                old = done.get((name, fold, method))
                if old is not None:
                    if (old.get("n"), old.get("n_test")) != (base["n"], base["n_test"]):
                        raise ValueError(
                            f"--resume {args.resume}: {name} fold {fold} {method} was fitted "
                            f"on n={old.get('n')}, n_test={old.get('n_test')} rows, this run "
                            f"has n={base['n']}, n_test={base['n_test']} (other caps?)")
                    rows.append(rec.record(**old))
                    resumed += 1
                    continue
                if dense(method) and len(ytr) > args.dense_max_n:
                    rows.append(rec.record(kind="skip", **base, method=method, family=family,
                                           **_skip_reason(len(ytr), args.dense_max_n)))
                    continue
                if args.report_only:
                    rows.append(rec.record(kind="skip", **base, method=method, family=family,
                                           reason="not run: missing from --resume (the "
                                                  "report was assembled from partial runs)"))
                    continue
                if family == "peer":
                    out, err, caught = _guarded(_fit_peer, method, Xs, ys, Xts, o)
                else:
                    out, err, caught = _guarded(_fit_gpscale, method, Xtr, ytr, Xte, my, sy)
                if err is not None:
                    print(f"gpscale bench uci-large: {name} fold {fold} {method} failed: "
                          f"{err}", file=sys.stderr)
                    rows.append(rec.record(kind="error", **base, method=method,
                                           family=family, error=err, warnings=caught))
                    continue
                extra = {k: v for k, v in out.items() if k not in ("mean", "var")}
                rows.append(rec.record(kind="fit", **base, method=method, family=family,
                                       **_metrics(yts, out["mean"], out["var"]), **extra,
                                       warnings=caught))
                del out
                gc.collect()
        per_set.append(set_summary(rec, name, rows))
    rec.summary(resumed_fits=resumed)
    summarise(rec, per_set)
    rec.note("Times are wall times of the fit: gpscale, the whole gpscale.fit call on the "
             "raw columns (standardisation included); peers, model construction and "
             "training on the standardised rows. Before the timed fits every method and "
             "peer is fitted once on 200 synthetic rows (untimed). RMSE / NLPD of y (noise "
             "included) in units of the training part's standard deviation.")
    if resumed:
        rec.note(f"{resumed} fit rows were taken unchanged from {args.resume} (not refitted).")
