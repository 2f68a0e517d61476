"""scikit-learn estimator wrapping any registered gpscale method.

>>> from gpscale.sklearn import GPRegressor
>>> model = GPRegressor(kernel="matern52-ard").fit(X, y)      # doctest: +SKIP
>>> mean, std = model.predict(X_test, return_std=True)         # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from sklearn.base import BaseEstimator, RegressorMixin
    from sklearn.utils.validation import (
        check_array,
        check_consistent_length,
        check_is_fitted,
        validate_data,
    )
except ImportError as err:  # validate_data is new in scikit-learn 1.6
    raise ImportError(f"gpscale.sklearn needs scikit-learn >= 1.6 ({err}): "
                      "pip install 'gpscale[sklearn]'") from err

from . import api
from .kernels import Kernel

__all__ = ["GPRegressor", "is_table"]


class GPRegressor(RegressorMixin, BaseEstimator):
    """Gaussian-process regression with hyperparameters learned by ``method``.

    Parameters
    ----------
    method : a name from :data:`gpscale.api.METHODS` (default ``"exact"``: ML-II by L-BFGS),
        or ``"auto"`` (:func:`gpscale.api.choose` picks one from the data's size).
    kernel : ``"auto"`` (default: the family chosen from the data, see :func:`gpscale.fit`),
        a name from :data:`gpscale.kernels.KERNELS` or a :class:`gpscale.kernels.Kernel`
        (copied at fit time).
    standardize : scale X's columns and y to zero mean, unit variance for training and
        map predictions back (default True).
    max_iter, restarts, seed, noise : passed to the method when given (None, the
        default, leaves the method's own default); a method that does not take one of
        them refuses it at fit time. ``noise`` is the initial noise variance, in
        standardised units of y by default.
    options : further keyword options for the method (dict).

    Attributes
    ----------
    predictor_ : the fitted :class:`gpscale.api.Predictor` (save it with ``.save(path)``).
    n_features_in_ : number of input columns seen in ``fit``.
    n_iter_ : optimiser iterations of the winning run (from ``predictor_.result``).
    """

    def __init__(
        self,
        method: str = "exact",
        kernel: str | Kernel = "auto",
        standardize: bool = True,
        max_iter: int | None = None,
        restarts: int | None = None,
        seed: int | None = None,
        noise: float | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.method = method
        self.kernel = kernel
        self.standardize = standardize
        self.max_iter = max_iter
        self.restarts = restarts
        self.seed = seed
        self.noise = noise
        self.options = options

    def _method_options(self) -> dict[str, Any]:
        if self.method != "auto" and (not isinstance(self.method, str)
                                      or self.method not in api.METHODS):
            raise ValueError(f"unknown method {self.method!r}; choose one of "
                             f"{sorted(api.METHODS)} or 'auto'")  # before the data
        common = {"max_iter": self.max_iter, "restarts": self.restarts, "seed": self.seed,
                  "noise": self.noise}
        opts = {k: v for k, v in common.items() if v is not None}
        if self.options is not None:
            if not isinstance(self.options, dict):
                raise ValueError(f"options must be a dict of method options, got "
                                 f"{type(self.options).__name__}")
            opts.update(self.options)
        return opts

    def fit(self, X: Any, y: Any) -> GPRegressor:
        """Learn the hyperparameters on (X, y); returns self. A pandas DataFrame with
        text, category or date columns or missing values is encoded as a table
        (:mod:`gpscale.io.encoding`), and ``predict`` then takes such frames."""
        self.table_ = is_table(X)
        if self.table_:
            # names and count only: scikit-learn's array check casts nullable and category
            # columns to one dtype, which the table's own encoding does column by column
            validate_data(self, X, skip_check_array=True)
            y = check_array(y, ensure_2d=False, dtype=np.float64, ensure_all_finite=False,
                            ensure_min_samples=2, input_name="y").reshape(-1)
            check_consistent_length(X, y)
            target = _unused_name(X)
            frame = X.assign(**{target: y})
            self.predictor_ = api.fit(frame, target=target, method=self.method,
                                      kernel=self.kernel, standardize=self.standardize,
                                      **self._method_options())
        else:
            X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64,
                                 ensure_min_samples=2)
            self.predictor_ = api.fit(X, y, method=self.method, kernel=self.kernel,
                                      standardize=self.standardize, **self._method_options())
        history = self.predictor_.result.history
        self.n_iter_ = int(history[-1].get("iter", len(history))) if history else 0
        return self

    def predict(
        self, X: Any, return_std: bool = False
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Predictive mean (and, with ``return_std``, the predictive standard deviation
        of a new observation, noise included) at X."""
        check_is_fitted(self)
        if getattr(self, "table_", False):
            if not hasattr(X, "columns"):
                raise ValueError("this model was fit on a DataFrame of table columns; "
                                 "predict takes a DataFrame with those columns")
            validate_data(self, X, reset=False, skip_check_array=True)
        else:
            X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.predictor_.predict(X, return_std=return_std)


def is_table(X: Any) -> bool:
    """Whether ``X`` is a pandas DataFrame that is not plain numbers: a text, category,
    date or other non-numeric column, or a missing value."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "isna") or not hasattr(dtypes, "__iter__"):
        return False
    if any(getattr(dt, "kind", "O") not in "biuf" or dt.name == "category" for dt in dtypes):
        return True
    return bool(X.isna().to_numpy().any())


def _unused_name(X: Any) -> str:
    """A column name for the target that is not one of X's."""
    name, taken = "target", {str(c) for c in X.columns}
    while name in taken:
        name = "_" + name
    return name
