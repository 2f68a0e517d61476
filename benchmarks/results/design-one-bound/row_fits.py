"""Seeded small fits through the row form of the bound (sgpr in memory, cholqr-vfe, and the
sgpr sample search): parameters and predictions saved."""
import sys, warnings
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
rng = np.random.default_rng(5)
X = rng.uniform(-2, 2, size=(300, 3)); y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=300)
Xt = rng.uniform(-2, 2, size=(40, 3))
cases = {"sgpr": dict(method="sgpr", m=12, max_iter=30),
         "sgpr-passes": dict(method="sgpr", m=12, max_iter=30, passes=True, subsample=150, refine=4),
         "cholqr-vfe": dict(method="cholqr-vfe", m=12, max_iter=10) }
out = {}
for name, kw in cases.items():
    try:
        p = gpscale.fit(X, y, kernel="rbf-ard", **kw)
    except Exception as e:
        print(name, "error", e); continue
    mean, std = p.predict(Xt, return_std=True)
    out[name] = {"state": {k: v.detach().clone() for k, v in p.model.state_dict().items()},
                 "mean": torch.as_tensor(mean), "std": torch.as_tensor(std)}
torch.save(out, sys.argv[1]); print("saved", list(out))
