"""Whole exact-GP fit on 198 000 rows of the exact-cluster synthetic set (issue 30):
argv[1] = 'inproc' or a worker count. Writes one JSON line; saves the test mean."""
import json, resource, sys, subprocess
import numpy as np


def main():
    import torch
    torch.set_num_threads(1)
    from pathlib import Path
    from gpscale.bench.exact_cluster import _fit
    folder = Path("/tmp/runs/cl/data/rows-200000x8")
    which = sys.argv[1]
    workers = None if which == "inproc" else int(which)
    out = _fit(folder, 198000, 2000, workers)
    mean = out.pop("mean")
    np.save(f"/tmp/runs/cl4/mean-{which}.npy", mean)
    try:
        other = np.load("/tmp/runs/cl4/mean-inproc.npy")
        if workers is not None:
            out["max_abs_mean_diff_vs_in_process"] = float(np.max(np.abs(mean - other)))
    except FileNotFoundError:
        pass
    out["client_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out["children_rss_gib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    out["commit"] = open("/tmp/run19/COMMIT").read().strip()
    out["load_after"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps({"kind": "fit", "workers": workers or 0, "n": 198000, **out}), flush=True)


if __name__ == "__main__":
    main()
