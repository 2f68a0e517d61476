"""txhousing, fold 0 of `bench tables`: the exact GP (Matern-5/2 ARD, 40 L-BFGS iterations)
with the gap term (kernels/gaps.py) and with the indicator column alone; run from the
checkout root: `python benchmarks/results/tables/gaps/txhousing-ab/ab.py VARIANT [FOLDER]`."""
import sys, time, json, warnings
import numpy as np
from pathlib import Path
sys.path.insert(0, ".")  # run from the checkout root: benchmarks.tables
warnings.simplefilter("ignore")
import gpscale, gpscale.api
from benchmarks.tables import _split, _metrics
from gpscale.io import prediction_source
import pandas as pd
which = sys.argv[1]
if which == "indicator-only":
    gpscale.api.modelled_gaps = lambda *a, **k: ()
train, test = _split("txhousing", 0, None, Path(sys.argv[2] if len(sys.argv) > 2 else "."))
t0 = time.perf_counter()
p = gpscale.fit(str(train), target="median", method="exact", kernel="matern52-ard", max_iter=40, seed=0)
fit_s = time.perf_counter() - t0
means, stds = [], []
for b in prediction_source(p, str(test)).batches():
    m, s = p.predict_encoded(b.X, return_std=True); means.append(m); stds.append(s)
m, s = np.concatenate(means), np.concatenate(stds)
y = pd.read_csv(test)["median"].to_numpy(); ok = ~np.isnan(y)
ytr = pd.read_csv(train)["median"].dropna()
out = _metrics(y[ok], m[ok], s[ok], ytr.mean(), ytr.std())
gap = [k for k in p.kernel.modules() if type(k).__name__ == "GapVariance"]
print(json.dumps({"variant": which, "fit_s": round(fit_s), "iters": p.result.iterations if hasattr(p.result, "iterations") else None,
                  "objective": p.result.objective, "gap_variance": gap[0].variance.tolist() if gap else None, **out}))
