"""txhousing subsampled to 2000 rows (seeded), 10 % of numeric cells removed as
`bench tables --remove-cells 0.1` removes them, auto as a user runs it; test RMSE and
95 % coverage on all test rows, on rows with a gap, on rows without sales or volume,
and on complete rows. Usage (repository root): python subsample.py SEED [SHARE]
(SHARE: of cells removed, default 0.1; 0: the table as it comes, its own gaps only)"""
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, ".")
from benchmarks.tables import _gpscale, _split  # noqa: E402

T = "median"
seed = int(sys.argv[1])
share = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
with tempfile.TemporaryDirectory() as d:
    tr, te = _split("txhousing", seed, 2000, Path(d), share)
    test = pd.read_csv(te)
    y = test[T].to_numpy()
    gap = test.drop(columns=[T, "city"]).isna().any(axis=1).to_numpy()
    sv = test[["sales", "volume"]].isna().any(axis=1).to_numpy()
    t0 = time.time()
    m, s, *_ = _gpscale(tr, te, T, ())
    e, t = m - y, time.time() - t0
cov = np.abs(e) <= 1.959963984540054 * s


def part(w):
    return f"{np.sqrt(np.mean(e[w] ** 2)):.0f}/{cov[w].mean():.3f}"


print(f"seed {seed} removed {share} RMSE/coverage: all {part(slice(None))} with a gap {part(gap)} "
      f"without sales or volume {part(sv)} complete {part(~gap)} fit+predict {t:.0f} s")
