"""CholQR-VFE on a kin40k subsample run to its own stopping rule (no clock, no epoch cap):
prints every epoch and the rule that stopped it. Usage (one thread):
    PYTHONPATH=src:. python benchmarks/results/cholqr-race/greedy-start/converge.py n m [swaps] [init]
"""
import sys

import torch

from benchmarks.cholqr import _rbf, kin40k_arrays
from gpscale.train.cholqr import fit_cholqr

n, m = int(sys.argv[1]), int(sys.argv[2])
swaps = sys.argv[3] if len(sys.argv) > 3 else "60"
init = sys.argv[4] if len(sys.argv) > 4 else "random"
Xtr, ytr, *_ = kin40k_arrays(n, 1000, 0)
X = torch.as_tensor(Xtr, dtype=torch.float64)
y = torch.as_tensor(ytr, dtype=torch.float64)
_, res = fit_cholqr(X, y, _rbf(X.shape[1]), m, noise=0.1, seed=0,
                    swaps_per_epoch=None if swaps == "60" else
                    (swaps if swaps == "sweep" else int(swaps)),
                    init=init.split("+")[0], prefit=init.endswith("+fit"))
for r in res.history:
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()})
print(res)
print("stop rule:", res.history[-1].get("stop"), "| converged:", res.converged,
      "| swaps attempted", sum(r.get("attempts", 0) for r in res.history),
      "accepted", sum(r.get("accepted", 0) for r in res.history))
