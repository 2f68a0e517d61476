"""Fig. 3(c)/(f) table from cholqr-discrete's JSON lines: per method the mean test SMSE,
SNLP, training time, bound and epochs over the splits, and each CholQR variant's SMSE
paired by split against every baseline (mean difference, its standard error, wins).

    python benchmarks/results/cholqr-pivots/analyse.py PATH/cholqr-discrete.jsonl
"""

import json
import sys

import numpy as np

rows = [json.loads(x) for x in open(sys.argv[1])]
runs = [r for r in rows if r.get("kind") == "run"]
methods = list(dict.fromkeys(r["method"] for r in runs))
by = {(r["method"], r["split"]): r for r in runs}
splits = sorted({r["split"] for r in runs})
print("| method | splits | test SMSE (mean ± sd) | SNLP | train s (mean, min–max) "
      "| bound (nats) | epochs | stop |")
print("|---|---|---|---|---|---|---|---|")
for m in methods:
    rs = [by[(m, s)] for s in splits if (m, s) in by]
    sm = np.array([r["smse"] for r in rs])
    t = np.array([r["fit_s"] for r in rs])
    reasons = sorted({r["reason"] for r in rs})
    sd = sm.std(ddof=1) if len(sm) > 1 else 0.0
    snlp = np.mean([r["snlp"] for r in rs])
    obj = np.mean([r["objective"] for r in rs])
    ep = np.mean([r["epochs"] for r in rs])
    print(f"| {m} | {len(rs)} | {sm.mean():.4f} ± {sd:.4f} | {snlp:.3f} | "
          f"{t.mean():.2f} ({t.min():.2f}–{t.max():.2f}) | {obj:.1f} | {ep:.1f} | "
          f"{', '.join(reasons)} |")
base = [m for m in methods if not m.startswith("cholqr")]
var = [m for m in methods if m.startswith("cholqr")]
print()
print("SMSE(variant) − SMSE(baseline), paired by split: mean ± standard error "
      "(variant lower in k of n splits)")
print()
print("| variant | " + " | ".join(base) + " |")
print("|---|" + "---|" * len(base))
for v in var:
    cells = []
    for b in base:
        d = np.array([by[(v, s)]["smse"] - by[(b, s)]["smse"] for s in splits
                      if (v, s) in by and (b, s) in by])
        se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
        cells.append(f"{d.mean():+.4f} ± {se:.4f} ({int((d < 0).sum())}/{len(d)})")
    print(f"| {v} | " + " | ".join(cells) + " |")
