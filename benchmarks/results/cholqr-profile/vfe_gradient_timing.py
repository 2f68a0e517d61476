"""CholQR's continuous-phase evaluation at m = 512 on KIN40K 10k, one thread: the
SparseGP VFE objective by autograd (today's) against the same bound through SGPR's
written-out gradient (VFEBound with Z = X[I]), interleaved; values and gradients compared.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src:. \
        python benchmarks/results/cholqr-profile/vfe_gradient_timing.py
"""

import time

import torch

from benchmarks.cholqr import kin40k_arrays
from gpscale.kernels import RBF, Scale
from gpscale.kernels.base import cross_matrix
from gpscale.models.sparse import SparseGP
from gpscale.models.vfe_bound import VFEBound

torch.set_num_threads(1)
Xtr, ytr, *_ = kin40k_arrays(None, None, 0)
X = torch.as_tensor(Xtr, dtype=torch.float64)
y = torch.as_tensor(ytr, dtype=torch.float64)
idx = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(0))[:512].tolist()
model = SparseGP(Scale(RBF(1.0, ard_dims=8), 1.0), X, y, idx, noise=0.1, objective="vfe")
params = [p for p in model.parameters() if p.requires_grad]


def autograd_eval():
    f = model.objective()
    return f, torch.autograd.grad(f, params)


def written_out_eval():
    k, Z = model.kernel, model.X[model.inducing]
    f = VFEBound.apply(cross_matrix(k, Z, model.X), k(Z), model.noise,
                       k.diag(model.X).sum(), model.y)
    return f, torch.autograd.grad(f, params)


fa, ga = autograd_eval()
fw, gw = written_out_eval()
print(f"objective autograd {float(fa):.10g}  written-out {float(fw):.10g}  "
      f"diff {float(fa - fw):.3g}")
for _p, a, w in zip(params, ga, gw):
    print(f"grad max |diff| {float((a - w).abs().max()):.3g}  (max |grad| "
          f"{float(a.abs().max()):.3g})")
times = {"autograd": [], "written-out": []}
for _ in range(5):
    for name, fn in (("autograd", autograd_eval), ("written-out", written_out_eval)):
        t0 = time.perf_counter()
        fn()
        times[name].append(time.perf_counter() - t0)
for name, ts in times.items():
    print(f"{name}: median {sorted(ts)[2]:.3f} s per evaluation+gradient "
          f"({', '.join(f'{t:.3f}' for t in ts)})")
print(f"ratio autograd / written-out: "
      f"{sorted(times['autograd'])[2] / sorted(times['written-out'])[2]:.2f}")
