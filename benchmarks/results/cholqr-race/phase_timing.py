"""Where CholQR's and Titsias-16's time goes at m = 512 on KIN40K 10k (one thread), no
profiler: the continuous phase (``fit_hyperparameters``), CholQR's swap attempts and
the factorisation each discrete phase starts with, Titsias's selection (the rest of
its epoch), timed by wrapping those functions. Same data, kernel and seeds as
``python -m benchmarks cholqr-kin40k --m 512``.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src:. \
        python benchmarks/results/cholqr-race/phase_timing.py [cholqr_epochs]
"""

import sys
import time
from collections import defaultdict

import torch

import gpscale.train.baselines as bl
import gpscale.train.cholqr as cq
from benchmarks.cholqr import kin40k_arrays
from gpscale.kernels import RBF, Scale
from gpscale.models.sparse import SparseGP

torch.set_num_threads(1)
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
Xtr, ytr, *_ = kin40k_arrays(None, None, 0)
X = torch.as_tensor(Xtr, dtype=torch.float64)
y = torch.as_tensor(ytr, dtype=torch.float64)
spent: dict[str, float] = defaultdict(float)
count: dict[str, int] = defaultdict(int)


def timed(name, fn):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[name] += time.perf_counter() - t
            count[name] += 1
    return wrapper


fit_h = cq.fit_hyperparameters
cq.fit_hyperparameters = timed("continuous phase", fit_h)
bl.fit_hyperparameters = cq.fit_hyperparameters
cq._Swapper.attempt = timed("swap attempts", cq._Swapper.attempt)
cq._Swapper.__init__ = timed("discrete phase setup (factorisation, pivots)",
                             cq._Swapper.__init__)
# the forward only: L-BFGS's closure calls backward() outside this wrapper
SparseGP.objective = timed("  of which objective forward evaluations",
                           SparseGP.objective)


def report(title, wall, epochs_run):
    print(f"\n{title}: wall {wall:.1f} s, {epochs_run} epochs")
    rest = wall
    for name in list(spent):
        if not name.startswith("  "):
            rest -= spent[name]
        print(f"  {name:48s} {spent[name]:7.1f} s  {100 * spent[name] / wall:5.1f} %  "
              f"({count[name]} calls, {spent[name] / max(count[name], 1):.3f} s each)")
    print(f"  {'rest (Titsias: its greedy selection)':48s} {rest:7.1f} s  "
          f"{100 * rest / wall:5.1f} %")
    spent.clear()
    count.clear()


t0 = time.perf_counter()
model, res = cq.fit_cholqr(X, y, Scale(RBF(1.0, ard_dims=8), 1.0), 512, objective="vfe",
                           noise=0.1, seed=0, max_epochs=epochs)
wall = time.perf_counter() - t0
for row in res.history:
    print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
report("CholQR-VFE", wall, epochs)

t0 = time.perf_counter()
model, res = bl.fit_selected("titsias-16", X, y, Scale(RBF(1.0, ard_dims=8), 1.0), 512,
                             objective="vfe", noise=0.1, seed=0, epochs=10)
wall = time.perf_counter() - t0
for row in res.history:
    print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
report(f"Titsias-16 ({res.reason})", wall, len(res.history))
