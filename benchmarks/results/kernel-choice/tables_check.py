"""The default kernel choice against the old default on the four real tables: 2 000 training
rows and 1 000 test rows of each (seeded shuffle), the exact GP, one thread. Run from the
repository root with PYTHONPATH=src; its output is tables-check.txt."""
import warnings, time, numpy as np, pandas as pd, torch, gpscale
torch.set_num_threads(1); warnings.simplefilter("ignore")
T = {"cps_earnings": ("earnings", []), "gss_wages": ("realrinc", []), "movies": ("rating", ["title"]), "txhousing": ("median", [])}
for name, (target, excl) in T.items():
    df = pd.read_csv(f"../shared/data/tables/{name}.csv")
    df = df[df[target].notna()].sample(frac=1.0, random_state=0)
    tr, te = df.iloc[:2000], df.iloc[2000:3000]
    row = {}
    for k in ("auto", "rbf-ard"):
        t = time.time()
        p = gpscale.fit(tr, target=target, exclude=excl, kernel=k, method="exact")
        m, s = p.predict(te.drop(columns=[target]), return_std=True)
        y = te[target].to_numpy(); r = (y - m) / y.std(); v = (s / y.std())**2
        row[k] = (float(np.sqrt(np.mean(r*r))), float(np.mean(0.5*np.log(2*np.pi*v)+0.5*r*r/v)), p.kernel_name, round(time.time()-t))
    print(name, row, flush=True)
