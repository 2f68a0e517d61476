"""Issue 30 (GPCV-ADMM's z-step on the cluster), session 22: the hold-out ADMM's
recomputed kernel products and contractions (``KernelOps`` with ``memory="chunked"``)
in process and on a LocalCluster of 1 and 2 single-threaded workers. kin40k's first
N rows (fold 0's training rows of the shared split, standardised by load_uci), a random half as
X_T and the rest as X_V, RBF-ARD at unit lengthscales. Per call, the median of REPEATS:
K_VT v, K_TV u, C v (one right-hand side each: the z-step's CG multiplies vectors) and
the θ-gradient's two contractions; and the seconds to make the operators for a new θ
(on a cluster: X_T, X_V and their prepared columns sent to every worker). argv[1] = 'inproc' or a worker count. One JSON line."""
import json, statistics, sys, time
from pathlib import Path

N, REPEATS = 30_000, 3


def main():
    import torch
    torch.set_num_threads(1)
    from gpscale.data import load_uci
    from gpscale.distributed import connect
    from gpscale.kernels import make_kernel
    from gpscale.kernels.chunked import auto_block
    from gpscale.train.admm.ops import KernelOps
    which = sys.argv[1]
    workers = None if which == "inproc" else int(which)
    X = torch.as_tensor(load_uci("kin40k", fold=0).X_train[:N], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(N, generator=g)
    X_T, X_V = X[perm[: N // 2]], X[perm[N // 2:]]
    kernel = make_kernel("rbf-ard", X.shape[1]).double()
    v = torch.randn(X_T.shape[0], generator=g, dtype=torch.float64)
    u = torch.randn(X_V.shape[0], generator=g, dtype=torch.float64)
    rec = {"where": which, "n_T": X_T.shape[0], "n_V": X_V.shape[0], "d": X.shape[1]}
    block = auto_block(max(X_T.shape[0], X_V.shape[0]), X_T.shape[0], 8)  # as ADMM's
    with connect(workers=workers) as client:
        setup = []  # a new θ makes new KernelOps: the first, then the next ones
        for _ in range(3):
            t0 = time.perf_counter()
            ops = KernelOps(kernel, torch.tensor(0.01, dtype=torch.float64), X_T, X_V,
                            dense=False, block=block, client=client)
            setup.append(time.perf_counter() - t0)
        rec["setup_s"], rec["block"] = setup, block
        calls = {"kvt": lambda: ops.kvt(v), "kvt_t": lambda: ops.kvt_t(u),
                 "c": lambda: ops.c(v), "vjp_V": lambda: ops.vjp("V", u, v),
                 "vjp_T": lambda: ops.vjp("T", v, v)}
        out = {}
        for name, call in calls.items():
            times = []
            for _ in range(REPEATS):
                t = time.perf_counter()
                res = call()
                times.append(time.perf_counter() - t)
            rec[name + "_s"] = statistics.median(times)
            out[name] = res
        torch.save(out, f"/tmp/admm-cluster-{which}.pt")
    rec["load_after"] = open("/proc/loadavg").read().split()[:3]
    rec["commit"] = Path("COMMIT").read_text().strip() if Path("COMMIT").exists() else None
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
