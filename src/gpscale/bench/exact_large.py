"""``gpscale bench exact-large``: the exact GP on every training row of the large UCI sets
(issue 30) against ``sgpr`` and GPyTorch's SGPR.

Per set and fold (the GP-GRIEF splits, full training part unless ``--max-train``):
``gpscale.fit(X, y, method="exact")`` at its defaults (past the size guard: θ from a
row sample, the posterior on every row by preconditioned CG), ``sgpr`` and ``auto``
through the same entry point, each timed as the whole call; prediction timed apart.
Recorded: test RMSE and NLPD of y in units of the training part's standard deviation,
the coverage of the central 95 % predictive interval, fit and predict seconds, the CG
iterations and residual, and the process's peak RSS so far (it only grows: a later
row's value bounds every fit before it). Rows of methods whose code has not changed
since the ``uci-large`` report (GPyTorch SGPR, ``sgpr``: ``--reuse``) are taken from its
JSON lines (``--peer-rows``) for the same set and fold, not refitted.
"""

from __future__ import annotations

import json
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from .harness import register
from .uci_exact import _standardise
from .uci_large import _split

SETS = ("kin40k", "keggundirected", "elevators", "pumadyn32nm", "skillcraft")
METHODS = ("exact", "sgpr", "auto")
REUSE = ("gpytorch-sgpr", "sgpr")
PEER_ROWS = "benchmarks/results/uci-large/uci-large.jsonl"


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=list(SETS), help=f"UCI sets ({SETS})")
    p.add_argument("--fold-list", type=int, nargs="+", default=[0, 1, 2], help="folds")
    p.add_argument("--methods", nargs="+", default=["exact"], help=f"from {METHODS}")
    p.add_argument("--reuse", nargs="*", default=list(REUSE),
                   help="methods whose rows come from --peer-rows instead of a fit")
    p.add_argument("--max-train", type=int, default=None, help="training rows cap")
    p.add_argument("--max-test", type=int, default=None, help="test rows cap")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option for method exact (e.g. precond_rank=500)")
    p.add_argument("--peer-rows", default=PEER_ROWS,
                   help="JSON lines with earlier fit rows (uci-large's)")


def _peer_rows(path: str, methods) -> dict[tuple[str, int, str], dict]:
    out: dict[tuple[str, int, str], dict] = {}
    if not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("kind") == "fit" and row.get("method") in methods:
            out[(row["set"], int(row["fold"]), row["method"])] = row
    return out


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _one(method: str, options: dict, Xtr, ytr, Xte, yte, my: float, sy: float) -> dict:
    import gpscale

    opts = options if method == "exact" else {}
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = gpscale.fit(Xtr, ytr, method=method, seed=0, **opts)
        fit_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        mean, std = pred.predict(Xte, return_std=True, include_noise=True)
        predict_s = time.perf_counter() - t1
    mean, std = (mean - my) / sy, std / sy
    r = (yte - my) / sy - mean
    var = np.maximum(std**2, 1e-12)
    last = pred.result.history[-1] if pred.result.history else {}
    return {"rmse": float(np.sqrt(np.mean(r * r))),
            "nlpd": float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * r * r / var)),
            "coverage95": float(np.mean(np.abs(r) <= 1.959964 * std)),
            "fit_s": fit_s, "predict_s": predict_s, "model": type(pred.model).__name__,
            "picked": str(pred.choice.method) if pred.choice else None,
            "cg_iterations": last.get("iterations"), "cg_residual": last.get("residual"),
            "peak_rss_gib": _peak_rss_gib(),
            "warnings": sorted({str(w.message)[:160] for w in caught})}


@register("exact-large", help="the exact GP on every row of the large UCI sets vs sgpr and "
          "GPyTorch SGPR (issue 30)", add_arguments=_arguments)
def run(args, rec) -> None:
    from ..data.sources import data_dir
    from ..methods.options import parse_option
    from ..methods.registry import get_method

    options = dict(parse_option(get_method("exact"), t) for t in args.option)
    peers = _peer_rows(args.peer_rows, args.reuse)
    found = [s for s in args.sets if (data_dir() / "uci" / f"{s}.npz").exists()]
    rec.summary(sets=found, folds=args.fold_list, methods=args.methods, options=options,
                max_train=args.max_train, peer_rows=args.peer_rows)
    by: dict[tuple[str, str], list[dict]] = {}
    for name in found:
        for fold in args.fold_list:
            Xtr, ytr, Xte, yte = _split(name, fold, args.max_train, args.max_test)
            *_, my, sy = _standardise(Xtr, ytr, Xte, yte)
            base = {"set": name, "fold": fold, "n": len(ytr), "n_test": len(yte),
                    "d": Xtr.shape[1]}
            for method in args.reuse:
                peer = peers.get((name, fold, method))
                if peer is None or args.max_train is not None:
                    continue
                row = {k: peer.get(k) for k in ("rmse", "nlpd", "fit_s", "predict_s")}
                by.setdefault((name, method), []).append(
                    rec.record(kind="fit", **base, method=method, reused=args.peer_rows,
                               **row))
            for method in args.methods:
                try:
                    out = _one(method, options, Xtr, ytr, Xte, yte, my, sy)
                except Exception as err:  # noqa: BLE001 - a failed fit is a row
                    print(f"exact-large: {name} fold {fold} {method}: {err}", file=sys.stderr)
                    rec.record(kind="error", **base, method=method, error=str(err))
                    continue
                by.setdefault((name, method), []).append(
                    rec.record(kind="fit", **base, method=method, **out))
    for name in found:
        mean = {m: float(np.mean([r["rmse"] for r in rows]))
                for (s, m), rows in by.items() if s == name}
        rec.summary(**{f"rmse_{name}_{m}": v for m, v in mean.items()})
        if "exact" in mean and "sgpr" in mean:
            ratio = mean["exact"] / mean["sgpr"]
            rec.target(f"rmse_exact_over_sgpr_{name}", ratio, 0.6 if name == "kin40k" else 1.01,
                       what="mean test RMSE over the folds run, exact / sgpr")
