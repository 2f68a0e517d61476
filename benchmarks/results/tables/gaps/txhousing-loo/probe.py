"""txhousing fold 0 with 10 % of numeric cells removed, one exact-GP fit (Matern-5/2 ARD,
40 L-BFGS iterations): do the training rows with a gap tell, by leave-one-out, how much
the fit under-states their variance? For each gap column c, alpha_c = the mean of the
squared standardised LOO residuals of the training rows with gap c; the test rows with
gap c are then scored with their variance times alpha_c (the largest of their gaps')."""
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, ".")  # run from the checkout root
warnings.simplefilter("ignore")
import gpscale  # noqa: E402
from benchmarks.tables import _split  # noqa: E402
from gpscale.io import prediction_source  # noqa: E402
from gpscale.methods.kernel_choice import loo_predictions  # noqa: E402

work = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
saved = work / "txhousing-m10.pt"
train, test = _split("txhousing", 0, None, work, 0.1)
if saved.exists():
    p = gpscale.load(saved)
else:
    p = gpscale.fit(str(train), target="median", method="exact", kernel="matern52-ard",
                    max_iter=40, seed=0)
    p.save(saved)
model = p.model
mean, var = loo_predictions(model)
z2 = ((model.y - mean) ** 2 / var).numpy()
Xs = model.X.numpy()
cols = p.inputs.gap_columns()
names = [p.inputs.names[c] for c in cols]
# model.X is scaled; 0/1 columns are kept raw by the scaler
alpha = {}
out = {"complete_train_alpha": float(z2[(Xs[:, cols] == 0).all(axis=1)].mean())}
for c, name in zip(cols, names):
    rows = Xs[:, c] == 1
    alpha[c] = float(z2[rows].mean()) if rows.sum() >= 10 else 1.0
    out[f"train {name}"] = {"n": int(rows.sum()), "alpha": alpha[c]}
te = pd.read_csv(test)
y = te["median"].to_numpy()
ok = ~np.isnan(y)
m, s, X = [], [], []
for b in prediction_source(p, str(test)).batches():
    a, c_ = p.predict_encoded(b.X, return_std=True)
    m.append(a), s.append(c_), X.append(b.X)
m, s, X = np.concatenate(m), np.concatenate(s), np.concatenate(X)
factor = np.ones(len(m))
for c in cols:
    factor = np.where(X[:, c] == 1, np.maximum(factor, alpha[c]), factor)
noise_std = p.scaler.inverse_std(np.array([np.sqrt(float(model.noise))]))[0] \
    if hasattr(model, "noise") else None
for way, sd in (("as fitted", s), ("loo-scaled", s * np.sqrt(factor))):
    inside = np.abs(y - m) < 1.96 * sd
    res = {}
    for name, rows in [("all", ok), ("complete", ok & (factor == 1))] + [
            (f"gap {n}", ok & (X[:, c] == 1)) for c, n in zip(cols, names)]:
        if rows.sum():
            res[name] = {"n": int(rows.sum()), "coverage": float(inside[rows].mean()),
                         "median_std": float(np.median(sd[rows])),
                         "rmse": float(np.sqrt(np.mean((y[rows] - m[rows]) ** 2)))}
    out[way] = res
print(json.dumps(out, indent=1))
