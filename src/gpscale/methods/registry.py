"""The registry of training methods: what ``method=`` / ``--method`` names.

A method is ``fit_fn(X, y, kernel, **options) -> (model, FitResult)`` on standardised
float64 tensors X (n, d), y (n,) (or, for methods that read passes or minibatches,
X = :class:`~gpscale.io.Rows` and y None) and a fresh :class:`~gpscale.kernels.Kernel`; the model
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
    #: how fit_fn reads the rows. ``"memory"``: every row, as standardised tensors X, y;
    #: ``"passes"``: X = :class:`~gpscale.io.Rows` (y None), passes over partitions that
    #: stay in their files, run in process or on the rows' cluster; ``"minibatches"``:
    #: X = Rows too, minibatches read in this process (full passes, e.g. an exact
    #: evaluation, on the rows' cluster)
    reads: str = "memory"
    #: fit_fn takes ``client=`` (a dask.distributed Client, or None) and sends independent
    #: pieces of its work (e.g. cross-validation folds) to that cluster as tasks
    cluster: bool = False
    #: ``size_check(options, num_features)``: raises ValueError, before any work, when
    #: the options' sizes cannot fit this machine (e.g. p x p matrices of rff); None:
    #: nothing to check
    size_check: Callable[[dict[str, Any], int], None] | None = None
    #: with ``kernel="auto"`` the kernel family is chosen from the data
    #: (:mod:`gpscale.methods.kernel_choice`); a method that does not choose fits its
    #: default, :data:`~gpscale.methods.kernel_choice.DEFAULT_KERNEL`
    chooses_kernel: bool = False
    #: fit_fn is the exact GP's own fit (:func:`~gpscale.methods.exact.fit_exact`), so a
    #: kernel choice fits its candidates by this very method, with its options, and its
    #: ``solver=`` says whether the fit takes the iterative (CG) path: a flag the method
    #: declares, so that no module compares fit functions by identity
    exact: bool = False

    @property
    def streams(self) -> bool:
        """fit_fn trains from :class:`~gpscale.io.Rows` that need not be in memory."""
        return self.reads != "memory"

    @property
    def uses_cluster(self) -> bool:
        """A dask cluster given to :func:`gpscale.fit` does some of this method's work."""
        return self.streams or self.cluster

    def check_options(self, options: dict[str, Any]) -> None:
        """ValueError naming the options this method does not take."""
        unknown = [] if self.options is None else sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"method {self.name!r} does not take option(s) {unknown}; "
                             f"it takes {sorted(self.options)}")


#: training methods by name (see :func:`register_method`)
METHODS: dict[str, Method] = {}


#: what :attr:`Method.reads` may be
READS = ("memory", "passes", "minibatches")


def register_method(name: str, fit_fn: FitFn, description: str = "",
                    options: list[str] | tuple[str, ...] | None = None,
                    replace: bool = False, streams: bool = False,
                    cluster: bool = False, reads: str | None = None,
                    size_check: Callable[[dict[str, Any], int], None] | None = None,
                    chooses_kernel: bool = False, exact: bool = False) -> Method:
    """Make ``fit_fn`` available as ``method=name`` in :func:`gpscale.fit`, the estimator
    and the CLI. ``options`` lists the keyword options accepted (default: read off
    ``fit_fn``'s signature after ``X, y, kernel``; ``**kwargs`` there means any).
    ``reads``: how fit_fn reads the rows (see :class:`Method`; ``streams=True`` is
    ``reads="passes"``); ``cluster``: fit_fn sends tasks to ``client=``; ``size_check``,
    ``chooses_kernel``, ``exact``: see :class:`Method`."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"method name must be a non-empty string, got {name!r}")
    if name in METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered; pass replace=True")
    reads = reads or ("passes" if streams else "memory")
    if reads not in READS:
        raise ValueError(f"reads must be one of {READS}, got {reads!r}")
    options = _keyword_options(fit_fn) if options is None else tuple(options)
    METHODS[name] = Method(name, fit_fn, description, options, reads, cluster, size_check,
                           chooses_kernel, exact)
    return METHODS[name]


def register(name: str, description: str,
             options: list[str] | tuple[str, ...] | None = None,
             reads: str = "memory", cluster: bool = False,
             size_check: Callable[[dict[str, Any], int], None] | None = None,
             chooses_kernel: bool = False, exact: bool = False
             ) -> Callable[[FitFn], FitFn]:
    """Decorator form of :func:`register_method`: ``@register("rff", "...")`` on a fit
    function registers it and returns it unchanged."""

    def deco(fit_fn: FitFn) -> FitFn:
        register_method(name, fit_fn, description, options, reads=reads, cluster=cluster,
                        size_check=size_check, chooses_kernel=chooses_kernel,
                        exact=exact)
        return fit_fn

    return deco


#: what every fit function takes before its options
DATA_ARGUMENTS = ("X", "y", "kernel")


def option_parameters(fn: Callable) -> list[inspect.Parameter]:
    """The parameters of ``fn(X, y, kernel, ...)`` after its :data:`DATA_ARGUMENTS`
    that name options: keyword parameters, and ``**kwargs``; ``client`` is not one (the
    cluster is the planner's to give)."""
    params = list(inspect.signature(fn).parameters.values())[len(DATA_ARGUMENTS):]
    return [p for p in params if p.name != "client" and p.kind in (
        p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_KEYWORD)]


def _keyword_options(fn: Callable) -> tuple[str, ...] | None:
    params = option_parameters(fn)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params)


def get_method(name: str) -> Method:
    """The registered method ``name``; ValueError listing the choices otherwise."""
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]
