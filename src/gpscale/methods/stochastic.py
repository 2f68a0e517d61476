"""Unbiased minibatch ML-II for finite-feature GPs (Shoham & Avron): ``minimax`` (§3.1),
``scgd`` (§3.2) and the biased baseline ``bsgd`` (Chen et al. 2020), on random Fourier
or neural features. Registered with ``streams=True``: from a source (files, a dask
collection) they read shuffled minibatches without loading the rows (``buffer_rows``:
the shuffle buffer; see :mod:`gpscale.train.batches`)."""

from __future__ import annotations

from typing import Any

import torch

from ..features import RandomFourierFeatures
from ..features.neural import NeuralFeatures, ScaledFeatures
from ..kernels import Kernel
from ..models import FeatureGP
from ..models.feature import PartitionRows
from ..train import FitResult
from ..train.stochastic import fit_bsgd, fit_minimax, fit_scgd
from ..validation import check_int
from .registry import register_method
from .rff import spectral_kind

_OPTIONS = ("features", "num_features", "noise", "batch_size", "epochs", "optimizer", "lr",
            "lr_schedule", "seed", "eval_every", "max_time", "progress", "device",
            "buffer_rows")


def stochastic_features(X: torch.Tensor | PartitionRows, kernel: Kernel, features: str | None,
                        num_features: int | None, seed: int):
    """``"rff"`` (default): the kernel's orthogonal RFF (learnable lengthscales) times a
    learnable magnitude; ``"nn-linear"`` / ``"nn-rbf"``: the paper's 2x128 ReLU network
    with the linear kernel or the Gaussian kernel by 1000 (``num_features``) RFF."""
    kind = "rff" if features is None else str(features).lower()
    d = X.num_features if isinstance(X, PartitionRows) else X.shape[1]
    if kind == "rff":
        spec, ard = spectral_kind(kernel, "minimax/scgd/bsgd with features='rff'")
        p = check_int("num_features", 512 if num_features is None else num_features, 2)
        return ScaledFeatures(RandomFourierFeatures(d, p, kernel=spec, ard=ard,
                                                    seed=seed))
    if kind in ("nn-linear", "nn-rbf"):
        p = check_int("num_features", 1000 if num_features is None else num_features, 2)
        return NeuralFeatures(d, kernel=kind[3:], num_rff=p, seed=seed)
    raise ValueError(f"features must be 'rff', 'nn-linear' or 'nn-rbf', got {features!r}")


def _stochastic(fit_fn, name: str, description: str, extra: tuple[str, ...]) -> None:
    def fit_stochastic(X: torch.Tensor | PartitionRows, y: torch.Tensor | None, kernel: Kernel,
                       features: str | None = None, num_features: int | None = None,
                       seed: int = 0, **options: Any) -> tuple[FeatureGP, FitResult]:
        feats = stochastic_features(X, kernel, features, num_features,
                                    check_int("seed", seed, 0))
        return fit_fn(X, y, feats, seed=seed, **options)

    fit_stochastic.__name__ = f"fit_{name}_method"
    fit_stochastic.__doc__ = (f"{description}; see gpscale.train.stochastic.{fit_fn.__name__}"
                              " for the options.")
    register_method(name, fit_stochastic, description, options=_OPTIONS + extra,
                    streams=True)


_stochastic(fit_minimax, "minimax", "finite-feature GP, unbiased minibatch ML-II by MINIMAX "
            "(Shoham & Avron §3.1): too many rows for a pass per step; minibatches "
            "streamed from files", ("lr_max", "mu", "mu_growth", "mu_max", "noise_min",
                                      "zeta_max"))
_stochastic(fit_scgd, "scgd", "finite-feature GP, unbiased minibatch ML-II by SCGD (Shoham & "
            "Avron §3.2): as minimax", ("b", "b0", "tracker"))
_stochastic(fit_bsgd, "bsgd", "finite-feature GP, biased minibatch ML-II (BSGD, Chen et al. "
            "2020): the baseline minimax and scgd remove the bias of", ())
