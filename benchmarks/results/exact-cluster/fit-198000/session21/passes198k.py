"""Issue 30, session 21: where the preconditioner's factor lives. On the first 198 000
rows of the exact-cluster set, θ from the default 4000-row sample (fitted once, saved,
loaded by the other runs), then the default preconditioner (randomly pivoted Cholesky,
rank cap 4 096) and PASSES passes of the posterior's CG (y and 64 pathwise samples) at
the library's defaults: argv[1] = 'inproc' or a worker count (a LocalCluster of
single-threaded workers), argv[2] = output folder. One JSON line: preconditioner
seconds, seconds per pass (the solve after the preconditioner over the passes, so with
the variance probes' set-up), the seconds of each whole CG iteration between two
products (product, Woodbury apply, vector updates), the residuals, client and worker
peak RSS."""
import json, resource, sys, time, warnings
from pathlib import Path

PASSES = 5


def main():
    import torch
    torch.set_num_threads(1)
    from gpscale.bench.exact_cluster import _rows
    from gpscale.distributed import connect
    from gpscale.kernels import make_kernel
    from gpscale.methods.exact import fit_exact, sample_size
    from gpscale.models import IterativeExactGP
    from gpscale.preprocessing import Standardizer
    from gpscale.train.starts import sample_rows
    which, out = sys.argv[1], Path(sys.argv[2])
    workers = None if which == "inproc" else int(which)
    n = 198_000
    X, y = _rows(Path("/tmp/runs/cl/data/rows-200000x8"))
    X, y = X[:n].numpy(), y[:n].numpy()
    sc = Standardizer.fit(X, y)
    Xs, ys = torch.as_tensor(sc.transform_x(X)), torch.as_tensor(sc.transform_y(y))
    theta = out / "theta.pt"
    if theta.exists():
        small = torch.load(theta, weights_only=False)
    else:
        keep = sample_rows(n, sample_size(n), 0, Xs.device)
        small, _ = fit_exact(Xs[keep], ys[keep], make_kernel("rbf-ard", 8).double(), seed=0,
                             solver="cholesky")
        torch.save(small, theta)
    rec = {"where": which, "n": n, "noise": float(small.noise.detach()), "passes_run": PASSES}
    with connect(workers=workers) as client:
        model = IterativeExactGP.from_exact(small, Xs, ys, solve=False, seed=0, client=client,
                                            max_iter=PASSES)
        starts = []  # when each product C V starts: one CG iteration lies between two
        make = model.operator

        def timed(*args, **kwargs):
            op = make(*args, **kwargs)
            matmul = op.matmul

            def stamped(V):
                starts.append(time.perf_counter())
                return matmul(V)
            op.matmul = stamped
            return op
        model.operator = timed
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # not converged in PASSES
            info = model.solve()
        rec["wall_s"] = time.perf_counter() - t0
        rec.update({k: info[k] for k in ("precond_rank", "precond_seconds", "passes",
                                         "residuals")})
        rec["s_per_pass"] = (info["seconds"] - info["precond_seconds"]) / info["passes"]
        rec["s_iterations"] = [b - a for a, b in zip(starts, starts[1:])]
        if client is not None:
            rss = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
            rec["worker_rss_gib"] = sorted(v / 2**20 for v in rss.values())
    rec["client_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    rec["commit"] = Path("COMMIT").read_text().strip()
    rec["load_after"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
