"""elevators fold 2: the exact GP at its defaults with matern32-ard named (Lin et al.'s
kernel) against auto's Matérn-5/2 (budget run 4)."""
import json, sys, time
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root
from benchmarks.uci_large import _split
import gpscale
Xtr, ytr, Xte, yte = _split("elevators", 2, None, None)
t = time.perf_counter()
p = gpscale.fit(Xtr, ytr, method="exact", kernel="matern32-ard", seed=0)
fit_s = time.perf_counter() - t
my, sy = ytr.mean(), ytr.std()
m, s = p.predict(Xte, return_std=True, include_noise=True)
r = (yte - m) / sy; var = (s / sy) ** 2
print(json.dumps({"fold": 2, "kernel": p.kernel_name, "fit_s": fit_s, "rmse": float(np.sqrt(np.mean(r * r))),
                  "nlpd": float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * r * r / var)),
                  "refine_evals": sum(h.get("phase") == "refine" for h in p.result.history)}))
