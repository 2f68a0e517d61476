"""Writes tests/data/format_v1/*.pt with the code as of c302604 (format version 1) and
the predictions each file must give after loading."""
import json

import numpy as np

import gpscale

rng = np.random.default_rng(0)
X = rng.uniform(0, 5, (40, 2)) * [1.0, 100.0]
y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(40) + 50.0
Xt = rng.uniform(0, 5, (7, 2)) * [1.0, 100.0]
cases = {
 "exact": {"max_iter": 5},
 "rff": {"max_iter": 5, "num_features": 16},
 "grief-ii": {"max_iter": 3, "num_features": 20},
 "grief-i": {"num_features": 10, "n_iter": 40, "burn": 10, "thin": 10},
 "admm-hocv": {"max_iter": 3},
 "minimax": {"epochs": 1, "num_features": 16},
 "minimax-nn": {"epochs": 1, "features": "nn-linear", "num_features": 8},
 "svgp": {"epochs": 1, "num_inducing": 5},
 "cholqr-vfe": {"m": 6, "max_epochs": 1},
}
out = {}
for name, opts in cases.items():
    method = name.split("-nn")[0]
    p = gpscale.fit(X, y, method=method, **opts)
    p.save(f"tests/data/format_v1/{name}.pt")
    m, s = p.predict(Xt, return_std=True)
    out[name] = {"mean": m.tolist(), "std": s.tolist()}
with open("tests/data/format_v1/predictions.json", "w") as f:
    json.dump({"X_test": Xt.tolist(), "predictions": out}, f, indent=1)
