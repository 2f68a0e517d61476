import sys, tempfile, numpy as np, pandas as pd
from pathlib import Path
sys.path.insert(0, ".")
from benchmarks.tables import _split, _hgb
for seed in (0, 1, 2):
    out = []
    for rem in (0.0, 0.1):
        with tempfile.TemporaryDirectory() as d:
            tr, te = _split("txhousing", seed, 2000, Path(d), rem)
            y = pd.read_csv(te)["median"].to_numpy()
            out.append(float(np.sqrt(np.mean((_hgb(tr, te, "median", (), seed)[0] - y) ** 2))))
    print(seed, "HGB complete %.0f removed %.0f ratio %.3f" % (out[0], out[1], out[1] / out[0]))
