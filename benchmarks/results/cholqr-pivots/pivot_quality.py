"""How good a proposal each information-pivot rule makes, against the exact ΔF of every
candidate, on ESOL (split 0 of cholqr-discrete, m = 64).

A state (inducing set and hyperparameters) is taken after a short default CholQR fit;
then, for T swap attempts (a random inducing point removed, as step (I) of §3.4), every
rule builds its pivots for the full set (as after a redraw), ranks all candidates
(step III), and the exact ΔF of every candidate (eqs. 14–16, from the dense kernel
matrix' columns) says where its proposal stands. The factors are put back exactly
(undo_remove) between rules.

    PYTHONPATH=src:. python benchmarks/results/cholqr-pivots/pivot_quality.py [T] [epochs, 0: to its stop rule]
"""

import sys
import time

import numpy as np
import torch

from benchmarks.cholqr_discrete import featurize
from gpscale.data import load_discrete
from gpscale.linalg import CholQRFactors
from gpscale.train.cholqr import fit_cholqr
from gpscale.train.cholqr_scoring import InfoPivots, exact_gain, factor_objective

T = int(sys.argv[1]) if len(sys.argv) > 1 else 12
EPOCHS = (int(sys.argv[2]) or None) if len(sys.argv) > 2 else 5  # 0: to the stop rule
RULES = [("random", 16), ("random", 64), ("oi", 16), ("oi", 64), ("random", 128)]

strings, y_all = load_discrete("ESOL")
X_all, make_kernel = featurize("ESOL", strings, "cpu")
n = len(strings)
n_test = int(round(0.1 * n))
perm = np.random.default_rng(0 + 1000 + 0).permutation(n)  # split 0, seed 0
tr = perm[n_test:]
y = torch.as_tensor((y_all[tr] - y_all[tr].mean()) / y_all[tr].std(), dtype=torch.float64)
X = X_all[torch.as_tensor(tr)]
model, res = fit_cholqr(X, y, make_kernel(), 64, noise=0.1, seed=0, max_epochs=EPOCHS)
print(f"state: default CholQR-z16 after {len(res.history) - 1} epochs ({res.reason}), "
      f"bound {res.objective:.1f}")
kern, noise = model.kernel, model.noise.detach()
with torch.no_grad():
    K = kern(X, X).detach()
    f = CholQRFactors(kern, X, y, model.inducing.tolist(), noise)
F = factor_objective(f)
gen = torch.Generator().manual_seed(7)
stats = {r: [] for r in RULES}
t0 = time.perf_counter()
for t in range(T):
    p = int(torch.randint(f.k, (1,), generator=gen))
    exact = None
    for sel, z in RULES:
        info = InfoPivots(f, z, torch.Generator().manual_seed(100 + t), select=sel)
        J = list(info.J)
        i, _ = info.remove(f, p if exact is None else f.k - 1)  # i is last after an undo
        F_down = factor_objective(f)
        approx = info.approx_gains(f, exclude=[i])
        if exact is None:
            exact = torch.full((n - n_test,), -float("inf"), dtype=torch.float64)
            for j in range(len(tr)):
                if j in f.pivots or j == i:
                    continue
                g, _ = exact_gain(f, j, ell=f.new_column(j, kcol=K[:, j], rtol=1e-8))
                exact[j] = g
            best = float(exact.max())
        j = int(torch.argmax(approx))
        ok = torch.isfinite(exact)
        pct = float((exact[ok] < exact[j]).double().mean())
        e, a = exact[ok].numpy(), approx[ok].numpy()
        fin = np.isfinite(a)
        rho = np.corrcoef(np.argsort(np.argsort(a[fin])), np.argsort(np.argsort(e[fin])))[0, 1]
        stats[(sel, z)].append({"accept": F_down - float(exact[j]) < F,
                                "pct": pct, "gap": best - float(exact[j]), "rho": rho,
                                "in_J": j in J, "seen": float(fin.mean()),
                                "best_accept": F_down - best < F, "j": j})
        info.undo_remove(f)
print(f"{T} attempts, {time.perf_counter() - t0:.1f} s; n = {len(tr)}, m = 64")
print("| rule | proposal accepted | best candidate would be | proposal's exact-ΔF percentile "
      "| ΔF(best) − ΔF(proposal), nats | rank correlation approx/exact | proposal is an "
      "information pivot | candidates scored (a_j ≠ 0) | distinct proposals |")
print("|---|---|---|---|---|---|---|---|---|")
for (sel, z), rows in stats.items():
    def mean(k, rows=rows):
        return np.mean([r[k] for r in rows])
    print(f"| {sel}-z{z} | {mean('accept'):.2f} | {mean('best_accept'):.2f} | "
          f"{mean('pct'):.3f} | {mean('gap'):.2f} | {mean('rho'):.2f} | {mean('in_J'):.2f} | "
          f"{mean('seen'):.2f} | {len({r['j'] for r in rows})} of {len(rows)} |")
