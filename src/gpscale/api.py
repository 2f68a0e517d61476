"""``gpscale.fit(X, y) -> Predictor`` and ``gpscale.load(path)``: the entry points a user
calls. Methods live in :mod:`gpscale.methods`, the trained model and its file in
:mod:`gpscale.predictor`."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from . import kernels as _kernels
from .distributed import connect, source_scaler
from .io import Source, open_source
from .kernels import Kernel
from .methods import METHODS, Method, get_method, register_method
from .methods.auto import Choice, choose_method
from .models.feature import PartitionRows
from .predictor import FORMAT_VERSION, Predictor, _label, column_names, load, writable
from .preprocessing import Standardizer
from .validation import as_dtype, check_device, check_xy

__all__ = ["fit", "load", "choose", "Choice", "Predictor", "register_method", "get_method",
           "METHODS", "Method", "FORMAT_VERSION"]


def fit(X: Any, y: Any = None, method: str = "exact", kernel: str | Kernel = "rbf-ard",
        standardize: bool = True, *, target: str | None = None, scheduler: Any = None,
        workers: int | None = None, budget: float | None = None,
        **options: Any) -> Predictor:
    """Fit a GP to raw data and return a :class:`Predictor`.

    The data: ``X`` (n, d) inputs and ``y`` (n,) targets in memory (numpy, nested lists,
    pandas, tensors); or ``X`` alone as a source of rows with ``target=`` naming the
    target column: a path, glob, directory or list of CSV / Parquet files, a pandas or
    dask DataFrame, a :class:`gpscale.io.Source` (see :func:`gpscale.io.open_source`;
    :func:`gpscale.io.open_strings` makes the inputs from a SMILES or sequence column,
    and the predictor then takes those strings).

    ``method`` names an entry of :data:`METHODS`, or ``"auto"``: :func:`choose` picks one
    (and its size) from n, d, the kernel and ``budget`` (seconds; only with ``"auto"``),
    and the predictor's ``choice`` says what and why. ``kernel`` one of
    :data:`gpscale.kernels.KERNELS` or a :class:`Kernel` (copied, not modified). With
    ``standardize`` (default) X's columns and y are scaled to zero mean and unit variance
    for training and predictions are mapped back; hyperparameters (and options such as
    ``noise``) are then in standardised units. Columns read by a kernel on counts,
    histograms or codes (Tanimoto, Intersection, Hamming, spectrum: ``Kernel.raw_inputs``)
    keep their values; y is still standardised. ``options`` go to the method (for
    ``"exact"``: noise, mean, max_iter, restarts, seed, progress, device, dtype).

    Methods that train from passes over the rows (``Method.streams``, e.g. ``rff``) never
    hold a source's rows in memory, and run those passes on a dask.distributed cluster
    with ``scheduler=`` (an address such as ``"tcp://host:8786"`` or a
    ``distributed.Client``) or ``workers=N`` (a local cluster of N processes). The other
    methods load every row of a source first (``Source.memory_bytes()`` tells how much).
    """
    if method == "auto":
        return _fit_auto(X, y, kernel, standardize, target, scheduler, workers, budget,
                         options)
    if budget is not None:
        raise ValueError(f"budget= sizes the model that method='auto' picks; method "
                         f"{method!r} takes its own size options instead (gpscale methods)")
    m = get_method(method)
    m.check_options(options)
    options = _device_dtype(options)
    if y is None or isinstance(X, Source):
        source = X if isinstance(X, Source) else open_source(X, target=target)
        return _fit_source(source, m, kernel, standardize, scheduler, workers, options)
    if target is not None:
        raise ValueError("target= names the target column of a file or data frame given as "
                         "X alone; with X and y in memory leave it out")
    if (scheduler is not None or workers is not None) and m.streams:
        source = open_source((writable(X), writable(y)))
        pred = _fit_source(source, m, kernel, standardize, scheduler, workers, options)
        pred.feature_names, pred.target_name = column_names(X), _series_name(y)
        return pred
    _check_cluster_use(m, scheduler, workers)
    Xt, yt = check_xy(writable(X), writable(y))
    if Xt.shape[0] < 2:
        raise ValueError(f"got 1 sample (X has shape {tuple(Xt.shape)}); a GP needs at "
                         "least 2 samples to learn hyperparameters")
    Xn, yn = Xt.cpu().numpy(), yt.cpu().numpy()
    k, kernel_name = _kernel(kernel, Xn.shape[1])
    if not standardize:
        _check_own_units(Xn, yn)
    scaler = (Standardizer.fit(Xn, yn).keep_columns(k.raw_columns(Xn.shape[1]))
              if standardize else Standardizer.identity(Xn.shape[1]))
    Xs = torch.as_tensor(scaler.transform_x(Xn), dtype=torch.float64)
    ys = torch.as_tensor(scaler.transform_y(yn), dtype=torch.float64)
    with connect(scheduler, workers) as client, _own_units(standardize, m.name):
        extra = {"client": client} if m.cluster else {}
        model, result = m.fit_fn(Xs, ys, k, **options, **extra)
    return Predictor(model, scaler, result, method=m.name, kernel_name=kernel_name,
                     standardize=bool(standardize), feature_names=column_names(X),
                     target_name=_series_name(y))


def choose(X: Any, y: Any = None, kernel: str | Kernel = "rbf-ard", *,
           target: str | None = None, budget: float | None = None) -> Choice:
    """What ``method="auto"`` picks for this data (see :mod:`gpscale.methods.auto`): the
    method, the size options it sets and why. ``X``, ``y``, ``target`` as in :func:`fit`
    (for a CSV source, counting the rows costs a pass)."""
    source = _auto_source(X, y, target)
    d = source.num_features
    return choose_method(source.num_rows(), d, _kernel(kernel, d)[0], budget)


def _auto_source(X: Any, y: Any, target: str | None) -> Source:
    if isinstance(X, Source):
        return X
    if y is None:
        return open_source(X, target=target)
    return open_source((writable(X), writable(y)))


def _fit_auto(X: Any, y: Any, kernel: str | Kernel, standardize: bool, target: str | None,
              scheduler: Any, workers: int | None, budget: float | None,
              options: dict[str, Any]) -> Predictor:
    source = _auto_source(X, y, target)
    choice = choose(source, kernel=kernel, budget=budget)
    m = get_method(choice.method)
    try:
        m.check_options(options)
    except ValueError as err:
        raise ValueError(f"method='auto' picked {choice.method!r} ({choice.reason}), and "
                         f"{err}; give method= yourself to choose another") from None
    local = not (m.streams or m.cluster)
    if local and (scheduler is not None or workers is not None):
        choice = Choice(choice.method, choice.options,
                        f"{choice.reason}; it trains in this process, not on the cluster")
    data = (source, None) if y is None or isinstance(X, Source) else (X, y)
    pred = fit(*data, method=m.name, kernel=kernel, standardize=standardize,
               scheduler=None if local else scheduler, workers=None if local else workers,
               **{**choice.options, **options})  # the user's own options win
    pred.choice = choice
    return pred


def _fit_source(source: Source, m: Method, kernel: str | Kernel, standardize: bool,
                scheduler: Any, workers: int | None, options: dict[str, Any]) -> Predictor:
    """:func:`fit` on a source of rows: streamed where the method allows it."""
    if not source.has_target:
        raise ValueError(f"{source.description} has no target: pass y with X in memory, or "
                         "name the target column of a file or data frame with target=")
    if not m.streams:
        _check_cluster_use(m, scheduler, workers)
        X, y = source.to_arrays()
        pred = fit(X, y, m.name, kernel, standardize, scheduler=scheduler, workers=workers,
                   **options)
        pred.feature_names, pred.target_name = source.feature_names, source.target_name
        pred.inputs = source.inputs
        return pred
    k, kernel_name = _kernel(kernel, source.num_features)
    with connect(scheduler, workers) as client:
        parts = tuple(source.partitions())
        scaler = (source_scaler(parts, client).keep_columns(k.raw_columns(source.num_features))
                  if standardize else Standardizer.identity(source.num_features))
        rows = PartitionRows(parts, source.num_features, scaler, client)
        with _own_units(standardize, m.name):
            model, result = m.fit_fn(rows, None, k, **options)
        if model.n < 2:
            raise ValueError(f"{source.description} has {model.n} row(s); a GP needs at "
                             "least 2 samples to learn hyperparameters")
        if hasattr(model, "freeze"):  # e.g. SVGP keeps no rows: nothing to freeze
            model.freeze()  # the statistics at the fitted θ, read while the cluster is up
    return Predictor(model, scaler, result, method=m.name, kernel_name=kernel_name,
                     standardize=bool(standardize), feature_names=source.feature_names,
                     target_name=source.target_name, inputs=source.inputs)


def _device_dtype(options: dict[str, Any]) -> dict[str, Any]:
    """``device`` and ``dtype`` options checked (ValueError saying what is accepted)
    before any data are read or any work is done."""
    out = dict(options)
    if "device" in out:
        out["device"] = check_device(out["device"])
    if "dtype" in out:
        out["dtype"] = as_dtype(out["dtype"])
    return out


#: with standardize=False, |values| above this are refused: squared distances and yᵀy of
#: such values overflow float64 (its largest finite square root is about 1.3e154)
OWN_UNITS_MAX = 1e150
_NO_STANDARDIZE = ("let gpscale standardise the data (drop standardize=False, or "
                   "--no-standardize on the command line) or rescale the columns yourself")


def _check_own_units(X: np.ndarray, y: np.ndarray) -> None:
    """ValueError when data to be used in its own units is too large for float64 GPs."""
    for name, a in (("X", X), ("y", y)):
        top = float(np.max(np.abs(a))) if a.size else 0.0
        if top > OWN_UNITS_MAX:
            raise ValueError(f"with standardize=False the GP works in the data's own units, "
                             f"and {name} reaches |value| = {top:.3g} (> {OWN_UNITS_MAX:g}), "
                             f"where its squares overflow: {_NO_STANDARDIZE}")


@contextlib.contextmanager
def _own_units(standardize: bool, method: str) -> Iterator[None]:
    """With standardize=False, a numerical failure of the fit (RuntimeError) becomes a
    ValueError that names the likely cause, the data's units."""
    if standardize:
        yield
        return
    from .train.admm_run import ADMMDivergenceError
    try:
        yield
    except ADMMDivergenceError:
        raise
    except RuntimeError as err:
        raise ValueError(f"method {method!r} failed on the data in its own units "
                         f"(standardize=False): {err}. The usual cause is the columns' scale: "
                         f"{_NO_STANDARDIZE}") from None


def _check_cluster_use(m: Method, scheduler: Any, workers: int | None) -> None:
    if (scheduler is not None or workers is not None) and not (m.streams or m.cluster):
        uses = sorted(n for n, v in METHODS.items() if v.streams or v.cluster)
        raise ValueError(f"method {m.name!r} trains in this process; scheduler= and "
                         f"workers= apply to the methods that use a cluster: {uses}")


def _kernel(kernel: str | Kernel, d: int) -> tuple[Kernel, str]:
    if isinstance(kernel, Kernel):
        return copy.deepcopy(kernel), type(kernel).__name__
    if isinstance(kernel, str):
        return _kernels.make_kernel(kernel, d), kernel.lower()
    raise ValueError(f"kernel must be a name from {sorted(_kernels.KERNELS)} or a "
                     f"Kernel object, got {type(kernel).__name__}")


def _series_name(obj: Any) -> Any:
    """A pandas Series' name (text or another plain label), else None."""
    name = getattr(obj, "name", None) if hasattr(obj, "to_numpy") else None
    return None if name is None else _label(name)
