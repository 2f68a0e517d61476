"""Seeded small ADMM fits through every door used; saves state and predictions."""
import sys, warnings
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
rng = np.random.default_rng(3)
X = rng.uniform(-2, 2, size=(90, 2)); y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=90)
Xt = rng.uniform(-2, 2, size=(20, 2))
cases = {
    "hocv": dict(method="admm-hocv", max_iter=8),
    "hocv-seed": dict(method="admm-hocv", max_iter=6, seed=4, noise=0.2, val_fraction=0.3),
    "hocv-paper": dict(method="admm-hocv", max_iter=5, preset="paper"),
    "hocv-tangent": dict(method="admm-hocv", max_iter=5, preset="tangent"),
    "hocv-coord-given": dict(method="admm-hocv", max_iter=4, direction="coordinate", window=1, eps=0.0),
    "hocv-chunked": dict(method="admm-hocv", max_iter=4, memory="chunked", block=17, scale="keep"),
    "kfold": dict(method="admm-kfold", max_iter=5, k=3),
    "consensus": dict(method="admm-consensus", max_iter=4, k=2, tau=20.0, local_iters=2),
}
out = {}
for name, kw in cases.items():
    p = gpscale.fit(X, y, kernel="rbf-ard", **kw)
    mean, var = p.predict(Xt, return_std=True)
    out[name] = {"state": {k: v.clone() for k, v in p.model.state_dict().items()},
                 "mean": torch.as_tensor(np.asarray(mean)), "std": None if var is None else torch.as_tensor(np.asarray(var))}
torch.save(out, sys.argv[1])
print("saved", list(out))
