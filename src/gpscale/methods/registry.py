"""The registry of training methods: what ``method=`` / ``--method`` names.

A method is ``fit_fn(X, y, kernel, **options) -> (model, FitResult)`` on standardised
float64 tensors X (n, d), y (n,) and a fresh :class:`~gpscale.kernels.Kernel`; the model
it returns honours :class:`gpscale.models.GPModel` (predict, objective, its config), which
is how it is saved and loaded. Each family of methods is one module of this package that
registers its entries with :func:`register`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from ..train import FitResult

__all__ = ["Method", "METHODS", "register", "register_method", "get_method"]

FitFn = Callable[..., tuple[nn.Module, FitResult]]


@dataclass(frozen=True)
class Method:
    """A registered training method: ``fit_fn(X, y, kernel, **options)``."""

    name: str
    fit_fn: FitFn
    description: str
    options: tuple[str, ...] | None  # accepted option names; None = any
    #: fit_fn also accepts X = :class:`~gpscale.models.feature.PartitionRows` (y None):
    #: it trains from passes over rows that stay in their files or on a cluster
    streams: bool = False
    #: fit_fn takes ``client=`` (a dask.distributed Client, or None) and sends independent
    #: pieces of its work (e.g. cross-validation folds) to that cluster as tasks
    cluster: bool = False

    def check_options(self, options: dict[str, Any]) -> None:
        """ValueError naming the options this method does not take."""
        unknown = [] if self.options is None else sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"method {self.name!r} does not take option(s) {unknown}; "
                             f"it takes {sorted(self.options)}")


#: training methods by name (see :func:`register_method`)
METHODS: dict[str, Method] = {}


def register_method(name: str, fit_fn: FitFn, description: str = "",
                    options: list[str] | tuple[str, ...] | None = None,
                    replace: bool = False, streams: bool = False,
                    cluster: bool = False) -> Method:
    """Make ``fit_fn`` available as ``method=name`` in :func:`gpscale.fit`, the estimator
    and the CLI. ``options`` lists the keyword options accepted (default: read off
    ``fit_fn``'s signature after ``X, y, kernel``; ``**kwargs`` there means any).
    ``streams``, ``cluster``: what ``fit_fn`` can do with a cluster (see :class:`Method`)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"method name must be a non-empty string, got {name!r}")
    if name in METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered; pass replace=True")
    options = _keyword_options(fit_fn) if options is None else tuple(options)
    METHODS[name] = Method(name, fit_fn, description, options, streams, cluster)
    return METHODS[name]


def register(name: str, description: str,
             options: list[str] | tuple[str, ...] | None = None,
             streams: bool = False) -> Callable[[FitFn], FitFn]:
    """Decorator form of :func:`register_method`: ``@register("rff", "...")`` on a fit
    function registers it and returns it unchanged."""

    def deco(fit_fn: FitFn) -> FitFn:
        register_method(name, fit_fn, description, options, streams=streams)
        return fit_fn

    return deco


def _keyword_options(fn: Callable) -> tuple[str, ...] | None:
    params = list(inspect.signature(fn).parameters.values())[3:]  # after X, y, kernel
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def get_method(name: str) -> Method:
    """The registered method ``name``; ValueError listing the choices otherwise."""
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]
