"""GRIEF-I's starting point on one fold, without the chain: test RMSE of the eq. 16 kernel
at the prior mode (w = 1, σ² = σ₀², θ from the exact-GP initialisation, as
``fit_grief_i`` builds it), with the grid filled to m̄ points per column (GRIEF-I's
default) and without (GRIEF-II's grid), beside the exact GP of the initialisation (ML-II
on its 1000-point subset, the benchmark's ``exact``).

Run from the repository root (about half a minute per set on one core):
``python benchmarks/results/grief-uci-large-eq16/prior_mode.py elevators 0``.
"""

from __future__ import annotations

import sys

import torch

from gpscale.data import load_uci
from gpscale.features.grief import GriefFeatures, fill_grid, grid_1d
from gpscale.kernels import Scale
from gpscale.metrics import rmse
from gpscale.models import ExactGP, FeatureGP
from gpscale.models.grief_eigen import ReweightedGriefPosterior
from gpscale.train.grief import init_exact, separable_kernel


def main(name: str, fold: int, grid: str = "quantile") -> None:
    torch.set_num_threads(1)
    split = load_uci(name, fold, standardize=True)
    X = torch.as_tensor(split.X_train, dtype=torch.float64)
    y = torch.as_tensor(split.y_train, dtype=torch.float64)
    Xs = torch.as_tensor(split.X_test, dtype=torch.float64)
    yt = split.scaler.inverse_y(split.y_test)

    def score(mean: torch.Tensor) -> float:
        return rmse(yt, split.scaler.inverse_y(mean.detach().numpy()))

    theta = init_exact(X, y, "rbf", seed=fold)  # as grief-uci: seed = 0 + fold
    sub = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(fold))[:1000]
    exact = ExactGP(Scale(separable_kernel("rbf", X.shape[1], theta["lengthscale"]),
                          float(theta["outputscale"])), X[sub], y[sub],
                    noise=float(theta["noise"]))
    print(f"{name} fold {fold}: n = {X.shape[0]}, d = {X.shape[1]}, σ₀² = "
          f"{float(theta['noise']):.4g}, s₀ = {float(theta['outputscale']):.4g}")
    print(f"  exact GP of the initialisation (1000 rows): rmse {score(exact.predict(Xs)[0]):.5f}")
    s0 = theta["outputscale"].reshape(())
    for fill in (True, False):
        grids = [grid_1d(X[:, i], 10, grid) for i in range(X.shape[1])]
        sizes = [len(g) for g in grids]
        if fill:
            grids = [fill_grid(g, 10) for g in grids]
        feats = GriefFeatures(None, 1000, m_bar=10, kernel="rbf", grid=grid,
                              lengthscale=theta["lengthscale"].cpu(), dtype=torch.float64,
                              grids=grids)
        gram, proj, yy = FeatureGP(feats, weights="fixed", X=X, y=y).statistics()
        p = feats.num_features
        post = ReweightedGriefPosterior(feats, s0, gram * s0, proj * s0.sqrt(), yy,
                                        torch.ones(1, p, dtype=torch.float64),
                                        theta["noise"].reshape(1).to(torch.float64),
                                        n=X.shape[0])
        print(f"  prior mode, fill={fill}: p = {p}, log10 m = {feats.log10_m:.2f}, "
              f"grid sizes {sizes if not fill else [len(g) for g in grids]}: "
              f"rmse {score(post.predict(Xs)[0]):.5f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *(sys.argv[3:]))
