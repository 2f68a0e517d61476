"""Training methods beyond exact ML-II, registered with :mod:`gpscale.api` so that
``gpscale.fit``, the estimator and ``gpscale fit --method`` know them by name.

==================  ============================================================
``rff``             FeatureGP on orthogonal random Fourier features, ML-II (L-BFGS)
``grief-ii``        GP-GRIEF-II: FeatureGP on grid eigenfunctions, ML-II (L-BFGS)
``grief-i``         GP-GRIEF-I: re-weighted grid eigenfunctions, posterior by MALA
``admm-hocv``       exact GP, hold-out cross-validation by GPCV-ADMM
``admm-kfold``      exact GP, K-fold CV (naive: per-fold ADMM, averaged θ)
``admm-consensus``  exact GP, K-fold CV by consensus ADMM
``cholqr-vfe``      SparseGP on m training points, CholQR swaps + L-BFGS (VFE bound)
``cholqr-dtc``      SparseGP on m training points, CholQR swaps + L-BFGS (DTC / PP)
``minimax``         FeatureGP (RFF or NN features), unbiased minibatch ML-II, MINIMAX
``scgd``            FeatureGP (RFF or NN features), minibatch ML-II by SCGD
``bsgd``            FeatureGP (RFF or NN features), biased minibatch ML-II (Chen 2020)
``svgp``            SVGP (Hensman et al. 2015): inducing points, minibatch ELBO (Adam)
==================  ============================================================
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .api import _as_dtype, _check_int, _check_positive, register_method, register_model_io
from .features import GriefFeatures, RandomFourierFeatures
from .features.neural import NeuralFeatures, ScaledFeatures, build_features, feature_config
from .kernels import RBF, Kernel, Matern, Scale
from .models import ExactGP, FeatureGP, GriefIPosterior
from .models.sparse import SparseGP, sparse_options, sparse_rebuild
from .models.svgp import SVGP, svgp_options, svgp_rebuild
from .train import FitResult, fit_admm_consensus, fit_admm_hocv, fit_admm_kfold, fit_lbfgs
from .train.cholqr import cholqr_method
from .train.grief import fit_grief_i, fit_grief_ii
from .train.stochastic import fit_bsgd, fit_minimax, fit_scgd
from .train.svgp import fit_svgp_method


def _spectral_kind(kernel: Kernel, method: str) -> tuple[str, bool]:
    """('rbf' | 'matern12' | 'matern32' | 'matern52', ard) of a (scaled) RBF/Matérn kernel."""
    base = kernel.base if isinstance(kernel, Scale) else kernel
    if isinstance(base, Matern):
        return {0.5: "matern12", 1.5: "matern32", 2.5: "matern52"}[base.nu], bool(base.ard_dims)
    if isinstance(base, RBF):
        return "rbf", bool(base.ard_dims)
    raise ValueError(f"method {method!r} needs an RBF or Matérn kernel ('rbf', 'rbf-ard', "
                     "'matern12-ard', 'matern32-ard', 'matern52-ard')")


# -- random Fourier features ----------------------------------------------------------------
def fit_rff(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, num_features: int = 512,
            noise: float = 0.1, max_iter: int = 200, seed: int = 0, progress: bool = False,
            device: torch.device | str | None = None) -> tuple[FeatureGP, FitResult]:
    """Weight-space GP on ``num_features`` orthogonal random Fourier features of the
    kernel's spectral density, lengthscales, signal variance and noise by L-BFGS."""
    kind, ard = _spectral_kind(kernel, "rff")
    feats = RandomFourierFeatures(X.shape[1], _check_int("num_features", num_features, 2),
                                  kernel=kind, ard=ard, seed=_check_int("seed", seed, 0))
    model = FeatureGP(feats, X, y, noise=_check_positive("noise", noise), device=device)
    return model, fit_lbfgs(model, max_iter=_check_int("max_iter", max_iter, 1),
                            progress=progress, method="rff")


def fit_grief(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, num_features: int | None = None,
              m_bar: int = 10, max_iter: int = 100, seed: int = 0, progress: bool = False,
              grid: str = "uniform",
              device: torch.device | str | None = None) -> tuple[FeatureGP, FitResult]:
    """GP-GRIEF-II (Evans & Nair 2018): p = ``num_features`` eigenfunctions of a grid of
    ``m_bar``^d inducing points (default p = min(1000, 10^⌊log10 n⌋); ``grid``
    "uniform" or "quantile" placement per column), initialised by exact ML-II on up
    to 1000 points, then ML-II by L-BFGS."""
    kind, _ = _spectral_kind(kernel, "grief-ii")
    return fit_grief_ii(X, y, p=num_features, m_bar=_check_int("m_bar", m_bar, 1), kernel=kind,
                        grid=grid, max_iter=_check_int("max_iter", max_iter, 1), seed=seed,
                        progress=progress, device=device)


def fit_grief_mcmc(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, num_features: int = 1000,
                   m_bar: int = 10, n_iter: int = 10_000, burn: int = 1000, thin: int = 50,
                   seed: int = 0, progress: bool = False, grid: str = "uniform",
                   device: torch.device | str | None = None) -> tuple[GriefIPosterior, FitResult]:
    """GP-GRIEF-I (Evans & Nair 2018): MALA over the p eigenfunction weights and σ²
    (base kernel fixed at the exact-GP initialisation, grid placed by ``grid``);
    predictions average the draws.
    The FitResult's objective is the mean negative log posterior of the kept draws;
    acceptance rate, step size and effective sample sizes are in its last history row."""
    kind, _ = _spectral_kind(kernel, "grief-i")
    for name, value, low in (("num_features", num_features, 1), ("m_bar", m_bar, 1),
                             ("n_iter", n_iter, 1), ("burn", burn, 0), ("thin", thin, 1),
                             ("seed", seed, 0)):
        _check_int(name, value, low)
    if burn >= n_iter:
        raise ValueError(f"burn={burn} must be smaller than n_iter={n_iter}")
    post, chain = fit_grief_i(X, y, p=num_features, m_bar=m_bar, kernel=kind, grid=grid,
                              n_iter=n_iter, burn=burn, thin=thin, seed=seed,
                              progress=progress, device=device)
    ess = chain.ess.cpu()
    diagnostics = {"iter": chain.n_iter, "acceptance_rate": chain.acceptance_rate,
                   "step_size": chain.step_size, "ess_min": float(ess.min()),
                   "ess_median": float(ess.median()), "samples": post.num_samples,
                   "time_s": chain.wall_s}
    result = FitResult(
        method="grief-i",
        theta={"noise_mean": [float(post.noise.mean())],
               "w_mean": post.w.mean(0).cpu().tolist()},
        objective=float(-chain.log_target.mean()), history=[*chain.history, diagnostics],
        converged=not chain.interrupted,
        reason="interrupted" if chain.interrupted else "sampled", wall_s=chain.wall_s,
        n_evals=chain.n_iter)
    return post, result


def _grief_i_options(model: GriefIPosterior) -> dict[str, Any]:
    f = model.features
    return {"dtype": str(model.w.dtype).removeprefix("torch."), "num_features": f.num_features,
            "kernel": f.kernel, "m_bar": f.m_bar, "grid": f.grid_kind,
            "eig_floor": f.eig_floor, "gap_tol": f.gap_tol, "normalize": model.normalize}


def _grief_i_rebuild(kernel: Kernel | None, state: dict[str, torch.Tensor],
                     opts: dict[str, Any]) -> GriefIPosterior:
    dtype = _as_dtype(opts["dtype"])
    X = state["X"].to(dtype)
    feats = GriefFeatures(X, opts["num_features"], m_bar=opts["m_bar"], kernel=opts["kernel"],
                          grid=opts.get("grid", "uniform"), eig_floor=opts["eig_floor"],
                          gap_tol=opts["gap_tol"], dtype=dtype)
    feats.raw_lengthscale.requires_grad_(False)
    z = {k: torch.zeros_like(v, dtype=dtype) for k, v in state.items()}  # shapes only
    return GriefIPosterior(feats, z["scale"], z["V"], z["sv2"], z["r"], z["w"], z["noise"],
                           normalize=opts["normalize"], X=X)


def _feature_options(model: nn.Module) -> dict[str, Any]:
    f = model.features
    common = {"weights": model.weights_kind, "dtype": str(model.X.dtype).removeprefix("torch."),
              "num_features": f.num_features}
    if isinstance(f, RandomFourierFeatures):
        return {**common, "features": "rff", "kernel": f.kernel, "orthogonal": f.orthogonal,
                "ard": f.lengthscale.numel() > 1}
    if isinstance(f, GriefFeatures):
        return {**common, "features": "grief", "kernel": f.kernel, "m_bar": f.m_bar,
                "grid": f.grid_kind, "eig_floor": f.eig_floor, "gap_tol": f.gap_tol}
    if (extra := feature_config(f)) is not None:  # neural / scaled RFF (stochastic methods)
        return {**common, **extra}
    raise ValueError(f"cannot save a FeatureGP on {type(f).__name__} features")


def _feature_rebuild(kernel: Kernel | None, state: dict[str, torch.Tensor],
                     opts: dict[str, Any]) -> FeatureGP:
    dtype = _as_dtype(opts["dtype"])
    X, y = state["X"], state["y"]
    if (feats := build_features(opts, dtype)) is not None:  # neural / scaled RFF
        return FeatureGP(feats, X, y, weights=opts["weights"], dtype=dtype)
    if opts["features"] == "rff":
        feats = RandomFourierFeatures(X.shape[1], opts["num_features"], kernel=opts["kernel"],
                                      ard=opts["ard"], orthogonal=opts["orthogonal"],
                                      dtype=dtype)
    else:  # the grid is a function of the training inputs, saved in the state
        feats = GriefFeatures(X, opts["num_features"], m_bar=opts["m_bar"],
                              kernel=opts["kernel"], grid=opts.get("grid", "uniform"),
                              eig_floor=opts["eig_floor"], gap_tol=opts["gap_tol"],
                              dtype=dtype)
    return FeatureGP(feats, X, y, weights=opts["weights"], dtype=dtype)


# -- GPCV-ADMM ------------------------------------------------------------------------------
def _admm(fit_fn, name: str):
    def fit_admm_method(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, noise: float = 0.1,
                        seed: int = 0, max_iter: int = 100, progress: bool = False,
                        device: torch.device | str | None = None,
                        **admm_options: Any) -> tuple[ExactGP, FitResult]:
        model = ExactGP(kernel, X, y, noise=_check_positive("noise", noise), device=device)
        kw = {"progress": progress} if name == "admm-hocv" else {}
        result = fit_fn(model, seed=_check_int("seed", seed, 0),
                        max_iter=_check_int("max_iter", max_iter, 1), **kw, **admm_options)
        return model, result

    fit_admm_method.__name__ = f"fit_{name.replace('-', '_')}"
    fit_admm_method.__doc__ = (f"Exact GP trained by {name} (see gpscale.train); extra keyword "
                               "options go to the trainer (e.g. rho, k, val_fraction).")
    return fit_admm_method


register_method("rff", fit_rff, "random Fourier features (orthogonal), ML-II by L-BFGS")
register_method("grief-ii", fit_grief, "GP-GRIEF-II grid eigenfunctions, ML-II by L-BFGS")
register_method("grief-i", fit_grief_mcmc,
                "GP-GRIEF-I re-weighted grid eigenfunctions, posterior by MALA")
register_method("admm-hocv", _admm(fit_admm_hocv, "admm-hocv"),
                "exact GP, hold-out cross-validation by GPCV-ADMM")
register_method("admm-kfold", _admm(fit_admm_kfold, "admm-kfold"),
                "exact GP, K-fold cross-validation by per-fold GPCV-ADMM (averaged θ)")
register_method("admm-consensus", _admm(fit_admm_consensus, "admm-consensus"),
                "exact GP, K-fold cross-validation by consensus ADMM")
# -- unbiased minibatch ML-II (Shoham & Avron): MINIMAX, SCGD and the BSGD baseline -------
_STOCHASTIC_OPTIONS = ("features", "num_features", "noise", "batch_size", "epochs",
                       "optimizer", "lr", "lr_schedule", "seed", "eval_every", "max_time",
                       "progress", "device")


def _stochastic_features(X: torch.Tensor, kernel: Kernel, features: str | None,
                         num_features: int | None, seed: int):
    """``"rff"`` (default): the kernel's orthogonal RFF (learnable lengthscales) times a
    learnable magnitude; ``"nn-linear"`` / ``"nn-rbf"``: the paper's 2x128 ReLU network
    with the linear kernel or the Gaussian kernel by 1000 (``num_features``) RFF."""
    kind = "rff" if features is None else str(features).lower()
    if kind == "rff":
        spec, ard = _spectral_kind(kernel, "minimax/scgd/bsgd with features='rff'")
        p = _check_int("num_features", 512 if num_features is None else num_features, 2)
        return ScaledFeatures(RandomFourierFeatures(X.shape[1], p, kernel=spec, ard=ard,
                                                    seed=seed))
    if kind in ("nn-linear", "nn-rbf"):
        p = _check_int("num_features", 1000 if num_features is None else num_features, 2)
        return NeuralFeatures(X.shape[1], kernel=kind[3:], num_rff=p, seed=seed)
    raise ValueError(f"features must be 'rff', 'nn-linear' or 'nn-rbf', got {features!r}")


def _stochastic(fit_fn, name: str, description: str, extra: tuple[str, ...]) -> None:
    def fit_stochastic(X: torch.Tensor, y: torch.Tensor, kernel: Kernel,
                       features: str | None = None, num_features: int | None = None,
                       seed: int = 0, **options: Any) -> tuple[FeatureGP, FitResult]:
        feats = _stochastic_features(X, kernel, features, num_features,
                                     _check_int("seed", seed, 0))
        return fit_fn(X, y, feats, seed=seed, **options)

    fit_stochastic.__name__ = f"fit_{name}_method"
    fit_stochastic.__doc__ = (f"{description}; see gpscale.train.stochastic.{fit_fn.__name__}"
                              " for the options.")
    register_method(name, fit_stochastic, description, options=_STOCHASTIC_OPTIONS + extra)


_stochastic(fit_minimax, "minimax", "finite-feature GP, unbiased minibatch ML-II by MINIMAX "
            "(Shoham & Avron §3.1)", ("lr_max", "mu", "mu_growth", "mu_max", "noise_min",
                                      "zeta_max"))
_stochastic(fit_scgd, "scgd", "finite-feature GP, minibatch ML-II by SCGD (Shoham & Avron "
            "§3.2)", ("b", "b0", "tracker"))
_stochastic(fit_bsgd, "bsgd", "finite-feature GP, biased minibatch ML-II (BSGD, Chen et al. "
            "2020)", ())
register_method("svgp", fit_svgp_method,
                "stochastic variational GP (Hensman et al. 2015), minibatch ELBO",
                options=["num_inducing", "batch_size", "epochs", "lr", "lr_schedule",
                         "optimizer", "seed", "noise", "progress", "device"])
register_method("cholqr-vfe", cholqr_method("vfe"),
                "sparse GP on a training subset, CholQR swaps + L-BFGS on the VFE bound")
register_method("cholqr-dtc", cholqr_method("dtc"),
                "sparse GP on a training subset, CholQR swaps + L-BFGS on the DTC NLML")

# -- save / load hooks ----------------------------------------------------------------------
register_model_io(FeatureGP, _feature_options, _feature_rebuild)
register_model_io(GriefIPosterior, _grief_i_options, _grief_i_rebuild)
register_model_io(SparseGP, sparse_options, sparse_rebuild)
register_model_io(SVGP, svgp_options, svgp_rebuild)
