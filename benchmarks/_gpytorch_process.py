"""GPyTorch's regression tutorial as a whole process, for ``gpscale bench exact-process``.

Run by path (``python _gpytorch_process.py fit TRAIN.csv MODEL.pt --threads T``), never
imported through gpscale, so that its start-up costs what a user's script costs: torch,
gpytorch and numpy. ``fit`` reads a CSV with a header (target column ``y``, last),
standardises X and y on it, fits ConstantMean + ScaleKernel(RBFKernel(ard_num_dims=d)) +
GaussianLikelihood by Adam(lr) on −mll for ``--iters`` steps with GPyTorch's default
settings (its default solver), float64, and saves the state and the scaler with
``torch.save``. ``predict`` (not timed by the benchmark) loads them and writes the
predictive mean and variance of y (noise included, by Cholesky) in the original units.
"""

import argparse
import sys


def _model(X, y):
    import gpytorch

    class Model(gpytorch.models.ExactGP):
        def __init__(self, X, y, likelihood):
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[-1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    return Model(X, y, likelihood).double(), likelihood


def _read(path):
    import numpy as np

    return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)


def fit(args) -> None:
    import gpytorch
    import torch

    data = _read(args.data)
    X, y = data[:, :-1], data[:, -1]
    mx, sx = X.mean(0), X.std(0)
    sx[sx == 0] = 1.0
    my, sy = y.mean(), y.std()
    Xt = torch.as_tensor((X - mx) / sx)
    yt = torch.as_tensor((y - my) / sy)
    model, likelihood = _model(Xt, yt)
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    for _ in range(args.iters):
        optimizer.zero_grad()
        loss = -mll(model(Xt), yt)
        loss.backward()
        optimizer.step()
    torch.save({"state": model.state_dict(), "X": Xt, "y": yt,
                "scaler": [mx, sx, my, sy]}, args.out)


def predict(args) -> None:
    import gpytorch
    import numpy as np
    import torch

    saved = torch.load(args.model, weights_only=False)
    mx, sx, my, sy = saved["scaler"]
    model, likelihood = _model(saved["X"], saved["y"])
    model.load_state_dict(saved["state"])
    model.eval()
    likelihood.eval()
    X = _read(args.data)[:, : len(mx)]
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(2**62):
        out = likelihood(model(torch.as_tensor((X - mx) / sx)))
        mean, var = out.mean.numpy(), out.variance.numpy()
    np.savetxt(args.out, np.column_stack([mean * sy + my, var * sy * sy]), delimiter=",",
               header="mean,var", comments="")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit")
    f.add_argument("data")
    f.add_argument("out")
    f.add_argument("--iters", type=int, default=150)
    f.add_argument("--lr", type=float, default=0.1)
    f.add_argument("--threads", type=int, default=1)
    q = sub.add_parser("predict")
    q.add_argument("model")
    q.add_argument("data")
    q.add_argument("out")
    q.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    (fit if args.command == "fit" else predict)(args)


if __name__ == "__main__":
    sys.exit(main())
