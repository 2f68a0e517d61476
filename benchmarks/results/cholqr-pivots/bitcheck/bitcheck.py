"""Before/after: three default CholQR fits (no info_pivots given) print their objective
values, histories and inducing sets in hex; the two outputs must be byte-identical.

    PYTHONPATH=src python benchmarks/results/cholqr-pivots/bitcheck/bitcheck.py
"""

import json

import torch

from gpscale.kernels import RBF, Scale
from gpscale.train.cholqr import fit_cholqr

out = []
cases = [(300, 20, "vfe", None), (250, 12, "dtc", "sweep"), (400, 40, "vfe", 16)]
for seed, (n, m, kind, spe) in enumerate(cases):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64) * 8
    y = torch.sin(X.sum(1)) + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)
    model, res = fit_cholqr(X, y, Scale(RBF(1.0, ard_dims=2), 1.2), m, objective=kind,
                            seed=seed, max_epochs=6, swaps_per_epoch=spe)
    out.append({"objective": float(res.objective).hex(),
                "pivots": model.inducing.tolist(),
                "hist": [float(h["objective"]).hex() for h in res.history],
                "acc": [h.get("accepted") for h in res.history]})
print(json.dumps(out))
