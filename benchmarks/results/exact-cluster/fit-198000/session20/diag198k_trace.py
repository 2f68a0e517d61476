"""Issue 30 diagnostic: at 198 000 rows, the rpchol trace error by rank and CG iterations."""
import json, sys, time
import numpy as np, torch

def main():
    torch.set_num_threads(1)
    from pathlib import Path
    from gpscale.bench.exact_cluster import _rows, _kernel
    from gpscale.preprocessing import Standardizer
    from gpscale.methods.exact import fit_exact, sample_size
    from gpscale.train.starts import sample_rows
    from gpscale.models import IterativeExactGP
    from gpscale.linalg.lowrank import rp_cholesky, low_rank_inverse
    from gpscale.linalg.cg import cg
    from gpscale.kernels import make_kernel
    n = int(sys.argv[1]); ranks = [int(r) for r in sys.argv[2].split(",")]; cg_ranks = [int(r) for r in sys.argv[3].split(",")] if len(sys.argv) > 3 else []
    X, y = _rows(Path("/tmp/runs/cl/data/rows-200000x8"))
    X, y = X[:n].numpy(), y[:n].numpy()
    sc = Standardizer.fit(X, y)
    Xs = torch.as_tensor(sc.transform_x(X)); ys = torch.as_tensor(sc.transform_y(y))
    t = time.perf_counter()
    keep = sample_rows(n, sample_size(n), 0, Xs.device)
    small, res = fit_exact(Xs[keep], ys[keep], make_kernel("rbf-ard", 8).double(), seed=0, solver="cholesky")
    print(json.dumps({"phase": "sample", "rows": int(keep.numel()), "s": time.perf_counter() - t,
                      "noise": float(small.noise), "ls": small.kernel.base.lengthscale.tolist() if hasattr(small.kernel,'base') else None}), flush=True)
    m = IterativeExactGP.from_exact(small, Xs, ys, tol=1e-3, solve=False, seed=0)
    op = m.operator("float32")
    s2 = float(m.noise)
    t = time.perf_counter()
    L = rp_cholesky(m.kernel, m.X, max(ranks), seed=0, rows=op.rows, abs_tol=0.0)
    tr0 = float(m.kernel.diag(m.X).sum())
    print(json.dumps({"phase": "rpchol", "rank": L.shape[1], "s": time.perf_counter() - t}), flush=True)
    for r in ranks:
        r = min(r, L.shape[1])
        print(json.dumps({"phase": "trace", "rank": r,
                          "trace_over_n_s2": (tr0 - float((L[:, :r] ** 2).sum())) / (n * s2)}), flush=True)
    b = ys - m.mean_constant.detach()
    for r in cg_ranks:
        P = low_rank_inverse(L[:, :r].contiguous(), m.noise.detach())
        t = time.perf_counter()
        last = [t]
        def cb(it, rel):
            now = time.perf_counter()
            print(json.dumps({"phase": "cg", "rank": r, "it": it, "rel": float(rel.max()), "s_iter": now - last[0]}), flush=True)
            last[0] = now
        sol, info = cg(op.matmul, b[:, None], P, None, 1e-3, 200, callback=cb)
        print(json.dumps({"phase": "cg-done", "rank": r, "iterations": info.iterations, "s": time.perf_counter() - t}), flush=True)

if __name__ == "__main__":
    main()
