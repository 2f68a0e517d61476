import json, resource


def main():
    import torch
    torch.set_num_threads(1)
    from pathlib import Path
    from gpscale.bench.exact_cluster import _fit
    folder = Path("/tmp/runs/cl2/data/rows-102000x8")
    out = _fit(folder, 100000, 2000, 2)
    out.pop("mean")
    out["client_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"kind": "fit", "workers": 2, "n": 100000, **out}), flush=True)


if __name__ == "__main__":
    main()
