"""Unbiased minibatch ML-II for finite-feature GPs (Shoham & Avron): ``minimax`` (§3.1),
``scgd`` (§3.2) and the biased baseline ``bsgd`` (Chen et al. 2020), on random Fourier
or neural features. Registered with ``reads="minibatches"``: from a source (files, a dask
collection) they read shuffled minibatches without loading the rows (``buffer_rows``:
the shuffle buffer; see :mod:`gpscale.train.batches`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from ..features import RandomFourierFeatures
from ..features.neural import NeuralFeatures, ScaledFeatures
from ..io.rows import Rows, as_rows
from ..kernels import Kernel, spectral_facts
from ..models import FeatureGP
from ..train import FitResult
from ..train.minibatch import DEFAULT_LR, check_lr_schedule
from ..train.stochastic import fit_bsgd, fit_minimax, fit_scgd
from ..validation import check_int, check_optional_int, check_positive
from .options import takes_options
from .registry import register_method

#: what ``features=`` may name (any case)
FEATURES = ("rff", "nn-linear", "nn-rbf")


@dataclass
class StochasticOptions:
    """The options minimax, scgd and bsgd share, checked: ``features`` and
    ``num_features`` (:func:`stochastic_features`) choose the feature map, the others go
    to the trainer (:func:`gpscale.train.stochastic.fit_minimax` says what each does);
    the defaults are the trainers'."""

    features: str | None = None
    num_features: int | None = None
    seed: int = 0
    noise: float = 0.1
    batch_size: int = 32
    epochs: float = 10
    optimizer: str = "adadelta"
    lr: float | None = None
    lr_schedule: str = "constant"
    eval_every: int | None = None
    max_time: float | None = None
    progress: bool = False
    device: torch.device | str | None = None
    buffer_rows: int | None = None

    def __post_init__(self) -> None:
        if self.features is not None and str(self.features).lower() not in FEATURES:
            raise ValueError(f"features must be one of {FEATURES} (default 'rff'), got "
                             f"{self.features!r}")
        check_optional_int("num_features", self.num_features, 2)
        check_optional_int("buffer_rows", self.buffer_rows, 1)
        check_int("seed", self.seed, 0)
        for name in ("batch_size", "eval_every"):  # an int, or a float that is one
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not float(v).is_integer() or v < 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        check_positive("noise", self.noise)
        check_positive("epochs", self.epochs)
        if self.lr is not None:
            check_positive("lr", self.lr)
        if self.max_time is not None and not (isinstance(self.max_time, (int, float))
                                              and self.max_time >= 0):
            raise ValueError(f"max_time must be a number of seconds >= 0 or None, got "
                             f"{self.max_time!r}")
        if str(self.optimizer).lower() not in DEFAULT_LR:
            raise ValueError(f"optimizer={self.optimizer!r} is not one of {sorted(DEFAULT_LR)}")
        check_lr_schedule(self.lr_schedule)

    def trainer_options(self) -> dict[str, Any]:
        """The options the trainer takes: all but the feature map's."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("features", "num_features")}


@dataclass
class MinimaxOptions(StochasticOptions):
    """``method="minimax"``'s options: the shared ones and MINIMAX's own."""

    lr_max: float | None = None
    mu: float | str = 1.0
    mu_growth: float = 1.0
    mu_max: float = 1e6
    noise_min: float = 1e-4
    zeta_max: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("lr_max", "mu", "mu_growth", "mu_max", "noise_min", "zeta_max"):
            v = getattr(self, name)
            if v is not None and not (name == "mu" and v == "auto"):
                check_positive(name, v)


@dataclass
class SCGDOptions(StochasticOptions):
    """``method="scgd"``'s options: the shared ones and SCGD's own."""

    b: float | None = 0.9
    b0: float = 1.0
    tracker: str = "same"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.b is not None and not (isinstance(self.b, (int, float))
                                       and not isinstance(self.b, bool) and 0 < self.b <= 1):
            raise ValueError(f"b must be in (0, 1] or None (b_t = b0 t^-1/2), got {self.b!r}")
        check_positive("b0", self.b0)
        if self.tracker not in ("same", "independent"):
            raise ValueError(f"tracker must be 'same' or 'independent', got {self.tracker!r}")


@dataclass
class BSGDOptions(StochasticOptions):
    """``method="bsgd"``'s options: the shared ones."""


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


def _stochastic(fit_fn, name: str, description: str, options: type) -> None:
    @takes_options(options)
    def fit_stochastic(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
                       **given: Any) -> tuple[FeatureGP, FitResult]:
        o = options(**given)
        rows = as_rows(X, y)
        feats = stochastic_features(rows, kernel, o.features, o.num_features, o.seed)
        return fit_fn(rows, None, feats, **o.trainer_options())

    fit_stochastic.__name__ = f"fit_{name}_method"
    fit_stochastic.__doc__ = (f"{description}; see gpscale.train.stochastic.{fit_fn.__name__}"
                              " for the options.")
    register_method(name, fit_stochastic, description, reads="minibatches")


_stochastic(fit_minimax, "minimax", "finite-feature GP, unbiased minibatch ML-II by MINIMAX "
            "(Shoham & Avron §3.1): too many rows for a pass per step; minibatches "
            "streamed from files", MinimaxOptions)
_stochastic(fit_scgd, "scgd", "finite-feature GP, unbiased minibatch ML-II by SCGD (Shoham & "
            "Avron §3.2): as minimax", SCGDOptions)
_stochastic(fit_bsgd, "bsgd", "finite-feature GP, biased minibatch ML-II (BSGD, Chen et al. "
            "2020): the baseline minimax and scgd remove the bias of", BSGDOptions)
