"""``gpscale.fit(X, y) -> Predictor`` and ``gpscale.load(path)``: the entry points a user
calls. Methods live in :mod:`gpscale.methods`, the trained model and its file in
:mod:`gpscale.predictor`."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch

from . import kernels as _kernels
from .deadline import Deadline
from .io import Rows, Source, TrainingData, training_data
from .io.encoding import TableEncoding
from .io.gaps import REFERENCE_ROWS, donor_rows, fill_gaps, loo_scales
from .io.inputs import TABLE_KERNELS, table_kernel
from .io.sample import sample_rows
from .io.scaling import OWN_UNITS_ADVICE, rows_scaler, scaled_in_memory, with_codes
from .kernels import Kernel, gap_columns, with_gaps
from .methods import METHODS, Method, get_method, register_method
from .methods.auto import Choice
from .methods.cost import exact_seconds
from .methods.kernel_choice import (
    AUTO_KERNEL,
    DEFAULT_KERNEL,
    KernelChoice,
    kernel_for,
    loo_predictions,
    modelled_gaps,
)
from .methods.skill_check import check_skill
from .parallel.cluster import connect
from .plan import AUTO, Plan, make_plan, survey_cluster
from .predictor import FORMAT_VERSION, Predictor, load

__all__ = ["fit", "load", "choose", "Choice", "Predictor", "register_method", "get_method",
           "METHODS", "Method", "FORMAT_VERSION"]


def fit(X: Any, y: Any = None, method: str = "exact", kernel: str | Kernel = AUTO_KERNEL,
        standardize: bool = True, *, target: str | None = None,
        columns: list[str] | None = None, exclude: list[str] = (),
        categorical: list[str] = (), date_features: str | list[str] = "days",
        scheduler: Any = None,
        workers: int | None = None, budget: float | None = None,
        **options: Any) -> Predictor:
    """Fit a GP to raw data and return a :class:`Predictor`.

    The data: ``X`` (n, d) inputs and ``y`` (n,) targets in memory (numpy, nested lists,
    pandas, tensors); or ``X`` alone as a source of rows with ``target=`` naming the
    target column: a path, glob, directory or list of CSV / Parquet files, a pandas or
    dask DataFrame, a :class:`gpscale.io.Source` (see :func:`gpscale.io.open_source`,
    which also takes ``columns`` (the inputs), ``exclude``, ``categorical`` and
    ``date_features``: a table's text, category and date columns and missing values are
    encoded there;
    :func:`gpscale.io.open_strings` makes the inputs from a SMILES or sequence column,
    and the predictor then takes those strings).

    ``method`` names an entry of :data:`METHODS`, or ``"auto"``: :func:`choose` picks one
    (and its size) from n, d, the kernel and ``budget`` (seconds; only with ``"auto"``),
    and the predictor's ``choice`` says what and why. ``kernel``: ``"auto"`` (default:
    methods that can — ``exact``, ``sgpr`` and what ``auto`` picks of them — choose the
    family among RBF, Matérn-1/2, 3/2, 5/2 and RQ with ARD from the data, and the
    predictor's ``kernel_choice`` says which and every candidate's score; other methods
    fit ``rbf-ard``; :mod:`gpscale.methods.kernel_choice`), one of
    :data:`gpscale.kernels.KERNELS` or a :class:`Kernel` (copied, not modified). With
    ``standardize`` (default) X's columns and y are scaled to zero mean and unit variance
    for training and predictions are mapped back; hyperparameters (and options such as
    ``noise``) are then in standardised units. Columns read by a kernel on counts,
    histograms or codes (Tanimoto, Intersection, Hamming, spectrum: ``Kernel.raw_inputs``)
    keep their values; y is still standardised. ``options`` go to the method (for
    ``"exact"``: noise, mean, max_iter, restarts, seed, progress, device, dtype).

    Methods that train from passes over the rows or from minibatches
    (``Method.reads``, e.g. ``rff``) never hold a source's rows in memory, and run their
    passes on a dask.distributed cluster with ``scheduler=`` (an address such as
    ``"tcp://host:8786"`` or a ``distributed.Client``) or ``workers=N`` (a local cluster
    of N processes). The other methods load every row of a source first
    (``Source.memory_bytes()`` tells how much). Every check of the request itself happens
    in :func:`gpscale.plan.make_plan` before any row is read for training.
    """
    # a named method's plan reads no rows: made once, before a cluster starts or a row
    # is read; auto's needs the data's size, so it is made once they are known
    plan = None if method == AUTO else make_plan(
        None, method, None, options=options, budget=budget, scheduler=scheduler,
        workers=workers)
    with connect(*survey_cluster(method, scheduler, workers)) as client:
        data = training_data(X, y, target, columns=columns, exclude=exclude,
                             categorical=categorical, date_features=date_features,
                             client=client)
        k, kernel_name = resolve_kernel(kernel, data.num_features, data.inputs)
        if plan is None:
            plan = make_plan(data, method, k, budget=budget, options=options,
                             scheduler=scheduler, workers=workers,
                             kernel_auto=kernel_name == AUTO_KERNEL)
        else:
            plan.check_size(data.num_features)
        cluster = (scheduler, workers) if client is None else (client, None)
        return run(plan, data, k, kernel_name, standardize, *cluster)


def choose(X: Any, y: Any = None, kernel: str | Kernel = AUTO_KERNEL, *,
           target: str | None = None, budget: float | None = None) -> Choice:
    """What ``method="auto"`` picks for this data (see :mod:`gpscale.methods.auto`): the
    method, the size options it sets and why. ``X``, ``y``, ``target`` as in :func:`fit`
    (for a CSV source, counting the rows costs a pass)."""
    data = training_data(X, y, target)
    k, name = resolve_kernel(kernel, data.num_features, data.inputs)
    return make_plan(data, "auto", k, budget=budget, kernel_auto=name == AUTO_KERNEL).choice


def run(plan: Plan, data: TrainingData, kernel: Kernel, kernel_name: str,
        standardize: bool = True, scheduler: Any = None,
        workers: int | None = None) -> Predictor:
    """Carry out ``plan`` (from :func:`gpscale.plan.make_plan`) on ``data``: connect to
    the cluster when the plan says so, have :mod:`gpscale.io.scaling` standardise the
    rows, hand the method the rows the way it reads them (every row as tensors, or
    :class:`gpscale.io.Rows` over the partitions) and wrap the model in the one
    :class:`Predictor` this fit returns. ``kernel`` is trained in place (:func:`fit`
    passes a copy)."""
    m = plan.method
    if not data.has_target:
        raise ValueError(f"{data.description} has no target: pass y with X in memory, or "
                         "name the target column of a file or data frame with target=")
    keeps_time = plan.time_limit is not None and "time_limit" in (m.options or ())
    deadline = Deadline.of(plan.time_limit if keeps_time else None)
    cluster = (scheduler, workers) if plan.on_cluster else (None, None)
    with connect(*cluster) as client:
        if m.streams and (client is not None or data.pair is None):
            scaler, model, result = _fit_rows(m, data.source, kernel, standardize, client,
                                              plan.options, deadline)
            kernel_choice = donors = None
        else:
            scaler, model, result, kernel_name, kernel_choice, donors = _fit_held(
                plan, data, kernel, kernel_name, standardize, client, deadline)
        gap_loo = _gap_loo(model)
        if hasattr(model, "freeze"):  # let go of rows not held and of the cluster,
            model.freeze()  # keeping what prediction needs, read while the cluster is up
        reference = _reference_rows(data, client)
    if kernel_name == AUTO_KERNEL:  # read in passes: the method's default kernel
        kernel_name = DEFAULT_KERNEL
    return Predictor(model, scaler, result, method=m.name, kernel_name=kernel_name,
                     standardize=bool(standardize), feature_names=data.feature_names,
                     target_name=data.target_name, inputs=data.inputs, choice=plan.choice,
                     kernel_choice=kernel_choice, reference=reference, gap_loo=gap_loo,
                     gap_donors=donors)


def _gap_loo(model: Any) -> Any:
    """After an exact fit by Cholesky whose kernel models a table's gaps, each gap
    column's leave-one-out α (:func:`gpscale.io.gaps.loo_scales`; one more factorisation
    at the fitted θ); None for every other fit."""
    columns = gap_columns(getattr(model, "kernel", None))
    if not columns or getattr(getattr(model, "solver", None), "name", None) != "cholesky":
        return None
    mean, var = loo_predictions(model)
    z2 = ((model.y - mean) ** 2 / var).detach().cpu().numpy()
    return loo_scales(z2, model.X.detach().cpu().numpy(), columns)


def _reference_rows(data: TrainingData, client: Any) -> Any:
    """For a table, a uniform sample of its encoded training rows, which a prediction
    integrates a gap over (:mod:`gpscale.io.gaps`); None for other inputs."""
    if not isinstance(data.inputs, TableEncoding):
        return None
    try:
        rows = sample_rows(data.source.partitions(), REFERENCE_ROWS, seed=0, client=client)[0]
    except ValueError:  # a partition without rows: gaps are then filled as older files do
        return None
    return rows if len(rows) else None


def _fit_held(plan: Plan, data: TrainingData, kernel: Kernel, kernel_name: str,
              standardize: bool, client: Any, deadline: Deadline | None = None
              ) -> tuple[Any, Any, Any, str, KernelChoice | None, Any]:
    """Every row in memory, standardised, as tensors: the method gets X, y (or, when it
    reads passes or minibatches, :class:`Rows` holding them), and ``kernel="auto"`` its
    kernel chosen from them (:func:`~gpscale.methods.kernel_choice.kernel_for`).
    ``deadline``: the plan's time allowance, shared by the kernel's choice and the
    method (its ``time_limit``: what is left). Also returns the training rows a table's
    gaps were placed by (:func:`_place_gaps`), or None."""
    m, options = plan.method, plan.options
    scaler, Xs, ys = scaled_in_memory(data, standardize, kernel.raw_columns)
    pick = donors = None
    # a table's missing numbers: their variance modelled where the fit can (kernels/gaps)
    gaps = (data.inputs.gap_columns() if isinstance(data.inputs, TableEncoding) else [])
    if gaps and modelled_gaps(m, options, Xs, gaps):
        Xs, donors = _place_gaps(Xs, data.inputs)
        if deadline is not None:  # the fit leaves time for the leave-one-out pass (_gap_loo)
            deadline = deadline.sooner(deadline.left() - exact_seconds(len(Xs), 1))
    with _own_units(standardize, m.name):
        if kernel_name == AUTO_KERNEL:
            pick = kernel_for(m, Xs, ys, options, budget=plan.budget, deadline=deadline,
                              gaps=tuple(gaps))
            kernel, kernel_name = pick.kernel, pick.name
        elif kernel_name in _kernels.KERNELS or kernel_name in TABLE_KERNELS:  # not a Kernel given
            kernel = with_gaps(kernel, modelled_gaps(m, options, Xs, gaps))
        if pick is not None and pick.fitted is not None:  # the chosen candidate's fit
            model, result = pick.fitted
        else:
            args = (Rows.in_memory(Xs, ys), None) if m.streams else (Xs, ys)
            extra = {"client": client} if m.cluster else {}
            if deadline is not None:  # what the kernel's choice left of the allowance
                extra["time_limit"] = deadline
            model, result = m.fit_fn(*args, kernel, **{**options, **extra})
    check_skill(model, result, lambda rows: (Xs, ys))  # sample_skill draws its rows
    return (scaler, model, result, kernel_name, None if pick is None else pick.choice,
            donors)


def _place_gaps(Xs: Any, inputs: TableEncoding) -> tuple[Any, Any]:
    """Scaled training rows with each gap training had moved from the column's mean to
    the column's mean over the rows nearest on the row's other columns
    (:func:`gpscale.io.gaps.fill_gaps`), and those rows (a sample: the donors), which
    the predictor places new rows' gaps by."""
    X = Xs.detach().cpu().numpy()
    donors = donor_rows(X)
    placed = fill_gaps(X, inputs.gap_blocks(), donors)
    return torch.as_tensor(placed, dtype=Xs.dtype, device=Xs.device), donors


def _fit_rows(m: Method, source: Source, kernel: Kernel, standardize: bool, client: Any,
              options: dict[str, Any], deadline: Deadline | None = None):
    """Rows left in their partitions: the scaler from one moments pass, then the method's
    passes or minibatches (on ``client``'s workers when given); the model keeps the
    statistics it needs, not the rows (``freeze``), read while the cluster is up.
    ``deadline``: the plan's time allowance (the method's ``time_limit``: what the
    moments pass left of it)."""
    d = source.num_features
    parts = tuple(source.partitions())
    scaler = rows_scaler(parts, d, standardize, with_codes(kernel.raw_columns, source), client)
    rows = Rows(parts, d, scaler, client)
    if deadline is not None:
        options = {**options, "time_limit": deadline}
    with _own_units(standardize, m.name):
        model, result = m.fit_fn(rows, None, kernel, **options)
    if model.n < 2:
        raise ValueError(f"{source.description} has {model.n} row(s); a GP needs at "
                         "least 2 samples to learn hyperparameters")
    check_skill(model, result, rows.sample)
    return scaler, model, result


@contextlib.contextmanager
def _own_units(standardize: bool, method: str) -> Iterator[None]:
    """With standardize=False, a numerical failure of the fit (RuntimeError) becomes a
    ValueError that names the likely cause, the data's units."""
    if standardize:
        yield
        return
    from .train.admm import ADMMDivergenceError
    try:
        yield
    except ADMMDivergenceError:
        raise
    except RuntimeError as err:
        raise ValueError(f"method {method!r} failed on the data in its own units "
                         f"(standardize=False): {err}. The usual cause is the columns' scale: "
                         f"{OWN_UNITS_ADVICE}") from None


def resolve_kernel(kernel: str | Kernel, d: int, inputs: Any = None) -> tuple[Kernel, str]:
    """(a fresh kernel for d input columns, its name): a name from
    :data:`gpscale.kernels.KERNELS` built (for a table with categorical columns
    ``inputs``, an ARD name as :func:`gpscale.io.inputs.table_kernel` says), or a
    :class:`Kernel` copied. ``"auto"``: the family is chosen from the data when the fit
    runs (:mod:`gpscale.methods.kernel_choice`); until then its planning stand-in is the
    default family."""
    if isinstance(kernel, Kernel):
        return copy.deepcopy(kernel), type(kernel).__name__
    if isinstance(kernel, str) and kernel.lower() == AUTO_KERNEL:
        return _kernels.make_kernel(DEFAULT_KERNEL, d), AUTO_KERNEL
    if isinstance(kernel, str) and (table := table_kernel(kernel, d, inputs)) is not None:
        return table
    if isinstance(kernel, str):
        return _kernels.make_kernel(kernel, d), kernel.lower()
    raise ValueError(f"kernel must be 'auto', a name from {sorted(_kernels.KERNELS)} or a "
                     f"Kernel object, got {type(kernel).__name__}")
