import sys, time, json, warnings
import numpy as np, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
from gpscale.bench.uci_exact import _split
import gpscale
import gpscale.train.lbfgs as L
h = int(sys.argv[1])
d = list(L.fit_lbfgs.__defaults__)
# defaults order: objective, max_iter, restarts, seed, tol_grad, tol_change, history_size, ...
d[6] = h
L.fit_lbfgs.__defaults__ = tuple(d)
for name in sys.argv[2:]:
    Xtr, ytr, Xte, yte = _split(name, 0, 2000, 2000)
    t0 = time.perf_counter()
    p = gpscale.fit(Xtr, ytr, method="exact", seed=0)
    m = p.predict(Xte)
    print(json.dumps({"set": name, "hist": h, "s": round(time.perf_counter() - t0, 1),
      "evals": p.result.n_evals, "obj": round(p.result.objective, 3),
      "rmse": round(float(np.sqrt(np.mean((m - yte) ** 2)) / np.std(ytr)), 4)}), flush=True)
