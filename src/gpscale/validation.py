"""Input checks with messages that say what to do."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch


def by_name(frame: Any) -> str:
    """How to fit a data frame whose columns are not all numbers: by its columns' names,
    which reads text, category and date columns (empty when ``frame`` is no frame)."""
    dtypes = getattr(frame, "dtypes", None)
    if not hasattr(frame, "columns") or dtypes is None:
        return ""
    text = [str(c) for c, t in zip(frame.columns, dtypes) if getattr(t, "kind", "O") not in "biuf"]
    return (f". Its column(s) {text} are not numbers: to fit a table, pass the data frame "
            f"with the target as one of its columns and name it, gpscale.fit(df.assign(y=y), "
            f"target='y'); text, category and date columns are then encoded")


def mark_checked(T: torch.Tensor) -> torch.Tensor:
    """``T`` (a finite tensor) marked as checked: :func:`as_matrix` and
    :func:`as_vector` take it as it is, without another pass over its values, until it
    is modified in place (its version counter moves). Returns ``T``."""
    T._gpscale_checked = T._version
    return T


def _checked_as_asked(T: Any, ndim: int, dtype: torch.dtype, device) -> bool:
    """Whether ``T`` is a tensor marked checked and unchanged since, of the asked shape
    rank, dtype and device: then it is taken as it is."""
    return (isinstance(T, torch.Tensor) and getattr(T, "_gpscale_checked", None) == T._version
            and not T.requires_grad and T.ndim == ndim and T.dtype == dtype
            and (device is None or T.device == torch.device(device)))


def as_matrix(
    X, name: str = "X", dtype: torch.dtype = torch.float64, device=None
) -> torch.Tensor:
    """X as a finite (n, d) tensor; raises ValueError naming ``name`` otherwise. A tensor
    already checked (:func:`mark_checked`) of the asked dtype and device is returned
    as it is: the rows are checked once on their way to the model."""
    if _checked_as_asked(X, 2, dtype, device):
        return X
    if isinstance(X, torch.Tensor):
        T = X.detach().to(dtype=dtype, device=device)
    else:
        try:
            arr = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be numeric; could not convert it ({err})"
                             f"{by_name(X)}") from None
        T = torch.as_tensor(arr, dtype=dtype, device=device)
    if T.ndim == 1:
        raise ValueError(
            f"{name} is 1-D with shape {tuple(T.shape)}; inputs must be 2-D (n, d). "
            f"Reshape it with {name}.reshape(-1, 1) for a single feature."
        )
    if T.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d); got shape {tuple(T.shape)}")
    if T.shape[0] == 0 or T.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(T.shape)}); give at least one row")
    _check_finite(T, name)
    return mark_checked(T)


def as_vector(y, name: str = "y", dtype: torch.dtype = torch.float64, device=None):
    """y as a finite (n,) tensor; an (n, 1) column is accepted (a checked tensor is
    returned as it is, as by :func:`as_matrix`)."""
    if _checked_as_asked(y, 1, dtype, device):
        return y
    if isinstance(y, torch.Tensor):
        T = y.detach().to(dtype=dtype, device=device)
    else:
        try:
            arr = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be numeric; could not convert it ({err})") from None
        T = torch.as_tensor(arr, dtype=dtype, device=device)
    if T.ndim == 2 and T.shape[1] == 1:
        T = T[:, 0]
    if T.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (n,) (one target); got shape {tuple(T.shape)}. "
            "Multi-output regression is not supported: fit one model per column."
        )
    if T.shape[0] == 0:
        raise ValueError(f"{name} is empty; give at least one target value")
    _check_finite(T, name)
    return mark_checked(T)


def as_test_inputs(X_new, X_train: torch.Tensor) -> torch.Tensor:
    """``X_new`` as a finite matrix with the training inputs' dtype, device and columns."""
    Xs = as_matrix(X_new, "X_new", X_train.dtype, X_train.device)
    if Xs.shape[1] != X_train.shape[1]:
        raise ValueError(f"X_new has {Xs.shape[1]} columns but the model was trained on "
                         f"{X_train.shape[1]}")
    return Xs


def check_xy(X, y, dtype: torch.dtype = torch.float64, device=None):
    """Validated (X, y) pair with matching lengths."""
    Xt = as_matrix(X, "X", dtype, device)
    yt = as_vector(y, "y", dtype, device)
    if Xt.shape[0] != yt.shape[0]:
        raise ValueError(
            f"X has {Xt.shape[0]} rows but y has {yt.shape[0]} values; they must match"
        )
    return Xt, yt


def _check_finite(T: torch.Tensor, name: str) -> None:
    bad = ~torch.isfinite(T)
    if bad.any():
        idx = torch.nonzero(bad)[:5].tolist()
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN/inf values (first at index "
            f"{idx}); drop or impute those rows before fitting"
        )


def check_positive(name: str, value) -> float:
    """``value`` as a float after checking it is a real number (or a one-element tensor),
    finite and > 0; ValueError naming ``name`` otherwise."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = float(value.detach())
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not (math.isfinite(float(value)) and value > 0):
        raise ValueError(f"{name} must be a positive, finite number, got {value!r}")
    return float(value)


def check_int(name: str, value: Any, low: int) -> int:
    """``value`` as an int after checking it is an integer (not a bool) ≥ ``low``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_optional_int(name: str, value: Any, low: int) -> int | None:
    """:func:`check_int` for an option that may be None (returned as it is)."""
    return None if value is None else check_int(name, value, low)


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """A floating torch dtype from a dtype or its name (``'float64'``, ``'torch.float32'``)."""
    value = dtype if isinstance(dtype, torch.dtype) else getattr(
        torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"dtype must be a floating torch dtype like 'float64', got {dtype!r}")
    return value


def check_device(device: Any) -> torch.device | None:
    """``device`` (None, a name such as ``'cpu'`` or ``'cuda:0'``, or a
    :class:`torch.device`) as a device this machine has; ValueError saying which are
    accepted otherwise, before any work is done on it."""
    if device is None:
        return None
    have = available_devices()
    accepted = f"accepted here: {', '.join(repr(d) for d in have)} (or None)"
    dev = None
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device.strip())
        except (RuntimeError, ValueError):
            dev = None
    if dev is None:
        raise ValueError(f"device must be a device name like 'cpu' or 'cuda:0', got "
                         f"{device!r}; {accepted}")
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        if dev.index is None or dev.index < torch.cuda.device_count():
            return dev
    if dev.type == "mps" and dev.index in (None, 0) and torch.backends.mps.is_available():
        return dev
    raise ValueError(f"device {device!r} is not available on this machine; {accepted}")


def available_devices() -> list[str]:
    """The device names :func:`check_device` accepts on this machine."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        out.append("mps")
    return out
