import sys, time, json, torch, numpy as np
torch.set_num_threads(1)
import gpscale
from gpscale.bench.uci_large import _split
from gpscale.bench.uci_exact import _standardise
name, fold = sys.argv[1], int(sys.argv[2])
ranks = [int(r) for r in sys.argv[3].split(",")]
refine = int(sys.argv[4]) if len(sys.argv) > 4 else 0
import os
if os.environ.get("F64PRE"):
    import gpscale.models.iterative as IT
    _lri = IT.low_rank_inverse
    IT.low_rank_inverse = lambda *a, work_dtype=None, **k: _lri(*a, work_dtype=None, **k)
    print("float64 preconditioner apply")
Xtr, ytr, Xte, yte = _split(name, fold, None, None)
t0 = time.perf_counter()
pred = gpscale.fit(Xtr, ytr, method="exact", seed=0, refine=refine)
print("fit", time.perf_counter() - t0, pred.model.solve_info, flush=True)
m = pred.model
s2 = float(m.noise.detach())
for r in ranks:
    m.precond_rank, m.precond_tol = r, 0.0
    info = m.solve(warm=False)
    op = m.operator(m.solve_dtype)
    L = m.precond_factor(op)
    dK = m.kernel.diag(m.X).detach()
    sc = m.copy_scale()
    tr = float((dK * (1 if sc is None else sc**2)).sum() - (L * L).sum())
    print(json.dumps({"set": name, "fold": fold, "n": m.n, "sigma2": s2, "rank": info["precond_rank"],
                      "iters": info["iterations"], "pre_s": round(info["precond_seconds"], 2),
                      "solve_s": round(info["seconds"], 2), "trace_over_n_s2": tr / (m.n * s2),
                      "maxdiag_over_s2": None}), flush=True)
