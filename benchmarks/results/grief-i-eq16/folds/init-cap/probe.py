"""Does GRIEF's exact-GP initialisation (L-BFGS, max_iter=100) converge on Table 1's
small sets? Exact-GP test RMSE at max_iter 100 vs 1000, per fold."""
import json, sys, time
import torch
from gpscale.data import load_uci
from gpscale.kernels import Scale
from gpscale.models import ExactGP
from gpscale.train.grief import separable_kernel, separable_form
from gpscale.train.lbfgs import fit_lbfgs
from benchmarks.grief_uci import _rmse_orig
torch.set_num_threads(1)
sets = sys.argv[1].split(",")
for name in sets:
    for fold in range(10):
        split = load_uci(name, fold, standardize=True)
        X = torch.as_tensor(split.X_train, dtype=torch.float64)
        y = torch.as_tensor(split.y_train, dtype=torch.float64)
        Xs = torch.as_tensor(split.X_test, dtype=torch.float64)
        n, d = X.shape
        gen = torch.Generator().manual_seed(fold)
        sub = torch.randperm(n, generator=gen)[: min(n, 1000)]
        Xa, ya = X[sub], y[sub]
        row = {"dataset": name, "fold": fold}
        for cap in (100, 1000):
            scale = Xa.std(0).nan_to_num(1.0).clamp_min(1e-3)
            var_y = float(ya.var())
            m = ExactGP(Scale(separable_kernel("rbf", d, scale), var_y), Xa, ya, noise=0.1 * var_y)
            t0 = time.perf_counter()
            res = fit_lbfgs(m, max_iter=cap, method="exact-init")
            mean, _ = m.predict(Xs)
            row[f"rmse{cap}"] = _rmse_orig(split, mean)
            row[f"iters{cap}"] = len(res.history)
            row[f"reason{cap}"] = res.reason
            row[f"last{cap}"] = {k: v for k, v in res.history[-1].items() if k in ("loss", "nlml", "grad_norm")} if res.history else None
            row[f"s{cap}"] = time.perf_counter() - t0
        print(json.dumps(row), flush=True)
