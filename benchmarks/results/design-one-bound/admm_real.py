"""The three ADMM methods at their defaults (max_iter=5 to keep it short) on the real uci
sets up to ~1000 rows (fold 0) and snelson1d: parameters and predictions saved."""
import json, sys, time, warnings
from pathlib import Path
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
D = Path("/work/shared/data")
SMALL = ["challenger", "fertility", "concreteslump", "autos", "servo", "breastcancer",
         "machine", "autompg", "forest", "stock", "solar"]

def sets():
    for name in SMALL:
        z = np.load(D / "uci" / f"{name}.npz"); te = z["test_mask"][:, 0]
        yield name, z["X"][~te], z["y"][~te], z["X"][te]
    z = np.load(D / "snelson1d.npz"); yield "snelson1d", z["X"], z["y"].ravel(), z["X_test"]

out = {}
for name, X, y, Xt in sets():
    for method in ("admm-hocv", "admm-kfold", "admm-consensus"):
        t = time.time()
        p = gpscale.fit(X, y, method=method, kernel="rbf-ard", max_iter=5)
        mean, std = p.predict(Xt, return_std=True)
        out[f"{name}/{method}"] = {"state": {k: v.detach().clone() for k, v in p.model.state_dict().items()},
                                   "mean": torch.as_tensor(mean), "std": torch.as_tensor(std)}
        print(json.dumps({"set": name, "method": method, "s": round(time.time() - t, 1)}), flush=True)
torch.save(out, sys.argv[1])
