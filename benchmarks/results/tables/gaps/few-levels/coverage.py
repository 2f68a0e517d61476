import sys, warnings, numpy as np, pandas as pd, gpscale
import gpscale.io.gaps as G
warnings.simplefilter("ignore")
L, NEW, SEEDS = int(sys.argv[1]), 200, int(sys.argv[2])
res = {"before": [], "after": []}
orig = G.sample_spread_factor
for seed in range(SEEDS):
    rng = np.random.default_rng(seed)
    eff = rng.normal(0, 1.5, L + NEW)
    def table(n, new=False):
        x = rng.normal(size=n); lv = rng.integers(L, L + NEW, n) if new else rng.integers(0, L, n)
        return pd.DataFrame({"x": x, "c": [f"l{i}" for i in lv], "y": x + eff[lv] + 0.1 * rng.normal(size=n)})
    p = gpscale.fit(table(400), target="y", method="exact", max_iter=60, seed=0)
    te = table(400, new=True)
    for way in res:
        G.sample_spread_factor = orig if way == "after" else (lambda L: 1.0)
        m, s = p.predict(te.drop(columns="y"), return_std=True)
        res[way].append(np.mean(np.abs(te.y - m) < 1.96 * s))
for way, v in res.items():
    print(f"L={L} {way}: mean coverage {np.mean(v):.3f}, min {np.min(v):.3f}, max {np.max(v):.3f} over {SEEDS} seeds")
