"""How much of txhousing's loss with 10 % of cells removed is in the data: gradient
boosting (as `bench tables` runs it) on the complete and the 10 %-removed split of seed
0, every row; then, for each test row of the removed split, HGB trained on the complete
training rows with only the columns that row has (one model per pattern of gaps); and
HGB without each column on the complete split. Usage (repository root):
python hgb_patterns.py"""
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor

sys.path.insert(0, ".")
from benchmarks.tables import _split  # noqa: E402

T = "median"


def frame(path):
    df = pd.read_csv(path)
    df["city"] = df["city"].astype("category")
    return df


with tempfile.TemporaryDirectory() as d:
    (Path(d) / "c").mkdir()
    (Path(d) / "r").mkdir()
    trc, tec = (frame(p) for p in _split("txhousing", 0, None, Path(d) / "c", 0.0))
    trr, ter = (frame(p) for p in _split("txhousing", 0, None, Path(d) / "r", 0.1))
levels = sorted(trc.city.unique())
for f in (trc, tec, trr, ter):
    f["city"] = f["city"].cat.set_categories(levels)
cols = [c for c in trc.columns if c != T]
y = tec[T].to_numpy()


def rmse(m):
    return float(np.sqrt(np.mean((y - m) ** 2)))


def fit(tr, cs):
    return HistGradientBoostingRegressor(categorical_features="from_dtype",
                                         random_state=0).fit(tr[cs], tr[T])


rc = rmse(fit(trc, cols).predict(tec[cols]))
rr = rmse(fit(trr, cols).predict(ter[cols]))
print(f"HGB complete {rc:.0f}, 10 % removed {rr:.0f}: ratio {rr / rc:.3f}")
gaps = ter[cols].isna()
pattern = gaps.apply(tuple, axis=1)


def per_pattern(train):
    """Each test row predicted by HGB trained on ``train`` with that row's columns only."""
    pred = np.empty(len(ter))
    for key, idx in pattern.groupby(pattern).groups.items():
        cs = [c for c, missing in zip(cols, key) if not missing]
        pred[ter.index.get_indexer(idx)] = fit(train, cs).predict(ter.loc[idx, cs])
    return rmse(pred)


ro, rp = per_pattern(trc), per_pattern(trr)
print(f"one HGB per pattern of gaps, trained on the split's rows before removal: {ro:.0f}, "
      f"ratio {ro / rc:.3f}")
print(f"one HGB per pattern of gaps, trained on the removed split's rows: {rp:.0f}, "
      f"ratio {rp / rc:.3f}")
for c in cols:
    cs = [x for x in cols if x != c]
    r = rmse(fit(trc, cs).predict(tec[cs]))
    print(f"  without {c:10s} {r:.0f}, ratio {r / rc:.3f}")
print("share of test rows with each gap", gaps.mean().round(3).to_dict(),
      "with any", round(float(gaps.any(axis=1).mean()), 3))
