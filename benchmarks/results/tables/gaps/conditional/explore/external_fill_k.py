"""txhousing subsample: complete vs 10% removed (gpscale default) vs removed with gaps
filled by a kNN conditional mean (+ 0/1 indicator columns), exact GP via gpscale.fit."""
import sys, tempfile, time, numpy as np, pandas as pd
from pathlib import Path
sys.path.insert(0, ".")
from benchmarks.tables import _split, _gpscale, _hgb
from sklearn.impute import KNNImputer
rows, seeds, k = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], int(sys.argv[3]); IND = sys.argv[4] == "ind"
T = "median"
def knnfill(tr, te):
    num = [c for c in tr.columns if c not in (T, "city")]
    city = pd.get_dummies(pd.concat([tr.city, te.city]), dtype=float)
    mu, sd = tr[num].mean(), tr[num].std()
    def feats(f, cf): return np.hstack([((f[num] - mu) / sd).to_numpy(), cf.to_numpy()])
    imp = KNNImputer(n_neighbors=k).fit(feats(tr, city.iloc[:len(tr)]))
    out = []
    for f, cf in ((tr, city.iloc[:len(tr)]), (te, city.iloc[len(tr):])):
        miss = f[num].isna()
        g = f.copy()
        g[num] = imp.transform(feats(f, cf))[:, :len(num)] * sd.to_numpy() + mu.to_numpy()
        for c in num:
            if IND:
                g[c + "_gap"] = miss[c].astype(float)
        out.append(g)
    return out
for seed in seeds:
    with tempfile.TemporaryDirectory() as d:
        d = Path(d); (d/"c").mkdir(); (d/"r").mkdir(); (d/"f").mkdir()
        res = {}
        for tag, rem in (("complete", 0.0), ("removed", 0.1)):
            tr, te = _split("txhousing", seed, rows, d / tag[0], rem)
            y = pd.read_csv(te)[T].to_numpy()
            m, s, *_ = _gpscale(tr, te, T, ()) if tag == "complete" else (np.zeros(len(y)), None); res[tag] = (m, s, y, 0)
            res["hgb-" + tag] = (_hgb(tr, te, T, (), seed)[0], None, y, 0)
            if rem:
                a, b = knnfill(pd.read_csv(tr), pd.read_csv(te))
                ftr, fte = d / "f/train.csv", d / "f/test.csv"
                a.to_csv(ftr, index=False); b.to_csv(fte, index=False)
                t0 = time.time(); m, s, *_ = _gpscale(ftr, fte, T, ()); res["knnfill"] = (m, s, y, time.time() - t0)
                gap = pd.read_csv(te).drop(columns=[T, "city"]).isna().any(axis=1).to_numpy()
        base = None
        for tag, (m, s, y, t) in res.items():
            r = float(np.sqrt(np.mean((m - y) ** 2)))
            if tag == "complete": base = r
            line = f"seed {seed} {tag:18s} rmse {r:9.0f} /complete {r/base:6.3f}"
            if s is not None:
                cov = np.abs(m - y) <= 1.96 * s
                line += f" cov {cov.mean():.3f}"
                if tag != "complete" and tag != "hgb-complete":
                    rg = np.sqrt(np.mean((m - y)[gap] ** 2)); rc = np.sqrt(np.mean((m - y)[~gap] ** 2))
                    line += f" gap-rows rmse {rg:.0f} cov {cov[gap].mean():.3f} | complete-rows {rc:.0f} cov {cov[~gap].mean():.3f}"
            print(line + f" t {t:.0f}s", flush=True)
