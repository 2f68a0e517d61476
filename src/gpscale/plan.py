"""The planner: one function turns a request — the data, a method name or ``"auto"``,
options, a time budget, a cluster — into what will run, for every door (
:func:`gpscale.fit`, ``gpscale fit``, the scikit-learn estimator).

Every check of the request itself happens here, once, before any row is read for
training: the method and option names, types and values, ``budget`` only with ``"auto"``, the
device and dtype, a cluster only for methods that can use one. Those refusals are
:class:`PlanError` (a ``ValueError``; the command line exits 2 on them). What the data
turn out to hold is checked later, by the run.

A :class:`Plan` says which method runs with which options, what ``auto`` picked and
why, how the method reads the rows (:attr:`gpscale.methods.Method.reads`) and whether
its work goes to the cluster given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .io import Source, TrainingData
from .kernels import Kernel
from .methods import METHODS, Method
from .methods.auto import Choice, choose_method, time_allowance
from .methods.options import options_class, parse_option, placement_options
from .validation import as_dtype, check_device

__all__ = ["Plan", "PlanError", "make_plan", "AUTO", "survey_cluster"]

#: the method name that lets the planner pick (:func:`gpscale.methods.auto.choose_method`)
AUTO = "auto"


class PlanError(ValueError):
    """The request itself is wrong (a name, an option, flags that do not go together),
    whatever the data hold."""


@dataclass(frozen=True)
class Plan:
    """What :func:`gpscale.fit` runs: ``method`` with ``options``; ``choice``: what
    ``auto`` picked and why (None when the method was named); ``on_cluster``: the
    method's passes or tasks go to the scheduler / workers given; ``notes``: what the
    user should be told about the plan (e.g. a cluster that is not used); ``budget``:
    the time budget (seconds) ``auto`` was given, which also bounds the kernel's choice."""

    method: Method
    options: dict[str, Any]
    choice: Choice | None = None
    on_cluster: bool = False
    notes: tuple[str, ...] = field(default=())
    budget: float | None = None

    @property
    def time_limit(self) -> float | None:
        """Seconds the fit is to end within, for a method that keeps a time allowance
        (a ``time_limit`` option): the one given as that option, else what ``auto``
        allows its pick (:func:`~gpscale.methods.auto.time_allowance`: the budget, at
        most twice the estimate it printed); None for a named method given none."""
        if self.options.get("time_limit") is not None:
            return float(self.options["time_limit"])
        if self.choice is None:
            return None
        return time_allowance(self.choice, self.budget)

    @property
    def reads(self) -> str:
        """How the method reads the rows: ``"memory"``, ``"passes"`` or
        ``"minibatches"``."""
        return self.method.reads

    def check_size(self, num_features: int) -> None:
        """The one check of a named method's request that needs the data's column count
        (e.g. rff's feature matrix against memory); :func:`make_plan` runs it itself
        when given the data. Raises :class:`PlanError`."""
        if self.method.size_check is None:
            return
        try:
            self.method.size_check(self.options, num_features)
        except ValueError as err:
            raise PlanError(str(err)) from None


def make_plan(data: Source | TrainingData | None, method: str, kernel: Kernel | None, *,
              options: dict[str, Any] | None = None, option_text: Sequence[str] = (),
              defaults: dict[str, Any] | None = None, budget: float | None = None,
              scheduler: Any = None, workers: int | None = None, device: Any = None,
              dtype: Any = None, door: str = "api", kernel_auto: bool = False) -> Plan:
    """The :class:`Plan` for fitting ``data`` (a source, or what :func:`gpscale.fit` was
    given; only its size is read here) with ``method`` (a registered name or
    ``"auto"``) and ``kernel``. ``options``: the method's options as values;
    ``option_text``: as ``NAME=VALUE`` strings, parsed by the type of the chosen method's
    default (the command line's ``--option``); ``defaults``: options for whichever method
    runs, used where it takes them (e.g. ``progress``); ``device`` / ``dtype``:
    placement, checked against what the method can honour. The user's own options win
    over ``auto``'s. ``data`` and ``kernel`` are read only by ``"auto"`` (None otherwise
    checks the request alone). ``door``: ``"api"`` or ``"cli"``, how messages name the
    arguments (``budget=`` or ``--budget``). ``kernel_auto``: the kernel family is to be
    chosen from the data, and ``kernel`` stands in for it (``auto`` counts the choice).
    Raises :class:`PlanError` for a request that cannot run whatever the data hold."""
    options = dict(options or {})
    cluster = scheduler is not None or workers is not None
    choice = None
    if method == AUTO:
        if data is None or kernel is None:
            raise ValueError("method='auto' needs the data and the kernel to plan")
        distinct = getattr(data, "distinct_inputs", lambda: None)()
        gaps = getattr(data.inputs, "gap_columns", lambda: [])()  # a table's gap columns
        choice = choose_method(data.num_rows(), data.num_features, kernel, budget,
                               distinct=distinct, choose_kernel=kernel_auto, gaps=bool(gaps))
        picked = METHODS[choice.method]
    else:
        if budget is not None:
            raise PlanError(f"{_arg('budget', door)} sizes the model that "
                            f"{_arg('auto', door)} picks; method {method!r} takes its own "
                            "size options instead (gpscale methods NAME)")
        if not isinstance(method, str) or method not in METHODS:
            raise PlanError(f"unknown method {method!r}; choose one of {sorted(METHODS)} "
                            "(gpscale methods lists them)")
        picked = METHODS[method]
    notes: list[str] = []
    if cluster and not picked.uses_cluster:
        if choice is None:
            raise PlanError(f"method {picked.name!r} trains in this process; "
                            f"{_arg('cluster', door)} apply to the methods that use a "
                            f"cluster: {cluster_methods()}")
        notes.append(f"{picked.name} trains in this process; the cluster is not used")
        cluster = False
    taken = picked.options
    options.update((k, v) for k, v in (defaults or {}).items()
                   if k not in options and (taken is None or k in taken))
    try:
        options.update(parse_option(picked, text) for text in option_text)
        picked.check_options(options)
        if picked.size_check is not None and data is not None:
            picked.size_check(options, data.num_features)
        options.update(placement_options(picked, device, dtype))
        if "device" in options:
            options["device"] = check_device(options["device"])
        if "dtype" in options:
            options["dtype"] = as_dtype(options["dtype"])
        check_values(picked, options)
    except ValueError as err:
        if choice is None:
            raise PlanError(str(err)) from None
        raise PlanError(f"method='auto' picked {choice.method!r} ({choice.reason}), and "
                        f"{err}; give method= yourself to choose another") from None
    if choice is not None:
        options = {**choice.options, **options}
    return Plan(picked, options, choice, cluster, tuple(notes), budget)


_ARGS = {"budget": ("budget=", "--budget"), "auto": ("method='auto'", "--method auto"),
         "cluster": ("scheduler= and workers=", "--scheduler and --workers")}


def _arg(name: str, door: str) -> str:
    return _ARGS[name][door == "cli"]


def survey_cluster(method: Any, scheduler: Any, workers: int | None
                   ) -> tuple[Any, int | None]:
    """The cluster (scheduler, workers) to open before the data are: the one given, for a
    named method that uses it (its survey pass then runs there,
    :mod:`gpscale.io.survey`); (None, None) otherwise, since ``auto`` needs the survey's
    rows and columns to decide whether a cluster is used at all."""
    named = isinstance(method, str) and method != AUTO and method in METHODS
    return (scheduler, workers) if named and METHODS[method].uses_cluster else (None, None)


def check_values(method: Method, options: dict[str, Any]) -> None:
    """ValueError for an option value ``method``'s options dataclass refuses (its
    ``__post_init__``), so that a bad value is refused before any row is read, in the
    words the fit itself would use."""
    cls = options_class(method)
    if cls is not None:
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        checked = cls(**{k: v for k, v in options.items() if k in names})
        if hasattr(checked, "check_given"):  # the protocol of options.takes_options
            checked.check_given(options)


def cluster_methods() -> list[str]:
    """The registered methods that can use a dask cluster."""
    return sorted(name for name, m in METHODS.items() if m.uses_cluster)
