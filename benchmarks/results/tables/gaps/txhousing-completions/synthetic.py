import warnings, numpy as np, pandas as pd, gpscale, gpscale.predictor as P
warnings.simplefilter("ignore")
def table(n, rng, frac):
    x1 = rng.normal(size=n); x2 = x1 + 0.1 * rng.normal(size=n)
    y = np.sin(2 * x2) + 0.1 * rng.normal(size=n)
    df = pd.DataFrame({"x1": x1, "x2": x2, "y": y})
    df.loc[rng.random(n) < frac, "x2"] = np.nan
    return df
for seed in range(3):
    rng = np.random.default_rng(seed)
    p = gpscale.fit(table(500, rng, 0.1), target="y", method="exact", max_iter=60, seed=0)
    te = table(400, rng, 0.0); te.loc[te.index[:200], "x2"] = np.nan
    opened = P.open_gaps
    for way in ("indicator", "completed"):
        P.open_gaps = opened if way == "completed" else (lambda X, b: X)
        m, s = p.predict(te.drop(columns="y"), return_std=True)
        e = te.y.to_numpy() - m; g = np.arange(400) < 200
        print(seed, way, "gapped rmse %.3f cov %.3f | complete rmse %.3f cov %.3f" % (
            np.sqrt(np.mean(e[g]**2)), np.mean(np.abs(e[g]) < 1.96*s[g]),
            np.sqrt(np.mean(e[~g]**2)), np.mean(np.abs(e[~g]) < 1.96*s[~g])))
    P.open_gaps = opened
