"""sgpr fits that reach StreamedSGPR's bound from statistics (passes=True), small settings:
every real vector set in ../shared/data (fold 0 or a seeded 80/20 split), and the tables
read from their CSV files (which always go by passes). Saves parameters, bound, predictions."""
import json, sys, time, warnings
from pathlib import Path
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
D = Path("/work/shared/data")
OPTS = dict(method="sgpr", kernel="rbf-ard", m=16, max_iter=25, refine=4, seed=0)

def sets():
    for p in sorted((D / "uci").glob("*.npz")):
        z = np.load(p); te = z["test_mask"][:, 0]
        yield p.stem, z["X"][~te], z["y"][~te], z["X"][te]
    z = np.load(D / "snelson1d.npz"); yield "snelson1d", z["X"], z["y"].ravel(), z["X_test"]
    z = np.load(D / "kin40k_snelson_10k30k.npz")
    yield "kin40k_snelson", z["X_train"], z["y_train"].ravel(), z["X_test"][:2000]
    z = np.load(D / "mauna_loa_co2_monthly_noaa.npz")
    yield "mauna_loa", z["X"].reshape(-1, 1), z["y"], z["X"].reshape(-1, 1)[::7]

import os
ONLY = os.environ.get("ONLY")
out, log = {}, []
for name, X, y, Xt in sets():
    if ONLY and name not in ONLY.split(","):
        continue
    t = time.time()
    n = X.shape[0]
    p = gpscale.fit(X, y, passes=True, subsample=max(min(n, 40), n // 2), **OPTS)
    mean, std = p.predict(Xt, return_std=True)
    st = {k: v.detach().clone() for k, v in p.model.state_dict().items()}
    out[name] = {"state": st, "mean": torch.as_tensor(mean), "std": torch.as_tensor(std),
                 "objective": p.result.objective if hasattr(p, "result") else None}
    log.append({"set": name, "n": n, "s": round(time.time() - t, 1)})
    print(json.dumps(log[-1]), flush=True)
import pandas as pd
targets = {"cps_earnings": "earnings", "gss_wages": "realrinc", "movies": "rating", "txhousing": "median"}
for name, target in targets.items():
    if ONLY and name not in ONLY.split(","):
        continue
    t = time.time()
    path = D / "tables" / f"{name}.csv"
    try:
        extra = {"exclude": ["title"]} if name == "movies" else {}  # an id column
        p = gpscale.fit(path, target=target, subsample=2000, **extra, **OPTS)
        df = pd.read_csv(path).sample(500, random_state=0).drop(columns=[target])
        mean, std = p.predict(df, return_std=True)
        st = {k: v.detach().clone() for k, v in p.model.state_dict().items()}
        out[name] = {"state": st, "mean": torch.as_tensor(mean), "std": torch.as_tensor(std)}
        log.append({"set": name, "s": round(time.time() - t, 1)})
    except Exception as e:
        log.append({"set": name, "error": f"{type(e).__name__}: {e}"[:300]})
    print(json.dumps(log[-1]), flush=True)
torch.save(out, sys.argv[1])
