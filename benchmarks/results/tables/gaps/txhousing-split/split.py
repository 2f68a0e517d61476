"""txhousing fold 0 with 10 % of numeric cells removed: the exact GP (Matern-5/2 ARD, 40
L-BFGS iterations) scored on complete and gapped test rows apart."""
import sys, json, warnings
import numpy as np, pandas as pd
from pathlib import Path
sys.path.insert(0, "."); warnings.simplefilter("ignore")  # run from the checkout root
import gpscale
from benchmarks.tables import _split
from gpscale.io import prediction_source
train, test = _split("txhousing", 0, None, Path(sys.argv[1] if len(sys.argv) > 1 else "."), 0.1)
p = gpscale.fit(str(train), target="median", method="exact", kernel="matern52-ard", max_iter=40, seed=0)
m, s = [], []
for b in prediction_source(p, str(test)).batches():
    a, c = p.predict_encoded(b.X, return_std=True); m.append(a); s.append(c)
m, s = np.concatenate(m), np.concatenate(s)
te = pd.read_csv(test); y = te["median"].to_numpy(); ok = ~np.isnan(y)
num = ["sales", "volume", "listings", "inventory", "year", "month"]
num = [c for c in num if c in te.columns]
gap = te[num].isna().any(axis=1).to_numpy()
inside = np.abs(y - m) < 1.96 * s
out = {}
for name, rows in (("complete", ok & ~gap), ("gapped", ok & gap)) + tuple((f"missing {c}", ok & te[c].isna().to_numpy()) for c in num):
    if rows.sum():
        out[name] = {"n": int(rows.sum()), "rmse": float(np.sqrt(np.mean((y[rows] - m[rows]) ** 2))), "coverage": float(inside[rows].mean()), "median_std": float(np.median(s[rows]))}
gv = [k for k in p.kernel.modules() if type(k).__name__ == "GapVariance"]
out["gap_variance"] = gv[0].variance.tolist() if gv else None
out["gap_columns"] = [p.inputs.names[i] for i in p.inputs.gap_columns()]
print(json.dumps(out, indent=1))
