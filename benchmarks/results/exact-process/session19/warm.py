"""Experiment: exact fit on 2000 rows from sqrt(d) (today) vs warm-started from an exact
fit on a 500-row random subset. Prints one JSON line per set."""
import sys, time, json, warnings
import numpy as np, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
from gpscale.bench.uci_exact import _split
import gpscale


def score(pred, Xte, yte, sy):
    m, s = pred.predict(Xte, return_std=True)
    r = (m - yte) / sy
    v = (s / sy) ** 2
    return float(np.sqrt(np.mean(r ** 2))), float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * r * r / v))


def one(name, sub):
    Xtr, ytr, Xte, yte = _split(name, 0, 2000, 2000)
    sy = float(np.std(ytr))
    out = {"set": name, "n": len(ytr), "d": Xtr.shape[1], "sub": sub}
    t0 = time.perf_counter()
    base = gpscale.fit(Xtr, ytr, method="exact", seed=0)
    out["base_s"] = time.perf_counter() - t0
    out["base_evals"] = base.result.n_evals
    out["base_obj"] = base.result.objective
    out["base_rmse"], out["base_nlpd"] = score(base, Xte, yte, sy)
    if len(ytr) <= sub:
        return out
    t0 = time.perf_counter()
    idx = np.random.default_rng(0).choice(len(ytr), sub, replace=False)
    small = gpscale.fit(Xtr[idx], ytr[idx], method="exact", seed=0)
    k = small.model.kernel
    noise = float(small.model.noise.detach())
    warm = gpscale.fit(Xtr, ytr, method="exact", seed=0, kernel=k, noise=noise, init="given")
    out["warm_s"] = time.perf_counter() - t0
    out["small_evals"] = small.result.n_evals
    out["warm_evals"] = warm.result.n_evals
    out["warm_obj"] = warm.result.objective
    out["warm_rmse"], out["warm_nlpd"] = score(warm, Xte, yte, sy)
    return out


if __name__ == "__main__":
    sub = int(sys.argv[1])
    for name in sys.argv[2:]:
        try:
            print(json.dumps(one(name, sub)), flush=True)
        except Exception as e:
            print(json.dumps({"set": name, "error": repr(e)[:300]}), flush=True)
