"""Whole exact-GP fit on the first 198 000 rows of the exact-cluster synthetic set
(issue 30), at the library's defaults (solver="cg", seed 0), with CG's progress shown:
argv[1] = 'inproc' or a worker count, argv[2] = output folder. The bench's `_fit`
(benchmarks' exact_cluster) plus the solve's record (residual per iteration, the
preconditioner's rank and seconds). Writes one JSON line; saves the test mean."""
import json, resource, sys, time
from pathlib import Path

import numpy as np


def main():
    import torch
    torch.set_num_threads(1)
    import gpscale
    from gpscale.bench.exact_cluster import _rows
    folder = Path("/tmp/runs/cl/data/rows-200000x8")
    which, out_dir = sys.argv[1], Path(sys.argv[2])
    workers = None if which == "inproc" else int(which)
    n_fit, n_test = 198_000, 2_000
    X, y = _rows(folder)
    fit_file = folder.parent / f"fit-{n_fit}.parquet"  # the first 198 000 rows
    Xte, yte = X[n_fit:n_fit + n_test].numpy(), y[n_fit:n_fit + n_test].numpy()
    t0 = time.perf_counter()
    pred = gpscale.fit(fit_file, target="y", method="exact", solver="cg", seed=0,
                       workers=workers, progress=True)
    fit_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    mean, std = pred.predict(Xte, return_std=True)
    predict_s = time.perf_counter() - t1
    info = pred.model.solve_info
    np.save(out_dir / f"mean-{which}.npy", mean)
    rec = {"kind": "fit", "workers": workers or 0, "n": n_fit, "fit_s": fit_s,
           "predict_s": predict_s,
           "rmse": float(np.sqrt(np.mean((mean - yte) ** 2))), "std_y": float(np.std(yte)),
           "coverage95": float(np.mean(np.abs(mean - yte) <= 1.96 * std)),
           "cg_iterations": info.get("iterations"), "cg_passes": info.get("passes"),
           "cg_residual_max": info.get("residual_max"), "converged": info.get("converged"),
           "precond_rank": info.get("precond_rank"), "precond_s": info.get("precond_seconds"),
           "solve_s": info.get("seconds"), "residuals": info.get("residuals"),
           "refine_evals": getattr(pred.model, "refined", {}).get("evaluations", 0),
           "noise": float(pred.model.noise.detach())}
    try:
        other = np.load(out_dir / "mean-inproc.npy")
        if workers is not None:
            rec["max_abs_mean_diff_vs_in_process"] = float(np.max(np.abs(mean - other)))
    except FileNotFoundError:
        pass
    rec["client_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    rec["children_rss_gib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    rec["commit"] = Path("COMMIT").read_text().strip()
    rec["load_after"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
