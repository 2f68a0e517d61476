"""sgpr with every row held in memory (passes=False) on every real vector set that
../design-one-bound/stats_path.py covers (fold 0 or its split): the default options but
max_iter=5 and, past 10 000 rows, m=128 (to keep the lock short). The row form of the
bound (VFEBound), the warm-start sample search past 16 000 rows, the second start from an
exact fit where the noise is high. Saves parameters and predictions."""
import json, sys, time, warnings
from pathlib import Path
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
D = Path("/work/shared/data")
OPTS = dict(method="sgpr", kernel="rbf-ard", max_iter=5, passes=False, seed=0)


def sets():
    for p in sorted((D / "uci").glob("*.npz")):
        z = np.load(p); te = z["test_mask"][:, 0]
        yield p.stem, z["X"][~te], z["y"][~te], z["X"][te]
    z = np.load(D / "snelson1d.npz"); yield "snelson1d", z["X"], z["y"].ravel(), z["X_test"]
    z = np.load(D / "kin40k_snelson_10k30k.npz")
    yield "kin40k_snelson", z["X_train"], z["y_train"].ravel(), z["X_test"][:2000]
    z = np.load(D / "mauna_loa_co2_monthly_noaa.npz")
    yield "mauna_loa", z["X"].reshape(-1, 1), z["y"], z["X"].reshape(-1, 1)[::7]


out = {}
for name, X, y, Xt in sets():
    t = time.time()
    n = X.shape[0]
    extra = {} if n <= 10_000 else {"m": 128}
    try:
        p = gpscale.fit(X, y, **OPTS, **extra)
    except Exception as e:  # noqa: BLE001  (the same failure before and after is the check)
        print(json.dumps({"set": name, "n": n, "error": f"{type(e).__name__}: {e}"[:200]}),
              flush=True)
        continue
    mean, std = p.predict(Xt, return_std=True)
    out[name] = {"state": {k: v.detach().clone() for k, v in p.model.state_dict().items()},
                 "mean": torch.as_tensor(mean), "std": torch.as_tensor(std)}
    print(json.dumps({"set": name, "n": n, "model": type(p.model).__name__, "m": p.model.m,
                      "s": round(time.time() - t, 1)}), flush=True)
    torch.save(out, sys.argv[1])  # after each set: a timeout keeps the sets done
