"""Reference implementations from other libraries, set to the same model as ours.

The model everywhere is y = f(X) + ε with f ~ GP(0, s² k_RBF-ARD) and ε ~ N(0, σ²):

* :class:`GPyTorchExact`: ``gpytorch.models.ExactGP`` with ``ZeroMean``,
  ``ScaleKernel(RBFKernel(ard_num_dims=d))`` and ``GaussianLikelihood`` (noise floor
  lowered to 1e-6 from GPyTorch's 1e-4 so that it can hold any value ours can).
  ``mode`` picks how GPyTorch solves: ``"cholesky"`` (``max_cholesky_size`` raised
  above n), ``"cg"`` (``max_cholesky_size(0)``: preconditioned CG for solves and
  stochastic Lanczos quadrature for log|C|) or ``"default"`` (GPyTorch's own rule:
  Cholesky up to n = 800, CG/Lanczos above; see :func:`gpytorch_defaults`).
* :class:`SklearnGPR`: ``GaussianProcessRegressor`` with
  ``ConstantKernel(s²) * RBF(l) + WhiteKernel(σ²)`` and ``alpha=0`` (so the noise is
  the WhiteKernel's only), ``normalize_y=False``. Its θ is ``log([s², l_1..l_d, σ²])``.

* :func:`gpytorch_sgpr`, :func:`gpytorch_svgp`: GPyTorch's sparse (SGPR,
  ``InducingPointKernel``) and variational (SVGP) regression as its tutorials fit them,
  for the large-data benchmarks (``cholqr-kin40k``, ``uci-large``).

gpytorch and scikit-learn are imported when a class or function is first used (the
``bench`` extra), so importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator

import numpy as np
import torch

from gpscale.kernels import RBF, Kernel, Scale

MODES = ("cholesky", "cg", "default")


def hyperparameters(kernel: Kernel, noise) -> dict[str, np.ndarray | float]:
    """``{"outputscale", "lengthscale", "noise"}`` as floats / a float64 array, read from a
    gpscale ``Scale(RBF(...))`` kernel and a noise variance (tensor or float)."""
    if not (isinstance(kernel, Scale) and isinstance(kernel.base, RBF)):
        raise ValueError(f"peers support Scale(RBF(...)) kernels only, got {kernel!r}")
    return {
        "outputscale": float(kernel.outputscale.detach()),
        "lengthscale": kernel.base.lengthscale.detach().cpu().double().reshape(-1).numpy(),
        "noise": float(torch.as_tensor(noise).detach()),
    }


# -- GPyTorch ------------------------------------------------------------------------
def gpytorch_defaults() -> dict[str, float | int]:
    """GPyTorch's (linear_operator's) default settings that decide its solver."""
    from linear_operator import settings as s

    return {
        "max_cholesky_size": s.max_cholesky_size.value(),
        "cg_tolerance": s.cg_tolerance.value(),
        "max_cg_iterations": s.max_cg_iterations.value(),
        "max_preconditioner_size": s.max_preconditioner_size.value(),
        "min_preconditioning_size": s.min_preconditioning_size.value(),
        "num_trace_samples": s.num_trace_samples.value(),
        "max_lanczos_quadrature_iterations": s.max_lanczos_quadrature_iterations.value(),
    }


@contextlib.contextmanager
def gpytorch_mode(mode: str) -> Iterator[None]:
    """Force GPyTorch's solver: ``cholesky``, ``cg`` or its ``default`` choice."""
    import gpytorch

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "cholesky":
        ctx = gpytorch.settings.max_cholesky_size(2**62)
    elif mode == "cg":
        ctx = gpytorch.settings.max_cholesky_size(0)
    else:
        ctx = contextlib.nullcontext()
    with ctx:
        yield


class GPyTorchExact:
    """GPyTorch exact GP regression with an ARD-RBF kernel, signal variance and noise."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, lengthscale, outputscale: float,
                 noise: float, noise_floor: float = 1e-6) -> None:
        import gpytorch

        class _Model(gpytorch.models.ExactGP):
            def __init__(self, X, y, likelihood):
                super().__init__(X, y, likelihood)
                self.mean_module = gpytorch.means.ZeroMean()
                self.covar_module = gpytorch.kernels.ScaleKernel(
                    gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[-1]))

            def forward(self, x):
                return gpytorch.distributions.MultivariateNormal(
                    self.mean_module(x), self.covar_module(x))

        self.X, self.y = X, y
        lik = gpytorch.likelihoods.GaussianLikelihood(
            noise_constraint=gpytorch.constraints.GreaterThan(noise_floor))
        self.model = _Model(X, y, lik).to(dtype=X.dtype, device=X.device)
        self.likelihood = self.model.likelihood
        self.mll = gpytorch.mlls.ExactMarginalLogLikelihood(self.likelihood, self.model)
        self.set_theta(lengthscale, outputscale, noise)

    def set_theta(self, lengthscale, outputscale: float, noise: float) -> None:
        cov = self.model.covar_module
        like = cov.base_kernel.raw_lengthscale
        ls = torch.as_tensor(np.asarray(lengthscale, dtype=np.float64), dtype=like.dtype)
        cov.base_kernel.lengthscale = ls.to(like.device).expand(like.shape).clone()
        cov.outputscale = torch.tensor(float(outputscale), dtype=like.dtype, device=like.device)
        self.likelihood.noise = torch.tensor([float(noise)], dtype=like.dtype,
                                             device=like.device)

    def theta(self) -> dict[str, np.ndarray | float]:
        cov = self.model.covar_module
        return {
            "outputscale": float(cov.outputscale.detach()),
            "lengthscale": cov.base_kernel.lengthscale.detach().cpu().reshape(-1).numpy(),
            "noise": float(self.likelihood.noise.detach().reshape(-1)[0]),
        }

    def nlml(self, mode: str = "cholesky", grad: bool = True) -> torch.Tensor:
        """NLML (GPyTorch's −mll × n) at the current θ; with ``grad``, backward() too.

        In ``cg`` mode the value is GPyTorch's stochastic (SLQ) estimate.
        """
        self.model.train()
        self.likelihood.train()
        with gpytorch_mode(mode), torch.set_grad_enabled(grad):
            self.model.zero_grad()
            loss = -self.mll(self.model(self.X), self.y) * self.y.shape[0]
            if grad:
                loss.backward()
        return loss.detach()

    def fit_adam(self, iters: int = 100, lr: float = 0.1, mode: str = "default") -> dict:
        """The GPyTorch tutorial recipe: Adam on all parameters, −mll as the loss."""
        self.model.train()
        self.likelihood.train()
        opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        t0 = time.perf_counter()
        with gpytorch_mode(mode):
            for _ in range(iters):
                opt.zero_grad()
                loss = -self.mll(self.model(self.X), self.y)
                loss.backward()
                opt.step()
        if self.X.is_cuda:
            torch.cuda.synchronize(self.X.device)
        return {"optimizer": f"Adam(lr={lr})", "iters": iters, "mode": mode,
                "fit_s": time.perf_counter() - t0}

    @torch.no_grad()
    def predict(self, Xs: torch.Tensor, mode: str = "cholesky") -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
        """Predictive mean and variance of y (noise included) at ``Xs``."""
        import gpytorch

        self.model.eval()
        self.likelihood.eval()
        with gpytorch_mode(mode), gpytorch.settings.fast_pred_var(mode != "cholesky"):
            out = self.likelihood(self.model(Xs))
            return out.mean, out.variance


# -- scikit-learn --------------------------------------------------------------------
def sklearn_theta(outputscale: float, lengthscale, noise: float, d: int) -> np.ndarray:
    """θ of ``ConstantKernel * RBF + WhiteKernel``: log([s², l_1..l_d, σ²])."""
    ls = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (d,))
    return np.log(np.concatenate([[float(outputscale)], ls, [float(noise)]]))


def _counting_gpr():
    from sklearn.gaussian_process import GaussianProcessRegressor

    class CountingGPR(GaussianProcessRegressor):
        """GaussianProcessRegressor that counts likelihood evaluations (nothing else)."""

        n_evals_ = 0

        def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
            if theta is not None:
                self.n_evals_ += 1
            return super().log_marginal_likelihood(theta, eval_gradient, clone_kernel)

    return CountingGPR


class SklearnGPR:
    """scikit-learn GPR with ``ConstantKernel * RBF + WhiteKernel`` and ``alpha=0``."""

    def __init__(self, X: np.ndarray, y: np.ndarray, lengthscale, outputscale: float,
                 noise: float) -> None:
        from sklearn.gaussian_process.kernels import RBF as SkRBF
        from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

        self.X = np.asarray(X, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64).reshape(-1)
        ls = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64),
                             (self.X.shape[1],)).copy()
        self.kernel = (ConstantKernel(float(outputscale)) * SkRBF(ls)
                       + WhiteKernel(float(noise)))
        self.gpr = None

    @property
    def theta(self) -> np.ndarray:
        """log([s², l_1..l_d, σ²]) of the initial kernel (sklearn's parameterisation)."""
        return self.kernel.theta

    def _fixed(self):
        if self.gpr is None:
            self.gpr = _counting_gpr()(kernel=self.kernel, alpha=0.0, optimizer=None,
                                       normalize_y=False).fit(self.X, self.y)
        return self.gpr

    def nlml(self, theta: np.ndarray | None = None, grad: bool = False):
        """−log p(y | θ) (and its gradient in log-θ with ``grad``), at ``theta`` or the
        initial θ, by ``GaussianProcessRegressor.log_marginal_likelihood``."""
        theta = self.theta if theta is None else np.asarray(theta, dtype=np.float64)
        if grad:
            lml, g = self._fixed().log_marginal_likelihood(theta, eval_gradient=True)
            return -lml, -g
        return -self._fixed().log_marginal_likelihood(theta)

    def fit(self, n_restarts_optimizer: int = 0, random_state: int = 0) -> dict:
        """scikit-learn's default optimiser (``fmin_l_bfgs_b``) from the initial θ."""
        gpr = _counting_gpr()(kernel=self.kernel, alpha=0.0, normalize_y=False,
                              n_restarts_optimizer=n_restarts_optimizer,
                              random_state=random_state)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gpr.fit(self.X, self.y)
        fit_s = time.perf_counter() - t0
        self.fitted = gpr
        return {"optimizer": "fmin_l_bfgs_b", "restarts": n_restarts_optimizer,
                "n_evals": gpr.n_evals_, "fit_s": fit_s,
                "nlml": -float(gpr.log_marginal_likelihood_value_),
                "warnings": sorted({type(w.message).__name__ for w in caught})}

    def fitted_theta(self) -> dict[str, np.ndarray | float]:
        """Hyperparameters of the last :meth:`fit`, in the layout of :func:`hyperparameters`."""
        p = np.exp(self.fitted.kernel_.theta)
        return {"outputscale": float(p[0]), "lengthscale": p[1:-1], "noise": float(p[-1])}

    def predict(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance of y (the WhiteKernel adds σ²) after :meth:`fit`."""
        mean, std = self.fitted.predict(np.asarray(Xs, dtype=np.float64), return_std=True)
        return mean, std**2


# -- whole-recipe peers (uci-exact): fit on standardised data, predict y with noise ------
def _adam_on_mll(model, lik, X: torch.Tensor, y: torch.Tensor, steps: int, lr: float):
    """GPyTorch's tutorial loop: ``steps`` full-batch Adam(lr) steps on −mll (the exact
    marginal likelihood object, which an ``InducingPointKernel`` turns into SGPR's bound)."""
    import gpytorch

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    for _ in range(steps):
        opt.zero_grad()
        loss = -mll(model(X), y)
        loss.backward()
        opt.step()


def gpytorch_recipe(X: torch.Tensor, y: torch.Tensor, Xs: torch.Tensor, iters: int = 150,
                    lr: float = 0.1) -> dict:
    """GPyTorch's regression tutorial, unchanged but for float64: ConstantMean,
    ScaleKernel(RBFKernel(ard_num_dims=d)), GaussianLikelihood, its default initial
    values and solver settings, Adam(lr) on −mll for ``iters`` steps. Predictions of y
    (noise included) are exact (Cholesky). Returns mean, var, fit_s."""
    import gpytorch

    class _Model(gpytorch.models.ExactGP):
        def __init__(self, X, y, likelihood):
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[-1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    t0 = time.perf_counter()
    lik = gpytorch.likelihoods.GaussianLikelihood()
    model = _Model(X, y, lik).to(dtype=X.dtype, device=X.device)
    model.train()
    lik.train()
    _adam_on_mll(model, lik, X, y, iters, lr)
    fit_s = time.perf_counter() - t0
    model.eval()
    lik.eval()
    with torch.no_grad(), gpytorch_mode("cholesky"):
        out = lik(model(Xs))
        return {"mean": out.mean, "var": out.variance, "fit_s": fit_s}


def botorch_single_task(X: torch.Tensor, y: torch.Tensor, Xs: torch.Tensor) -> dict:
    """BoTorch ``SingleTaskGP`` with its defaults (dimension-scaled log-normal priors,
    Standardize outcome transform) and the input scaling its documentation asks for
    (``Normalize``: the unit cube on the training rows), fitted by ``fit_gpytorch_mll``
    (its default scipy L-BFGS-B). Returns the predictive mean and variance of y
    (observation noise included), fit_s."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.input import Normalize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SingleTaskGP(X, y[:, None], input_transform=Normalize(d=X.shape[1]))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    fit_s = time.perf_counter() - t0
    with torch.no_grad():
        post = model.posterior(Xs, observation_noise=True)
        return {"mean": post.mean[:, 0], "var": post.variance[:, 0], "fit_s": fit_s}


def sklearn_recipe(X: np.ndarray, y: np.ndarray, Xs: np.ndarray, restarts: int = 2,
                   seed: int = 0) -> dict:
    """scikit-learn ``GaussianProcessRegressor(ConstantKernel() * RBF(ones(d)) +
    WhiteKernel(), normalize_y=True, n_restarts_optimizer=restarts)``. Returns the
    predictive mean and variance of y (the WhiteKernel's noise included), fit_s."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF as SkRBF
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    kernel = ConstantKernel() * SkRBF(np.ones(X.shape[1])) + WhiteKernel()
    gpr = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=restarts,
                                   random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr.fit(X, y)
    fit_s = time.perf_counter() - t0
    mean, std = gpr.predict(Xs, return_std=True)
    return {"mean": mean, "var": std**2, "fit_s": fit_s}


# -- large-data peers (cholqr-kin40k, uci-large): sparse and variational GPyTorch --------
def gpytorch_sgpr(X: torch.Tensor, y: torch.Tensor, m: int, steps: int, seed: int,
                  lr: float = 0.05, mean: str = "zero"):
    """GPyTorch's SGPR (Titsias VFE via ``InducingPointKernel``, full batch, as its SGPR
    tutorial): ScaleKernel(RBF-ARD), m random training inputs (seeded) as the initial
    inducing points, ``steps`` Adam(lr) steps on the negative collapsed bound; ``mean``
    ``"zero"`` or ``"constant"`` (the tutorial's ConstantMean). Returns a
    predict(X) -> (mean, var of y, noise included) function."""
    import gpytorch

    if mean not in ("zero", "constant"):
        raise ValueError(f"mean must be 'zero' or 'constant', got {mean!r}")
    gen = torch.Generator().manual_seed(seed)
    Z = X[torch.randperm(X.shape[0], generator=gen)[:m].to(X.device)].clone()

    class _SGPR(gpytorch.models.ExactGP):
        def __init__(self, likelihood):
            super().__init__(X, y, likelihood)
            self.mean_module = (gpytorch.means.ZeroMean() if mean == "zero"
                                else gpytorch.means.ConstantMean())
            base = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                base, inducing_points=Z, likelihood=likelihood)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    lik = gpytorch.likelihoods.GaussianLikelihood().to(X)
    model = _SGPR(lik).to(X)
    model.train()
    lik.train()
    _adam_on_mll(model, lik, X, y, steps, lr)
    model.eval()
    lik.eval()

    def predict(Xs: torch.Tensor):
        with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
            out = lik(model(Xs))
            return out.mean, out.variance

    return predict


def gpytorch_svgp(X: torch.Tensor, y: torch.Tensor, m: int = 500, epochs: int = 20,
                  seed: int = 0, lr: float = 0.01, batch_size: int = 1024):
    """GPyTorch's SVGP as its SVGP tutorial fits it: ``ApproximateGP`` with
    ``CholeskyVariationalDistribution`` and a ``VariationalStrategy`` on m inducing points
    (random training inputs, seeded; ``learn_inducing_locations=True``), ConstantMean,
    ScaleKernel(RBF-ARD), GaussianLikelihood, ``VariationalELBO``; Adam(lr) on the
    model's and the likelihood's parameters, ``epochs`` passes over shuffled (seeded)
    minibatches of ``batch_size`` rows. Returns a predict(X) -> (mean, var of y, noise
    included) function that predicts in batches."""
    import gpytorch

    gen = torch.Generator().manual_seed(seed)
    n = X.shape[0]
    Z = X[torch.randperm(n, generator=gen)[:m].to(X.device)].clone()

    class _SVGP(gpytorch.models.ApproximateGP):
        def __init__(self):
            dist = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
            strategy = gpytorch.variational.VariationalStrategy(
                self, Z, dist, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = _SVGP().to(X)
    lik = gpytorch.likelihoods.GaussianLikelihood().to(X)
    model.train()
    lik.train()
    opt = torch.optim.Adam([{"params": model.parameters()}, {"params": lik.parameters()}],
                           lr=lr)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=n)
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=gen).to(X.device).split(batch_size):
            opt.zero_grad()
            loss = -mll(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
    model.eval()
    lik.eval()

    def predict(Xs: torch.Tensor):
        means, variances = [], []
        with torch.no_grad():
            for xb in Xs.split(batch_size):
                out = lik(model(xb))
                means.append(out.mean)
                variances.append(out.variance)
        return torch.cat(means), torch.cat(variances)

    return predict
