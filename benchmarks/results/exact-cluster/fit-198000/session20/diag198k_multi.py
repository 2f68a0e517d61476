"""Issue 30 diagnostic: at 198 000 rows, CG's iterations at several preconditioner ranks,
in one batched CG (one pass over K serves every column; each column has its own
preconditioner): y at ranks r1..rk, and two pathwise-variance right-hand sides at the
first and last rank."""
import json, sys, time
import numpy as np, torch

def main():
    torch.set_num_threads(1)
    from pathlib import Path
    from gpscale.bench.exact_cluster import _rows
    from gpscale.preprocessing import Standardizer
    from gpscale.methods.exact import fit_exact, sample_size
    from gpscale.train.starts import sample_rows
    from gpscale.models import IterativeExactGP
    from gpscale.linalg.lowrank import rp_cholesky, low_rank_inverse
    from gpscale.linalg.cg import cg
    from gpscale.kernels import make_kernel
    n = int(sys.argv[1]); ranks = [int(r) for r in sys.argv[2].split(",")]
    X, y = _rows(Path("/tmp/runs/cl/data/rows-200000x8"))
    X, y = X[:n].numpy(), y[:n].numpy()
    sc = Standardizer.fit(X, y)
    Xs = torch.as_tensor(sc.transform_x(X)); ys = torch.as_tensor(sc.transform_y(y))
    t = time.perf_counter()
    keep = sample_rows(n, sample_size(n), 0, Xs.device)
    small, res = fit_exact(Xs[keep], ys[keep], make_kernel("rbf-ard", 8).double(), seed=0, solver="cholesky")
    print(json.dumps({"phase": "sample", "s": time.perf_counter() - t, "noise": float(small.noise.detach())}), flush=True)
    m = IterativeExactGP.from_exact(small, Xs, ys, tol=1e-3, solve=False, seed=0)
    op = m.operator("float32")
    t = time.perf_counter()
    L = rp_cholesky(m.kernel, m.X, max(ranks), seed=0, rows=op.rows, abs_tol=0.0)
    print(json.dumps({"phase": "rpchol", "rank": L.shape[1], "s": time.perf_counter() - t}), flush=True)
    Ps = [low_rank_inverse(L[:, :r].contiguous(), m.noise.detach()) for r in ranks]
    b = ys - m.mean_constant.detach()
    probes = m.cache.probes(m.kernel, m.X, m.noise_diagonal(), 0)
    cols = [("y", r) for r in ranks] + [("s1", ranks[0]), ("s2", ranks[0]), ("s1", ranks[-1])]
    B = torch.stack([b if c == "y" else probes[:, int(c[1]) - 1] for c, _ in cols], 1)
    which = [ranks.index(r) for _, r in cols]
    def precond(R):
        return torch.stack([Ps[w](R[:, j:j + 1])[:, 0] for j, w in enumerate(which)], 1)
    t = time.perf_counter(); last = [t]
    def cb(it, rel):
        now = time.perf_counter()
        print(json.dumps({"it": it, "s_iter": round(now - last[0], 2),
                          "rel": {f"{c}@{r}": float(v) for (c, r), v in zip(cols, rel)}}), flush=True)
        last[0] = now
    sol, info = cg(op.matmul, B, precond, None, 1e-3, int(sys.argv[3]), callback=cb)
    print(json.dumps({"phase": "done", "iterations": info.iterations, "s": time.perf_counter() - t}), flush=True)

if __name__ == "__main__":
    main()
