"""Shared-step check: the exact GP fit with C^-1 by cholesky_inverse (today) vs cholesky_solve(I)
(before), fold 0 of every UCI set in ../shared/data (training rows capped at 2000)."""
import sys, json, time, warnings
import numpy as np, torch
torch.set_num_threads(1)
import gpscale.linalg.cholesky as ch
import gpscale.models.exact as ex
mode = sys.argv[1]
if mode == "old":
    def old(L):
        return torch.cholesky_solve(torch.eye(L.shape[-1], dtype=L.dtype, device=L.device), L)
    ch.inverse_from_cholesky = old
    for mod in list(sys.modules.values()):
        if mod and getattr(mod, "inverse_from_cholesky", None) is not None and mod.__name__.startswith("gpscale"):
            mod.inverse_from_cholesky = old
import gpscale
from gpscale.bench.uci_large import _split
SETS = ["challenger","fertility","concreteslump","autos","servo","breastcancer","machine","autompg","forest","stock","solar","skillcraft","pumadyn32nm","elevators","kin40k","keggundirected"]
warnings.simplefilter("ignore")
for name in SETS:
    Xtr, ytr, Xte, yte = _split(name, 0, 2000, None)
    t0 = time.perf_counter()
    p = gpscale.fit(Xtr, ytr, method="exact", seed=0)
    m = p.predict(Xte)
    print(json.dumps({"set": name, "mode": mode, "objective": p.result.objective, "evals": p.result.n_evals,
                      "rmse": float(np.sqrt(np.mean((m - yte) ** 2)) / np.std(ytr)), "s": time.perf_counter() - t0}), flush=True)
