"""Shared-step check: the exact GP with repeated inputs merged (today: noise σ²/c at each
distinct input, gpscale.models.copies) against every row kept (before), fold 0 of every
UCI set in ../shared/data, training rows capped at 2000, one thread.
Usage: python copies_check.py merged|rows > OUT.jsonl"""
import json
import sys
import time
import warnings

import numpy as np
import torch

torch.set_num_threads(1)
import gpscale  # noqa: E402
import gpscale.methods.exact as exact  # noqa: E402
from gpscale.bench.uci_large import _split  # noqa: E402

mode = sys.argv[1]
if mode == "rows":
    exact.merge_copies = lambda X, y: (X, y, None)
SETS = ["challenger", "fertility", "concreteslump", "autos", "servo", "breastcancer",
        "machine", "autompg", "forest", "stock", "solar", "skillcraft", "pumadyn32nm",
        "elevators", "kin40k", "keggundirected"]
warnings.simplefilter("ignore")
for name in SETS:
    Xtr, ytr, Xte, yte = _split(name, 0, 2000, None)
    t0 = time.perf_counter()
    p = gpscale.fit(Xtr, ytr, method="exact", seed=0)
    fit_s = time.perf_counter() - t0
    m, s = p.predict(Xte, return_std=True, include_noise=True)
    r = (yte - m) / np.std(ytr)
    v = np.maximum((s / np.std(ytr)) ** 2, 1e-12)
    print(json.dumps({"set": name, "mode": mode, "rows": len(ytr),
                      "held": int(p.model.n), "objective": p.result.objective,
                      "evals": p.result.n_evals, "rmse": float(np.sqrt(np.mean(r * r))),
                      "nlpd": float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * r * r / v)),
                      "noise": float(p.model.noise.detach()), "fit_s": fit_s}), flush=True)
