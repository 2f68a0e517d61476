"""``gpscale bench grief-fig1``: Fig. 1 of Evans & Nair (2018), GP-GRIEF against VFE on
a two-dimensional problem.

The paper: n = 10 training points of f(x) = sin(x₁) sin(x₂) with N(0, 0.1) noise, an
SE base kernel whose lengthscale and σ² are found by maximising the LML; VFE
(Titsias 2009) with m = 4 inducing points, their locations optimised too; GRIEF with
p = 4 eigenfunctions of an m = 25 (5 × 5) grid, the weights not optimised. Test RMSE
0.47 (VFE) and 0.34 (GRIEF, the same as the exact GP's).

The paper states neither the input domain, the test set nor the draw of the 10
points; here (our choice, said in the report): x ~ U(−π, π)², noise variance 0.1,
the test set a 40 × 40 grid over the domain (RMSE against f and against a noisy draw),
``--seeds`` draws, each model with one lengthscale and a learned signal variance as
well (GRIEF: W = sI, the grid evenly spaced over the training points' range, ML-II
over the lengthscale on a log grid; "griefard" is GRIEF-II's SE-ARD L-BFGS fit), and
the exact GP (SE, ML-II) beside them.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .harness import register

#: "griefard": GRIEF-II as gpscale fits it (SE-ARD, L-BFGS), not in the paper's figure
PAPER = {"vfe": 0.47, "grief": 0.34, "exact": 0.34, "griefard": None}


def _arguments(p) -> None:
    p.add_argument("--seeds", type=int, default=20, help="draws of the 10 points (20)")
    p.add_argument("--n", type=int, default=10, help="training points (the paper's 10)")
    p.add_argument("--noise-var", type=float, default=0.1, help="noise variance (0.1)")
    p.add_argument("--domain", type=float, nargs=2, default=[-math.pi, math.pi],
                   metavar=("LO", "HI"), help="each input ~ U(LO, HI) (default −π π)")


def _problem(seed: int, n: int, noise_var: float, lo: float, hi: float):
    """Training points, test grid, the noiseless f there and a noisy draw of it."""
    g = torch.Generator().manual_seed(seed)
    X = lo + (hi - lo) * torch.rand(n, 2, generator=g, dtype=torch.float64)
    f = torch.sin(X[:, 0]) * torch.sin(X[:, 1])
    y = f + math.sqrt(noise_var) * torch.randn(n, generator=g, dtype=torch.float64)
    t = torch.linspace(lo, hi, 40, dtype=torch.float64)
    Xs = torch.cartesian_prod(t, t)
    fs = torch.sin(Xs[:, 0]) * torch.sin(Xs[:, 1])
    ys = fs + math.sqrt(noise_var) * torch.randn(fs.shape[0], generator=g, dtype=torch.float64)
    return X, y, Xs, fs, ys


def _fits(X, y, Xs):
    """Test means of the exact GP, VFE (m = 4) and GRIEF (p = 4, m = 25)."""
    import warnings

    from gpscale.kernels import RBF, Scale
    from gpscale.models import ExactGP
    from gpscale.train.grief import fit_grief_ii
    from gpscale.train.lbfgs import fit_lbfgs
    from gpscale.train.sgpr import fit_sgpr

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = ExactGP(Scale(RBF(1.0), 1.0), X, y, noise=0.1)
        fit_lbfgs(exact, max_iter=200, method="exact")
        out["exact"] = exact.predict(Xs).mean
        vfe, _ = fit_sgpr(X, y, Scale(RBF(1.0), 1.0), m=4, noise=0.1, init="kmeans",
                          max_iter=500)
        out["vfe"] = vfe.predict(Xs).mean
        out["grief"] = _grief_isotropic(X, y).predict(Xs).mean
        grief, _ = fit_grief_ii(X, y, p=4, m_bar=5, kernel="rbf", grid="uniform",
                                init_points=len(y), max_iter=200)
        out["griefard"] = grief.predict(Xs).mean
    return out


def _grief_isotropic(X, y, points: int = 61):
    """GRIEF (p = 4, 5 × 5 grid) with one lengthscale, as the paper's "kernel
    lengthscale": ML-II over it on a log grid, the signal variance and σ² at each
    point by :func:`~gpscale.train.grief.set_best_scale_and_noise` (exact NLML on its
    grid); returns the model of the lowest NLML."""
    from gpscale.features import GriefFeatures
    from gpscale.models import FeatureGP
    from gpscale.train.grief import set_best_scale_and_noise

    best, best_value = None, math.inf
    for ls in torch.logspace(-1.5, 1.5, points, dtype=torch.float64):
        feats = GriefFeatures(X, 4, m_bar=5, kernel="rbf", lengthscale=float(ls))
        model = FeatureGP(feats, X=X, y=y, noise=0.1, weights="scalar")
        model.weight = torch.full_like(model.weight, float(y.var()))
        set_best_scale_and_noise(model)
        with torch.no_grad():
            value = float(model.nlml())
        if value < best_value:
            best, best_value = model, value
    return best


@register("grief-fig1", help="GP-GRIEF (p = 4, m = 25) vs VFE (m = 4) vs exact GP on the "
          "paper's 2-D problem (Fig. 1)", add_arguments=_arguments)
def run(args, rec) -> None:
    lo, hi = args.domain
    # RMSE against the noiseless f ("f") and against noisy test data ("y")
    errs: dict[str, list[float]] = {f"{k}_{t}": [] for k in PAPER for t in ("f", "y")}
    for seed in range(args.seeds):
        X, y, Xs, fs, ys = _problem(seed, args.n, args.noise_var, lo, hi)
        row = {"kind": "seed", "seed": seed}
        for name, mean in _fits(X, y, Xs).items():
            for t, ref in (("f", fs), ("y", ys)):
                e = float((mean.detach() - ref).pow(2).mean().sqrt())
                errs[f"{name}_{t}"].append(e)
                row[f"rmse_{name}_{t}"] = e
        rec.record(**row)
    arr = {k: np.array(v) for k, v in errs.items()}
    for key, v in arr.items():
        name, t = key.split("_")
        rec.record(kind="model", model=name, against=t, rmse_median=float(np.median(v)),
                   rmse_mean=float(v.mean()), rmse_std=float(v.std(ddof=1)) if len(v) > 1
                   else math.nan, paper_rmse=PAPER[name])
    summary = {"seeds": args.seeds, "domain": [lo, hi]}
    for t in ("f", "y"):
        g, v = arr[f"grief_{t}"], arr[f"vfe_{t}"]
        summary[f"grief_beats_vfe_{t}"] = f"{int((g < v).sum())}/{args.seeds}"
        summary[f"median_grief_over_vfe_{t}"] = float(np.median(g / v))
    ratio = summary["median_grief_over_vfe_y"]
    rec.summary(paper_grief_over_vfe=0.34 / 0.47, **summary)
    rec.target("median RMSE GRIEF / VFE (noisy test data) within 10 % of the paper's 0.34/0.47",
               abs(ratio - 0.34 / 0.47) / (0.34 / 0.47), 0.10, "<=",
               "relative gap of our median ratio to the paper's ratio")
    rec.note("the domain, the noise variance's reading (0.1 = variance), the test set (a "
             "40 × 40 grid, scored against f and against a noisy draw of it) and the seeds "
             "are our choices: the paper states none of them.")
