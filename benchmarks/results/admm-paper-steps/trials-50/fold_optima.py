"""Per fold: the hold-out CV loss at the grid's optimum (criterion-grid.jsonl) against the
loss at the optimum L-BFGS reaches from θ⁰ (benchmarks.admm_scaling.holdout_cv_reference,
what the benchmark's `cv-optimum` runs on each fold), σ_e² held at 0.1 — which of the two
is the lower minimum of the criterion.

python fold_optima.py > fold-optima.jsonl   (one thread, about a second a trial)
"""

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))
sys.path.insert(0, str(HERE.parents[3] / "src"))
from benchmarks.admm import _model  # noqa: E402
from benchmarks.admm_scaling import holdout_cv_reference  # noqa: E402
from criterion_grid import cv_loss  # noqa: E402
from gpscale.data.synthetic import synthetic_admm  # noqa: E402
from gpscale.train.admm import kfold_indices  # noqa: E402


def main():
    torch.set_num_threads(1)
    grid = [json.loads(x) for x in (HERE / "criterion-grid.jsonl").read_text().splitlines()]
    only = sys.argv[1:]  # optional: trials to run, e.g. "0 1"
    for g in grid:
        if only and str(g["trial"]) not in only:
            continue
        name, t = g["kernel"], g["trial"]
        ds = synthetic_admm(name, 500, seed=t, noise=0.1)
        x, y = ds.X[:, 0].double(), ds.y.double()
        out = {"kernel": name, "trial": t}
        for k, idx_V in enumerate(kfold_indices(500, 2, t)):
            model = _model(name, ds, 1.2, 0.1, torch.device("cpu"), fix_noise=True)
            holdout_cv_reference(model, validation=idx_V)
            base = model.kernel.base
            th = [float(base.lengthscale.detach())] + (
                [float(base.period.detach())] if name == "lp" else [])
            mask = torch.ones(500, dtype=torch.bool)
            mask[idx_V] = False
            fold = (x[mask], y[mask], x[idx_V], y[idx_V])
            loss = cv_loss(name, torch.tensor([th, g[f"fold{k}"]], dtype=torch.float64), *fold)
            out[f"fold{k}_lbfgs"] = th
            out[f"fold{k}_loss_lbfgs"], out[f"fold{k}_loss_grid"] = map(float, loss)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
