"""Model files across the change: ``write DIR`` (run with the code before) fits small
seeded sgpr models (rows in memory; by passes, frozen to its sums) and saves each file
with its predictions; ``read DIR`` (the code after) loads each file and checks that its
predictions are torch.equal to those saved, and that its model class is the same."""
import sys, warnings
import numpy as np, torch
import gpscale
warnings.simplefilter("ignore")
torch.set_num_threads(1)
mode, folder = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(3)
X = rng.uniform(-2, 2, size=(400, 3)); y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=400)
Xt = rng.uniform(-2, 2, size=(50, 3))
cases = {"sgpr-held": dict(method="sgpr", m=10, max_iter=10),
         "sgpr-passes": dict(method="sgpr", m=10, max_iter=10, passes=True, subsample=200, refine=3)}
for name, kw in cases.items():
    path = f"{folder}/{name}.pt"
    if mode == "write":
        p = gpscale.fit(X, y, kernel="rbf-ard", seed=0, **kw)
        p.save(path)
        torch.save({"pred": p.predict(Xt, return_std=True), "cls": type(p.model).__name__},
                   f"{folder}/{name}.pred")
    else:
        p = gpscale.load(path)
        want = torch.load(f"{folder}/{name}.pred", weights_only=False)
        got = p.predict(Xt, return_std=True)
        same = all(np.array_equal(a, b) for a, b in zip(got, want["pred"]))
        print(f"{name:12s} class {want['cls']} -> {type(p.model).__name__}: predictions identical={same}")
