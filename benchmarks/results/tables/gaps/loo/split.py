"""One table of `bench tables`, one seed: the test rows' RMSE and 95 % coverage split by
their gaps (complete rows, each gap column), predicted by the same model with its
leave-one-out widening (gap_loo, the library's) and without it (gap_loo=None): a
paired before/after of the widening on one fit.

python split.py TABLE REMOVE WORKDIR [MODEL.pt]
MODEL.pt: a saved model to score instead of fitting (as `bench tables` fits: method
and kernel auto); one written before gap_loo existed gets its α computed here by the
library's own function at the model's θ. Prints JSON.
"""
import copy
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, ".")  # run from the checkout root
warnings.simplefilter("ignore")
import gpscale  # noqa: E402
from benchmarks.tables import TABLES, Z95, _split  # noqa: E402
from gpscale.api import _gap_loo  # noqa: E402
from gpscale.io import prediction_source  # noqa: E402

name, remove, work = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
work.mkdir(parents=True, exist_ok=True)
target, exclude = TABLES[name]
train, test = _split(name, 0, None, work, remove)
out = {"table": name, "remove_cells": remove}
if len(sys.argv) > 4:
    p = gpscale.load(sys.argv[4])
    out["model"] = sys.argv[4]
    if p.gap_loo is None:
        p.gap_loo = _gap_loo(p.model)
        out["gap_loo_computed_here"] = True
else:
    import time
    t0 = time.perf_counter()
    p = gpscale.fit(str(train), target=target, method="auto", kernel="auto",
                    exclude=list(exclude))  # as bench tables' gpscale-auto
    out["fit_s"] = time.perf_counter() - t0
    p.save(work / f"{name}-{remove}.pt")
out["method"], out["kernel"] = p.method, p.kernel_name
out["fit"] = str(p.result)
cols = p.inputs.gap_columns()
names = [p.inputs.names[c] for c in cols]
if p.gap_loo is not None:
    out["alpha"] = {n: {"alpha": float(p.gap_loo[0, c]), "rows": int(p.gap_loo[1, c])}
                    for c, n in zip(cols, names)}
y = pd.read_csv(test)[target].to_numpy()
X = np.concatenate([b.X for b in prediction_source(p, str(test)).batches()])
ok = np.isfinite(y)
plain = copy.copy(p)
plain.gap_loo = None
y_std = float(pd.read_csv(train)[target].std(ddof=0))
for way, pred in (("without widening", plain), ("widened by alpha", p)):
    m, s = pred.predict_encoded(X, return_std=True)
    z = (y - m) / s
    inside = np.abs(z) <= Z95
    res = {}
    groups = [("all", ok), ("complete", ok & (X[:, cols] == 0).all(axis=1) if cols else ok),
              ("with a gap", ok & (X[:, cols] == 1).any(axis=1) if cols else ok & False)]
    groups += [(f"gap {n}", ok & (X[:, c] == 1)) for c, n in zip(cols, names)]
    for label, rows in groups:
        if rows.sum():
            res[label] = {"n": int(rows.sum()), "coverage": float(inside[rows].mean()),
                          "rmse": float(np.sqrt(np.mean((y[rows] - m[rows]) ** 2))),
                          "median_std": float(np.median(s[rows]))}
    res["all"]["nlpd"] = float(np.mean(0.5 * np.log(2 * np.pi * (s[ok] / y_std) ** 2)
                                       + 0.5 * z[ok] ** 2))
    out[way] = res
print(json.dumps(out, indent=1))
