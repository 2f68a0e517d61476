"""``gpscale.fit(X, y) -> Predictor``, ``Predictor.save``, ``gpscale.load``, and the two
registries behind them: training methods (:data:`METHODS`, ``fit_fn(X, y, kernel,
**options) -> (model, FitResult)`` on standardised tensors) and per-model-class save
hooks (:data:`MODEL_IO`: constructor options out, model rebuilt from kernel config,
options and ``state_dict``)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from . import kernels as _kernels
from .kernels import Kernel
from .models import ExactGP
from .preprocessing import Standardizer
from .train import FitResult, fit_lbfgs
from .validation import as_matrix, check_positive, check_xy

__all__ = ["fit", "load", "Predictor", "register_method", "METHODS", "Method",
           "register_model_io", "MODEL_IO", "ModelIO", "atomic_path", "FORMAT_VERSION"]

FORMAT_VERSION = 1  #: version of the file written by :meth:`Predictor.save`
_FORMAT_TAG = "gpscale-model"
FitFn = Callable[..., tuple[nn.Module, FitResult]]


# -- method registry ------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """A registered training method: ``fit_fn(X, y, kernel, **options)``."""

    name: str
    fit_fn: FitFn
    description: str
    options: tuple[str, ...] | None  # accepted option names; None = any

    def check_options(self, options: dict[str, Any]) -> None:
        unknown = [] if self.options is None else sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"method {self.name!r} does not take option(s) {unknown}; "
                             f"it takes {sorted(self.options)}")


#: training methods by name (see :func:`register_method`)
METHODS: dict[str, Method] = {}


def register_method(name: str, fit_fn: FitFn, description: str = "",
                    options: list[str] | tuple[str, ...] | None = None,
                    replace: bool = False) -> Method:
    """Make ``fit_fn`` available as ``method=name`` in :func:`fit`, the estimator and the CLI.

    ``fit_fn(X, y, kernel, **options) -> (model, FitResult)`` receives standardised
    float64 tensors X (n, d), y (n,) and a fresh :class:`Kernel`; the model it returns
    has ``.predict(X, include_noise=bool) -> (mean, var)`` and a registered
    :func:`register_model_io` entry so that it can be saved. ``options`` lists the
    keyword options accepted (default: read off ``fit_fn``'s signature; ``**kwargs``
    there means any).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"method name must be a non-empty string, got {name!r}")
    if name in METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered; pass replace=True")
    options = _keyword_options(fit_fn) if options is None else tuple(options)
    METHODS[name] = Method(name, fit_fn, description, options)
    return METHODS[name]


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


# -- model save/load registry ---------------------------------------------------------------
@dataclass(frozen=True)
class ModelIO:
    """How to save and rebuild one model class: ``options(model)`` gives its constructor
    options as plain Python values; ``rebuild(kernel, state_dict, options)`` returns a
    model of the right shapes, into which :func:`load` then loads ``state_dict``."""

    options: Callable[[nn.Module], dict[str, Any]]
    rebuild: Callable[[Kernel, dict[str, torch.Tensor], dict[str, Any]], nn.Module]


#: save/load hooks by model class name (see :func:`register_model_io`)
MODEL_IO: dict[str, ModelIO] = {}


def register_model_io(cls: type | str, options: Callable[[nn.Module], dict[str, Any]],
                      rebuild: Callable[..., nn.Module]) -> None:
    """Let models of class ``cls`` (or that class name) be saved and loaded through
    their ``state_dict``; a model's ``.kernel``, if it has one, is saved as its config."""
    MODEL_IO[cls if isinstance(cls, str) else cls.__name__] = ModelIO(options, rebuild)


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    value = dtype if isinstance(dtype, torch.dtype) else getattr(
        torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"dtype must be a floating torch dtype like 'float64', got {dtype!r}")
    return value


def _exact_options(model: nn.Module) -> dict[str, Any]:
    return {"mean": model.mean_kind, "dtype": str(model.X.dtype).removeprefix("torch.")}


def _exact_rebuild(kernel: Kernel, state: dict[str, torch.Tensor], opts: dict) -> nn.Module:
    dtype = _as_dtype(opts["dtype"])
    return ExactGP(kernel, state["X"], state["y"], mean=opts["mean"], dtype=dtype)


register_model_io(ExactGP, _exact_options, _exact_rebuild)


# -- the "exact" method ---------------------------------------------------------------------
_check_positive = check_positive  # the name the method modules import


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def fit_exact(X: torch.Tensor, y: torch.Tensor, kernel: Kernel, noise: float = 0.1,
              mean: str = "zero", max_iter: int = 200, restarts: int = 0,
              seed: int | None = None, progress: bool = False,
              device: torch.device | str | None = None,
              dtype: torch.dtype | str = torch.float64) -> tuple[ExactGP, FitResult]:
    """Exact GP, ML-II by L-BFGS (:func:`gpscale.train.fit_lbfgs`); ``noise`` is the
    initial noise variance in the units of y given (standardised ones by default)."""
    seed = None if seed is None else _check_int("seed", seed, 0)
    model = ExactGP(kernel, X, y, noise=_check_positive("noise", noise), mean=mean,
                    dtype=_as_dtype(dtype), device=device)
    return model, fit_lbfgs(model, max_iter=_check_int("max_iter", max_iter, 1),
                            restarts=_check_int("restarts", restarts, 0), seed=seed,
                            progress=progress, method="exact")


register_method("exact", fit_exact, "exact GP, ML-II (marginal likelihood) by L-BFGS")


# -- fit / Predictor ------------------------------------------------------------------------
def _column_names(obj: Any) -> list[str] | None:
    """A data frame's column names (when they are all strings)."""
    cols = getattr(obj, "columns", None)
    names = [] if cols is None else list(cols)
    return names if names and all(isinstance(c, str) for c in names) else None


def _series_name(obj: Any) -> str | None:
    return obj.name if isinstance(getattr(obj, "name", None), str) else None


def fit(X: Any, y: Any, method: str = "exact", kernel: str | Kernel = "rbf-ard",
        standardize: bool = True, **options: Any) -> Predictor:
    """Fit a GP to raw data and return a :class:`Predictor`.

    X: (n, d) inputs (numpy, nested lists, pandas, tensors); y: (n,) targets. ``method``
    names an entry of :data:`METHODS`; ``kernel`` one of :data:`gpscale.kernels.KERNELS`
    or a :class:`Kernel` (copied, not modified). With ``standardize`` (default) X's
    columns and y are scaled to zero mean and unit variance for training and predictions
    are mapped back; hyperparameters (and options such as ``noise``) are then in
    standardised units. ``options`` go to the method (for ``"exact"``: noise, mean,
    max_iter, restarts, seed, progress, device, dtype).
    """
    m = get_method(method)
    m.check_options(options)
    Xt, yt = check_xy(_writable(X), _writable(y))
    if Xt.shape[0] < 2:
        raise ValueError(f"got 1 sample (X has shape {tuple(Xt.shape)}); a GP needs at "
                         "least 2 samples to learn hyperparameters")
    Xn, yn = Xt.cpu().numpy(), yt.cpu().numpy()
    d = Xn.shape[1]
    if isinstance(kernel, Kernel):
        k, kernel_name = copy.deepcopy(kernel), type(kernel).__name__
    elif isinstance(kernel, str):
        k, kernel_name = _kernels.make_kernel(kernel, d), kernel.lower()
    else:
        raise ValueError(f"kernel must be a name from {sorted(_kernels.KERNELS)} or a "
                         f"Kernel object, got {type(kernel).__name__}")
    scaler = Standardizer.fit(Xn, yn) if standardize else Standardizer.identity(d)
    Xs = torch.as_tensor(scaler.transform_x(Xn), dtype=torch.float64)
    ys = torch.as_tensor(scaler.transform_y(yn), dtype=torch.float64)
    model, result = m.fit_fn(Xs, ys, k, **options)
    return Predictor(model, scaler, result, method=m.name, kernel_name=kernel_name,
                     standardize=bool(standardize), feature_names=_column_names(X),
                     target_name=_series_name(y))


class Predictor:
    """A trained model with its scaler: predictions in the data's original units."""

    def __init__(self, model: nn.Module, scaler: Standardizer, result: FitResult,
                 method: str, kernel_name: str, standardize: bool = True,
                 feature_names: list[str] | None = None,
                 target_name: str | None = None) -> None:
        self.model, self.scaler, self.result = model, scaler, result
        self.method, self.kernel_name, self.standardize = method, kernel_name, standardize
        #: input column names and target name, when the training data had them
        self.feature_names, self.target_name = feature_names, target_name

    @property
    def n_features(self) -> int:
        return int(np.asarray(self.scaler.x_mean).shape[0])

    @property
    def kernel(self) -> Kernel | None:
        return getattr(self.model, "kernel", None)  # feature-space models have none

    def match_columns(self, names: list[str], what: str = "X") -> list[str]:
        """The training input names, in training order, after checking that ``names``
        (minus the target) are exactly those; ValueError listing the differences."""
        names = [c for c in names if c != self.target_name]
        if self.feature_names is None:
            if len(names) != self.n_features:
                raise ValueError(f"{what} has {len(names)} input columns but the model "
                                 f"takes {self.n_features}")
            return names
        missing = [c for c in self.feature_names if c not in names]
        extra = [c for c in names if c not in self.feature_names]
        if missing or extra:
            raise ValueError(f"the columns of {what} do not match the model's inputs "
                             f"{self.feature_names}: missing {missing}, unexpected {extra}")
        return list(self.feature_names)

    def _inputs(self, X: Any) -> np.ndarray:
        names = _column_names(X)
        if names is not None and self.feature_names is not None:
            X = X[self.match_columns(names)]
        Xn = as_matrix(_writable(X), "X").cpu().numpy()
        if Xn.shape[1] != self.n_features:
            raise ValueError(f"X has {Xn.shape[1]} columns but the model was trained on "
                             f"{self.n_features}")
        return Xn

    def predict(self, X: Any, return_std: bool = False,
                include_noise: bool = True) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Predictive mean at X (and standard deviation with ``return_std``), in the
        original units of y. ``include_noise``: std of a new observation y (default)
        rather than of the latent function f."""
        like = next(t for t in [*self.model.parameters(), *self.model.buffers()]
                    if t.is_floating_point())
        Xs = torch.as_tensor(self.scaler.transform_x(self._inputs(X)), dtype=like.dtype,
                             device=like.device)
        with torch.no_grad():
            mean, var = self.model.predict(Xs, include_noise=include_noise)
        mean, var = self.scaler.inverse_y(mean.detach().to("cpu", torch.float64).numpy(),
                                          var.detach().to("cpu", torch.float64).numpy())
        return (mean, np.sqrt(np.clip(var, 0.0, None))) if return_std else mean

    def summary(self) -> str:
        """Method, data, fit outcome and the hyperparameter table."""
        m = METHODS.get(self.method)
        units = ("standardised units (X columns and y scaled to mean 0, std 1)"
                 if self.standardize else "the data's units")
        table = self.model.summary() if hasattr(self.model, "summary") else repr(self.model)
        return (f"gpscale predictor: method {self.method!r} ({m.description if m else '?'}),"
                f" kernel {self.kernel_name!r}\ninputs: {self.n_features}"
                f"{' ' + str(self.feature_names) if self.feature_names else ''}, training "
                f"points: {getattr(self.model, 'n', '?')}\nfit: {self.result}\n"
                f"hyperparameters, in {units}:\n{table}")

    def __repr__(self) -> str:
        return (f"Predictor(method={self.method!r}, kernel={self.kernel_name!r}, "
                f"n_features={self.n_features}, standardize={self.standardize})")

    # -- persistence ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The saved form: tensors and plain Python values only."""
        cls = type(self.model).__name__
        if cls not in MODEL_IO:
            raise ValueError(f"cannot save a {cls}: no save/load hook registered; see "
                             "gpscale.api.register_model_io")
        return {
            "format": _FORMAT_TAG, "format_version": FORMAT_VERSION,
            "method": self.method, "kernel_name": self.kernel_name,
            "kernel_config": _plain(self.kernel.config()) if self.kernel is not None else None,
            "model_class": cls, "model_options": _plain(MODEL_IO[cls].options(self.model)),
            "state_dict": {k: v.detach().cpu().clone()
                           for k, v in self.model.state_dict().items()},
            "scaler": _plain(self.scaler.state()), "standardize": self.standardize,
            "feature_names": self.feature_names, "target_name": self.target_name,
            "result": _plain(dataclasses.asdict(self.result)),
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write the predictor to ``path`` (a torch file readable with
        ``weights_only=True``); a failed save leaves nothing behind."""
        payload = self.to_dict()  # before touching the file system
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)
        return Path(path)


def load(path: str | os.PathLike, device: torch.device | str | None = None) -> Predictor:
    """Read a predictor written by :meth:`Predictor.save` (optionally onto ``device``)."""
    if not (path := Path(path)).is_file():
        raise FileNotFoundError(f"model file {str(path)!r} not found")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means "not ours"
        raise ValueError(f"{str(path)!r} is not a gpscale model file (torch.load could not "
                         f"read it: {type(err).__name__}: {err})") from None
    if not isinstance(saved, dict) or saved.get("format") != _FORMAT_TAG:
        raise ValueError(f"{str(path)!r} is not a gpscale model file "
                         "(write one with gpscale fit or Predictor.save)")
    version = saved.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"{str(path)!r} has format version {version!r}; this gpscale reads "
                         f"up to {FORMAT_VERSION}: upgrade gpscale")
    cls = saved["model_class"]
    if cls not in MODEL_IO:
        raise ValueError(f"{str(path)!r} holds a {cls}, which this gpscale cannot rebuild "
                         f"(known: {sorted(MODEL_IO)})")
    state = saved["state_dict"]
    cfg = saved["kernel_config"]
    kernel = _kernels.from_config(cfg) if cfg is not None else None
    model = MODEL_IO[cls].rebuild(kernel, state, saved["model_options"])
    model.load_state_dict(state)
    model = model if device is None else model.to(device)
    fields = {f.name for f in dataclasses.fields(FitResult)}
    result = FitResult(**{k: v for k, v in saved["result"].items() if k in fields})
    return Predictor(model, Standardizer.from_state(saved["scaler"]), result,
                     method=saved["method"],
                     kernel_name=saved["kernel_name"], standardize=saved["standardize"],
                     feature_names=saved["feature_names"], target_name=saved["target_name"])


# -- helpers --------------------------------------------------------------------------------
def _writable(a: Any) -> Any:
    """Array-likes as writable float arrays: torch cannot wrap read-only memory."""
    try:
        arr = a if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return a  # as_matrix / as_vector say what is wrong with it
    return arr if isinstance(arr, torch.Tensor) or arr.flags.writeable else arr.copy()


def _plain(obj: Any) -> Any:
    """``obj`` with numpy/torch scalars and arrays turned into Python values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (torch.Tensor, np.ndarray, np.generic)):
        return obj.tolist()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block
    succeeds, delete it otherwise (so no partial file is ever left at ``path``)."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        raise FileNotFoundError(f"directory {str(parent)!r} does not exist; create it first")
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; give a file name")
    tmp = parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    # created like any new file (permissions from the umask), exclusively
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
