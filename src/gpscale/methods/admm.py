"""GPCV-ADMM (cross-validation training of an exact GP in O(n²) per iteration):
``admm-hocv`` (hold-out), ``admm-kfold`` (per-fold ADMM, averaged θ) and
``admm-consensus`` (K-fold by consensus ADMM).

Each method's options are one dataclass (:class:`HoldoutOptions`, :class:`KFoldOptions`,
:class:`ConsensusOptions`): the fit's own (noise, seed, max_iter, progress, device), its
trainer's (the split or the folds, ``preset``, ``on_divergence``, ``scale``) and then
every setting of :class:`~gpscale.train.admm.ADMMOptions`, read off that class (declared
there once), its default the value a fit given none runs (the default preset's, else the
paper's). A setting not given comes from the preset
(:data:`~gpscale.train.admm.DEFAULT_PRESET` unless ``preset=`` names another), so only
the settings given override it, and they are checked together with the preset
(:meth:`settings`) when the fit starts, before any work.
"""

from __future__ import annotations

import dataclasses
import numbers
import typing
from collections.abc import Callable
from typing import Any

import torch

from ..kernels import Kernel
from ..models import ExactGP
from ..train import FitResult
from ..train.admm import (
    DEFAULT_PRESET,
    PRESETS,
    ADMMOptions,
    check_choices,
    fit_admm_consensus,
    fit_admm_hocv,
    fit_admm_kfold,
    make_options,
)
from ..validation import check_device, check_int, check_positive
from .options import takes_options
from .registry import register_method

__all__ = ["HoldoutOptions", "KFoldOptions", "ConsensusOptions", "SETTINGS"]

#: the :class:`~gpscale.train.admm.ADMMOptions` settings each method takes as options
#: (``max_iter``, every fit's own option, apart)
SETTINGS = tuple(f.name for f in dataclasses.fields(ADMMOptions) if f.name != "max_iter")


class _ADMMFitOptions:
    """What the three options dataclasses share: their checks and how they are handed
    to the trainer."""

    #: the trainer's keyword options this method's fields hold (beyond seed, preset,
    #: on_divergence, scale and client, which every one takes)
    OWN: typing.ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        self.noise = check_positive("noise", self.noise)
        self.seed = check_int("seed", self.seed, 0)
        self.max_iter = check_int("max_iter", self.max_iter, 1)
        self.device = check_device(self.device)
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {self.preset!r}")
        check_choices(self.on_divergence, self.scale)

    def settings(self, given: typing.Iterable[str]) -> ADMMOptions:
        """The trainer's settings, checked: the preset with ``max_iter`` and the settings
        among ``given`` (the option names the caller gave) over it."""
        chosen = {k: getattr(self, k) for k in given if k in SETTINGS}
        return make_options(None, self.preset, max_iter=self.max_iter, **chosen)

    def check_given(self, given: typing.Iterable[str]) -> None:
        """The settings among ``given`` checked over the preset, as the fit will run them
        (the planner asks, before any row is read)."""
        self.settings(given)

    def trainer_options(self, given: typing.Iterable[str]) -> dict[str, Any]:
        """The trainer's keyword arguments: its settings made here, so no preset there."""
        own = {k: getattr(self, k) for k in self.OWN}
        return {"seed": self.seed, "options": self.settings(given), "preset": None,
                "on_divergence": self.on_divergence, "scale": self.scale,
                "client": self.client, **own}


class _HoldoutChecks(_ADMMFitOptions):
    OWN = ("val_fraction", "validation", "progress")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.val_fraction, numbers.Real) and 0.0 < self.val_fraction < 1.0):
            raise ValueError(f"val_fraction must lie in (0, 1), got {self.val_fraction!r}")


class _FoldChecks(_ADMMFitOptions):
    OWN = ("k", "workers")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.k = check_int("k", self.k, 2)
        self.workers = check_int("workers", self.workers, 1)


class _ConsensusChecks(_FoldChecks):
    OWN = ("k", "workers", "tau", "local_iters")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.local_iters = check_int("local_iters", self.local_iters, 1)
        if self.tau is not None:
            self.tau = check_positive("tau", self.tau)


def _options_class(name: str, doc: str, checks: type,
                   own: list[tuple[str, Any, Any]]) -> type:
    """The options dataclass of one ADMM method: the fit's options, ``own`` (name, type,
    default), the trainer's choices, then every :data:`SETTINGS` field as
    :class:`~gpscale.train.admm.ADMMOptions` declares it; checked by ``checks``."""
    hints = typing.get_type_hints(ADMMOptions)
    head = [("noise", float, 0.1), ("seed", int, 0), ("max_iter", int, 100),
            ("progress", bool, False), ("device", torch.device | str | None, None)]
    tail = [("preset", str, DEFAULT_PRESET), ("on_divergence", str, "warn"),
            ("scale", str, "ml")]
    # each setting shown with the value a fit given none runs: the default preset's
    runs = PRESETS[DEFAULT_PRESET]
    settings = [(f.name, hints[f.name], runs.get(f.name, f.default))
                for f in dataclasses.fields(ADMMOptions) if f.name in SETTINGS]
    fields = [(n, t, dataclasses.field(default=v)) for n, t, v in head + own + tail + settings]
    fields.append(("client", Any, dataclasses.field(default=None)))
    cls = dataclasses.make_dataclass(name, fields, bases=(checks,),
                                     namespace={"__doc__": doc})
    cls.__module__ = __name__
    return cls


HoldoutOptions = _options_class(
    "HoldoutOptions", "The options of ``method=\"admm-hocv\"`` "
    "(:func:`~gpscale.train.admm.fit_admm_hocv` says what each does), checked.",
    _HoldoutChecks, [("val_fraction", float, 0.5), ("validation", Any, None)])
KFoldOptions = _options_class(
    "KFoldOptions", "The options of ``method=\"admm-kfold\"`` "
    "(:func:`~gpscale.train.admm.fit_admm_kfold` says what each does), checked; "
    "``progress`` is taken and has no effect.",
    _FoldChecks, [("k", int, 2), ("workers", int, 1)])
ConsensusOptions = _options_class(
    "ConsensusOptions", "The options of ``method=\"admm-consensus\"`` "
    "(:func:`~gpscale.train.admm.fit_admm_consensus` says what each does), checked; "
    "``progress`` is taken and has no effect.",
    _ConsensusChecks, [("k", int, 2), ("workers", int, 1), ("tau", float | None, None),
                       ("local_iters", int, 1)])


def _admm(trainer: Callable[..., FitResult], name: str, options: type) -> Callable:
    @takes_options(options)
    def fit_admm_method(X: torch.Tensor, y: torch.Tensor, kernel: Kernel,
                        **given: Any) -> tuple[ExactGP, FitResult]:
        o = options(**given)
        trainer_options = o.trainer_options(given)  # checked before the model is made
        model = ExactGP(kernel, X, y, noise=o.noise, device=o.device)
        return model, trainer(model, **trainer_options)

    fit_admm_method.__name__ = f"fit_{name.replace('-', '_')}"
    fit_admm_method.__doc__ = (f"Exact GP trained by {name} (see gpscale.train.admm."
                               f"{trainer.__name__}); the settings of ADMMOptions not "
                               "given come from the preset.")
    return fit_admm_method


register_method("admm-hocv", _admm(fit_admm_hocv, "admm-hocv", HoldoutOptions),
                "exact GP, hold-out cross-validation by GPCV-ADMM: predictive accuracy "
                "rather than likelihood, O(n²) per iteration; kernel products recomputed "
                "by row blocks (beyond memory) on the cluster's workers", cluster=True)
register_method("admm-kfold", _admm(fit_admm_kfold, "admm-kfold", KFoldOptions),
                "exact GP, K-fold cross-validation by per-fold GPCV-ADMM (averaged θ): as "
                "admm-hocv with every row validated once; folds in parallel",
                cluster=True)
register_method("admm-consensus", _admm(fit_admm_consensus, "admm-consensus",
                                        ConsensusOptions),
                "exact GP, K-fold cross-validation by consensus ADMM: as admm-kfold, the "
                "folds agreeing on one θ", cluster=True)
