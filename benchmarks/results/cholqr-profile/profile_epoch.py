"""Profile CholQR-VFE epochs at m = 512 on KIN40K's 10k training rows (one thread).

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src \
        python benchmarks/results/cholqr-profile/profile_epoch.py [epochs] > out.txt

Prints each epoch's history row, then cProfile's top functions by cumulative and by
own time. Same preprocessing and kernel as ``python -m benchmarks cholqr-kin40k``."""

import cProfile
import io
import pstats
import sys
import time

import torch

from benchmarks.cholqr import kin40k_arrays
from gpscale.kernels import RBF, Scale
from gpscale.train.cholqr import fit_cholqr

torch.set_num_threads(1)
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
Xtr, ytr, *_ = kin40k_arrays(None, None, 0)
X = torch.as_tensor(Xtr, dtype=torch.float64)
y = torch.as_tensor(ytr, dtype=torch.float64)
kernel = Scale(RBF(1.0, ard_dims=X.shape[1]), 1.0)
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
model, res = fit_cholqr(X, y, kernel, 512, objective="vfe", noise=0.1, seed=0,
                        max_epochs=epochs)
prof.disable()
print(f"n={X.shape[0]} m=512 epochs={epochs} wall={time.perf_counter() - t0:.1f}s "
      f"reason={res.reason}")
for row in res.history:
    print(row)
for key in ("cumulative", "tottime"):
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats(key).print_stats(35)
    print(f"\n== sorted by {key}\n" + s.getvalue().split("\n", 7)[-1])
