"""cholqr-vfe (SparseGP with Z = X[I]: the row form of the bound, VFEBound) at its
defaults but max_iter=5, on the small real sets (fold 0). Saves parameters and
predictions."""
import json, sys, time, warnings
from pathlib import Path
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
D = Path("/work/shared/data")
SMALL = ["autompg", "autos", "breastcancer", "challenger", "concreteslump", "fertility",
         "machine", "servo", "stock"]
out = {}
for name in SMALL:
    z = np.load(D / "uci" / f"{name}.npz"); te = z["test_mask"][:, 0]
    X, y, Xt = z["X"][~te], z["y"][~te], z["X"][te]
    t = time.time()
    p = gpscale.fit(X, y, method="cholqr-vfe", kernel="rbf-ard", max_iter=5, seed=0)
    mean, std = p.predict(Xt, return_std=True)
    out[name] = {"state": {k: v.detach().clone() for k, v in p.model.state_dict().items()},
                 "mean": torch.as_tensor(mean), "std": torch.as_tensor(std)}
    print(json.dumps({"set": name, "n": int(X.shape[0]), "model": type(p.model).__name__,
                      "s": round(time.time() - t, 1)}), flush=True)
    torch.save(out, sys.argv[1])  # after each set: a timeout keeps the sets done
