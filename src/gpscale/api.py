"""``gpscale.fit(X, y) -> Predictor`` and ``gpscale.load(path)``: the entry points a user
calls. Methods live in :mod:`gpscale.methods`, the trained model and its file in
:mod:`gpscale.predictor`."""

from __future__ import annotations

import copy
from typing import Any

import torch

from . import kernels as _kernels
from .kernels import Kernel
from .methods import METHODS, Method, get_method, register_method
from .predictor import FORMAT_VERSION, Predictor, column_names, load, writable
from .preprocessing import Standardizer
from .validation import check_xy

__all__ = ["fit", "load", "Predictor", "register_method", "get_method", "METHODS", "Method",
           "FORMAT_VERSION"]


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
    Xt, yt = check_xy(writable(X), writable(y))
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
                     standardize=bool(standardize), feature_names=column_names(X),
                     target_name=_series_name(y))


def _series_name(obj: Any) -> str | None:
    return obj.name if isinstance(getattr(obj, "name", None), str) else None
