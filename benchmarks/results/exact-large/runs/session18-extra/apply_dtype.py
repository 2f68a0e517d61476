import sys, time, json, torch
torch.set_num_threads(1)
import gpscale
import gpscale.models.iterative as IT
from gpscale.bench.uci_large import _split
name, fold = sys.argv[1], int(sys.argv[2])
ranks = [None if r == "default" else int(r) for r in sys.argv[3].split(",")]
MODE = {"f64": False}
_lri = IT.low_rank_inverse
def patched(*a, work_dtype=None, **k):
    return _lri(*a, work_dtype=None if MODE["f64"] else work_dtype, **k)
IT.low_rank_inverse = patched
Xtr, ytr, Xte, yte = _split(name, fold, None, None)
t0 = time.perf_counter()
pred = gpscale.fit(Xtr, ytr, method="exact", seed=0, refine=0)
print("fit", time.perf_counter() - t0, pred.model.solve_info, flush=True)
m = pred.model
for r in ranks:
    for f64 in (False, True):
        MODE["f64"] = f64
        if r is not None:
            m.precond_rank = r
        info = m.solve(warm=False)
        print(json.dumps({"set": name, "fold": fold, "n": m.n, "sigma2": float(m.noise), "f64_apply": f64,
                          "rank": info["precond_rank"], "iters": info["iterations"],
                          "pre_s": round(info["precond_seconds"], 2), "solve_s": round(info["seconds"], 2),
                          "resid_max": info["residual_max"]}), flush=True)
