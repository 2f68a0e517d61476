"""The CG solver's pathwise predictive variances against the Cholesky ones at the same
θ (issue 48): relative error of var(f(x*)) over test points vs the number of draws S.
One thread; prints one JSON line per (shape, S). Run: python measure.py"""

import json
import time

import torch

from gpscale.kernels import make_kernel
from gpscale.models import ConjugateGradients, ExactGP

torch.set_num_threads(1)
SHAPES = [  # (n, d, noise variance, lengthscale): standardised units, outputscale 1
    (300, 2, 0.05, 0.7), (1000, 4, 0.01, 1.0), (2000, 3, 1e-3, 0.8), (2000, 6, 0.1, 2.0)]
DRAWS = (16, 64, 256, 1024)


def data(n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    Xs = torch.randn(500, d, generator=g, dtype=torch.float64) * 1.2
    y = torch.sin(X @ torch.linspace(1, 0.2, d, dtype=torch.float64))
    return X, y + 0.1 * torch.randn(n, generator=g, dtype=torch.float64), Xs


for n, d, noise, ls in SHAPES:
    X, y, Xs = data(n, d)
    kernel = make_kernel("rbf-ard", d)
    with torch.no_grad():
        kernel.base.lengthscale = torch.full((d,), ls, dtype=torch.float64)
    exact = ExactGP(kernel, X, y, noise=noise)
    ref = exact.predict(Xs).var
    for S in DRAWS:
        t0 = time.perf_counter()
        cg = exact.with_solver(ConjugateGradients(
            tol=1e-8, variance="pathwise", variance_options={"num_samples": S}))
        cg.solve()
        var = cg.predict(Xs).var
        rel = (var / ref - 1).abs()
        std_ratio = (var / ref).sqrt()
        print(json.dumps({
            "n": n, "d": d, "noise": noise, "draws": S,
            "median_rel_err_var": round(float(rel.median()), 4),
            "p99_rel_err_var": round(float(rel.quantile(0.99)), 4),
            "median_rel_err_std": round(float((std_ratio - 1).abs().median()), 4),
            "std_ratio_range": [round(float(std_ratio.min()), 3),
                                round(float(std_ratio.max()), 3)],
            "seconds": round(time.perf_counter() - t0, 2)}), flush=True)
