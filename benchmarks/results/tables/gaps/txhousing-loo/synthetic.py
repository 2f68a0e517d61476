import warnings, numpy as np, pandas as pd, gpscale
from gpscale.methods.kernel_choice import loo_predictions
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
    m, v = loo_predictions(p.model); z2 = ((p.model.y - m)**2 / v).numpy()
    c = p.inputs.gap_columns()[0]; g = p.model.X.numpy()[:, c] == 1
    print(seed, "alpha gapped %.2f complete %.2f n %d" % (z2[g].mean(), z2[~g].mean(), g.sum()))
