import sys, tempfile, time, numpy as np, pandas as pd
from pathlib import Path
sys.path.insert(0, "."); sys.path.insert(0, "benchmarks/results/tables/gaps/conditional/explore")
from benchmarks.tables import _split, _gpscale
rows, seeds = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")]
patched = sys.argv[3] == "patch"
if patched:
    import no_indicator_in_kernel  # noqa
T = "median"
for seed in seeds:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        tr, te = _split("txhousing", seed, rows, d, 0.1)
        y = pd.read_csv(te)[T].to_numpy()
        gap = pd.read_csv(te).drop(columns=[T, "city"]).isna().any(axis=1).to_numpy()
        vs = pd.read_csv(te)[["sales", "volume"]].isna().any(axis=1).to_numpy()
        t0 = time.time(); m, s, *_ = _gpscale(tr, te, T, ()); t = time.time() - t0
        e = m - y; cov = np.abs(e) <= 1.96 * s
        f = lambda w: f"{np.sqrt(np.mean(e[w]**2)):.0f}/{cov[w].mean():.3f}"
        print(f"seed {seed} patched={patched} all {f(slice(None))} gap {f(gap)} sales|volume gap {f(vs)} complete {f(~gap)} t {t:.0f}s", flush=True)
