"""Unbiased minibatch ML-II for finite-feature GPs (Shoham & Avron): ``minimax`` (§3.1),
``scgd`` (§3.2) and the biased baseline ``bsgd`` (Chen et al. 2020), on random Fourier
or neural features. Registered with ``reads="minibatches"``: from a source (files, a dask
collection) they read shuffled minibatches without loading the rows (``buffer_rows``:
the shuffle buffer; see :mod:`gpscale.train.batches`)."""

from __future__ import annotations

from typing import Any

import torch

from ..features import RandomFourierFeatures
from ..features.neural import NeuralFeatures, ScaledFeatures
from ..io.rows import Rows, as_rows
from ..kernels import Kernel, spectral_facts
from ..models import FeatureGP
from ..train import FitResult
from ..train.stochastic import fit_bsgd, fit_minimax, fit_scgd
from ..validation import check_int
from .registry import register_method

_OPTIONS = ("features", "num_features", "noise", "batch_size", "epochs", "optimizer", "lr",
            "lr_schedule", "seed", "eval_every", "max_time", "progress", "device",
            "buffer_rows")


def stochastic_features(rows: Rows, kernel: Kernel, features: str | None,
                        num_features: int | None, seed: int):
    """``"rff"`` (default): the kernel's orthogonal RFF (learnable lengthscales) times a
    learnable magnitude, started at the kernel's lengthscales and signal variance;
    ``"nn-linear"`` / ``"nn-rbf"``: the paper's 2x128 ReLU network
    with the linear kernel or the Gaussian kernel by 1000 (``num_features``) RFF."""
    kind = "rff" if features is None else str(features).lower()
    d = rows.num_features
    if kind == "rff":
        facts = spectral_facts(kernel, "minimax/scgd/bsgd with features='rff'")
        p = check_int("num_features", 512 if num_features is None else num_features, 2)
        return ScaledFeatures(RandomFourierFeatures(d, p, kernel=facts.density,
                                                    lengthscale=facts.lengthscale,
                                                    ard=facts.ard, seed=seed),
                              outputscale=facts.outputscale)
    if kind in ("nn-linear", "nn-rbf"):
        p = check_int("num_features", 1000 if num_features is None else num_features, 2)
        return NeuralFeatures(d, kernel=kind[3:], num_rff=p, seed=seed)
    raise ValueError(f"features must be 'rff', 'nn-linear' or 'nn-rbf', got {features!r}")


def _stochastic(fit_fn, name: str, description: str, extra: tuple[str, ...]) -> None:
    def fit_stochastic(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
                       features: str | None = None, num_features: int | None = None,
                       seed: int = 0, **options: Any) -> tuple[FeatureGP, FitResult]:
        rows = as_rows(X, y)
        feats = stochastic_features(rows, kernel, features, num_features,
                                    check_int("seed", seed, 0))
        return fit_fn(rows, None, feats, seed=seed, **options)

    fit_stochastic.__name__ = f"fit_{name}_method"
    fit_stochastic.__doc__ = (f"{description}; see gpscale.train.stochastic.{fit_fn.__name__}"
                              " for the options.")
    register_method(name, fit_stochastic, description, options=_OPTIONS + extra,
                    reads="minibatches")


_stochastic(fit_minimax, "minimax", "finite-feature GP, unbiased minibatch ML-II by MINIMAX "
            "(Shoham & Avron §3.1): too many rows for a pass per step; minibatches "
            "streamed from files", ("lr_max", "mu", "mu_growth", "mu_max", "noise_min",
                                      "zeta_max"))
_stochastic(fit_scgd, "scgd", "finite-feature GP, unbiased minibatch ML-II by SCGD (Shoham & "
            "Avron §3.2): as minimax", ("b", "b0", "tracker"))
_stochastic(fit_bsgd, "bsgd", "finite-feature GP, biased minibatch ML-II (BSGD, Chen et al. "
            "2020): the baseline minimax and scgd remove the bias of", ())
