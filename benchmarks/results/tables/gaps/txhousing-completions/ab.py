"""txhousing fold 0 with 10 % of numeric cells removed, one exact-GP fit (Matern-5/2 ARD,
40 L-BFGS iterations): test rows predicted with a gap training also had encoded as in
training (mean and indicator, "indicator") and completed from reference rows holding the
value ("completed"), scored on complete and gapped rows apart."""
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, ".")  # run from the checkout root
warnings.simplefilter("ignore")
import gpscale  # noqa: E402
import gpscale.predictor as predictor  # noqa: E402
from benchmarks.tables import _split  # noqa: E402
from gpscale.io import prediction_source  # noqa: E402

work = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
train, test = _split("txhousing", 0, None, work, 0.1)
p = gpscale.fit(str(train), target="median", method="exact", kernel="matern52-ard",
                max_iter=40, seed=0)
te = pd.read_csv(test)
y = te["median"].to_numpy()
ok = ~np.isnan(y)
num = [c for c in ["sales", "volume", "listings", "inventory"] if c in te.columns]
gap = te[num].isna().any(axis=1).to_numpy()
opened = predictor.open_gaps
out = {"gap_columns": [p.inputs.names[i] for i in p.inputs.gap_columns()]}
for way in ("indicator", "completed"):
    predictor.open_gaps = opened if way == "completed" else (lambda X, blocks: X)
    m, s = [], []
    for b in prediction_source(p, str(test)).batches():
        a, c = p.predict_encoded(b.X, return_std=True)
        m.append(a)
        s.append(c)
    m, s = np.concatenate(m), np.concatenate(s)
    inside = np.abs(y - m) < 1.96 * s
    nlpd = 0.5 * np.log(2 * np.pi * s ** 2) + 0.5 * ((y - m) / s) ** 2
    groups = (("all", ok), ("complete", ok & ~gap), ("gapped", ok & gap)) + tuple(
        (f"missing {c}", ok & te[c].isna().to_numpy()) for c in num)
    out[way] = {name: {"n": int(r.sum()), "rmse": float(np.sqrt(np.mean((y[r] - m[r]) ** 2))),
                       "coverage": float(inside[r].mean()), "nlpd": float(nlpd[r].mean()),
                       "median_std": float(np.median(s[r]))}
                for name, r in groups if r.sum()}
print(json.dumps(out, indent=1))
