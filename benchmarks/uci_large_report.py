"""The per-set tables, summary, targets and plot of ``gpscale bench uci-large``
(:mod:`benchmarks.uci_large` runs the fits)."""

from __future__ import annotations

import math

import numpy as np

SGPR, SVGP = "gpytorch-sgpr", "gpytorch-svgp"
MARKERS = {"gpscale": ("o", "C0"), "auto": ("*", "C2"), SGPR: ("s", "C3"), SVGP: ("D", "C1")}


def _mean(rows, key, folds=None):
    vals = [r[key] for r in rows if r.get(key) is not None
            and (folds is None or r["fold"] in folds)]
    return float(np.mean(vals)) if vals else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def _diff(a, b):
    return a - b if a is not None and b is not None else None


def _matched(a: list[dict], b: list[dict], key: str):
    """Means of ``key`` over the folds both ``a`` and ``b`` have."""
    both = {r["fold"] for r in a} & {r["fold"] for r in b}
    return _mean(a, key, both), _mean(b, key, both)


def set_summary(rec, name: str, rows: list[dict]) -> dict:
    """Record one set's ``rank`` rows (every method ranked by mean test RMSE, skipped and
    failed methods last) and its ``set`` row; return the set row."""
    fits: dict[str, list[dict]] = {}
    for r in rows:
        if r["kind"] == "fit":
            fits.setdefault(r["method"], []).append(r)
    folds = {r["fold"] for r in rows if r["kind"] == "fit"}  # folds someone was fitted on
    mean = {m: {k: _mean(v, k) for k in ("fit_s", "rmse", "nlpd")} for m, v in fits.items()}
    family = {m: v[0].get("family") for m, v in fits.items()}
    # best gpscale method at its defaults: only methods that ran on every fold compete
    full = [m for m in fits if family[m] == "gpscale" and {r["fold"] for r in fits[m]} == folds]
    best = min(full, key=lambda m: mean[m]["rmse"], default=None)
    sgpr = fits.get(SGPR, [])
    ranked = sorted(fits, key=lambda m: mean[m]["rmse"])
    for i, m in enumerate(ranked, 1):
        picked = sorted({r["picked"] for r in fits[m] if r.get("picked")})
        rec.record(kind="rank", set=name, rank=i, method=m, folds=len(fits[m]),
                   fit_s=mean[m]["fit_s"], rmse=mean[m]["rmse"], nlpd=mean[m]["nlpd"],
                   **{"rmse/best": _ratio(*_matched(fits[m], fits.get(best, []), "rmse")),
                      "t/sgpr": _ratio(*_matched(fits[m], sgpr, "fit_s"))},
                   picked=", ".join(picked) or None)
    others = {}
    for r in rows:
        if r["kind"] in ("skip", "error") and r["method"] not in fits:
            others.setdefault(r["method"], f"{r['kind']}: {r.get('reason') or r.get('error')}")
    for m, why in others.items():
        rec.record(kind="rank", set=name, rank=None, method=m, folds=0, note=why)
    first = rows[0] if rows else {}
    out = {"set": name, "n": first.get("n"), "d": first.get("d"), "folds": len(folds),
           "best": best}
    if best is not None:
        out.update(best_s=mean[best]["fit_s"], best_rmse=mean[best]["rmse"],
                   best_nlpd=mean[best]["nlpd"])
    for peer, tag in ((SGPR, "sgpr"), (SVGP, "svgp")):
        if peer in mean:
            out.update({f"{tag}_s": mean[peer]["fit_s"], f"{tag}_rmse": mean[peer]["rmse"],
                        f"{tag}_nlpd": mean[peer]["nlpd"]})
    if best is not None and sgpr:
        b = fits[best]
        out["best_rmse/sgpr"] = _ratio(*_matched(b, sgpr, "rmse"))
        out["best_nlpd-sgpr"] = _diff(*_matched(b, sgpr, "nlpd"))
        out["best_t/sgpr"] = _ratio(*_matched(b, sgpr, "fit_s"))
    if "auto" in fits:
        out["auto_picked"] = ", ".join(sorted({r.get("picked") or "?" for r in fits["auto"]}))
        out["auto_rmse"] = mean["auto"]["rmse"]
        if best is not None:
            out["auto_rmse/best"] = _ratio(*_matched(fits["auto"], fits[best], "rmse"))
    out["skipped"] = sorted({r["method"] for r in rows if r["kind"] == "skip"}) or None
    out["errors"] = sorted({r["method"] for r in rows if r["kind"] == "error"}) or None
    return rec.record(kind="set", **out)


def summarise(rec, per_set: list[dict]) -> None:
    """Summary fields (max over sets) and the issue's four targets."""
    def worst(key):
        vals = [r[key] for r in per_set if r.get(key) is not None]
        return max(vals) if vals else None

    rec.summary(**{"best_per_set": {r["set"]: r.get("best") for r in per_set},
                   "auto_picked": {r["set"]: r.get("auto_picked") for r in per_set},
                   "best_rmse/sgpr_max": worst("best_rmse/sgpr"),
                   "best_nlpd-sgpr_max": worst("best_nlpd-sgpr"),
                   "best_t/sgpr_max": worst("best_t/sgpr"),
                   "auto_rmse/best_max": worst("auto_rmse/best")})
    f = rec.summary_fields
    rec.target("best gpscale RMSE / GPyTorch SGPR's (max over sets)", f["best_rmse/sgpr_max"],
               1.0, what="best gpscale method at its defaults (by RMSE, mean over folds)")
    rec.target("best gpscale NLPD - GPyTorch SGPR's (max over sets)", f["best_nlpd-sgpr_max"],
               0.02, what="the same method's NLPD")
    rec.target("best gpscale fit time / GPyTorch SGPR's (max over sets)", f["best_t/sgpr_max"],
               0.5, what="the same method's fit wall time")
    rec.target("auto RMSE / best gpscale method's (max over sets)", f["auto_rmse/best_max"],
               1.03, what="method='auto' within 3 % of the best method, every set")
    if not any(r.get("best_rmse/sgpr") is not None for r in per_set):
        rec.note("no set has both a gpscale method on every fold and GPyTorch SGPR: the "
                 "targets against SGPR are not evaluated")


def plot(fig, records, summary) -> None:
    """Per set: mean fit time (log x) against mean test RMSE, one labelled point a method."""
    pts: dict[str, dict[str, list[dict]]] = {}
    for r in records:
        if r.get("kind") == "fit":
            pts.setdefault(r["set"], {}).setdefault(r["method"], []).append(r)
    sets = list(pts)
    if not sets:
        ax = fig.add_subplot(111)
        ax.axis("off")
        ax.text(0.5, 0.5, "no fits", ha="center")
        return
    cols = min(3, len(sets))
    rows = math.ceil(len(sets) / cols)
    fig.set_size_inches(5.2 * cols, 4.2 * rows)
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax, name in zip(axes, sets):
        seen = set()
        for m, rs in pts[name].items():
            fam = rs[0].get("family", "gpscale")
            style = MARKERS.get(m) or MARKERS.get(fam, MARKERS["gpscale"])
            x, y = _mean(rs, "fit_s"), _mean(rs, "rmse")
            if x is None or y is None:
                continue
            label = {"peer": m, "auto": "auto"}.get(fam, "gpscale methods")
            ax.plot([x], [y], style[0], color=style[1], ms=11 if fam == "auto" else 7,
                    label=None if label in seen else label)
            seen.add(label)
            picked = sorted({r["picked"] for r in rs if r.get("picked")})
            text = f"{m} ({', '.join(picked)})" if picked else m
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
        ax.set(xscale="log", xlabel="fit time (s, mean of folds)", ylabel="test RMSE (std units)",
               title=f"{name} (n={rs[0].get('n')}, d={rs[0].get('d')})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[len(sets):]:
        ax.axis("off")
