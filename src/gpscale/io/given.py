"""What a user hands :func:`gpscale.fit`, made into one :class:`TrainingData`: a
:class:`~gpscale.io.Source` of rows, plus the (X, y) pair itself when it came in memory
(so that every row can be used as given, without a copy through the source) and the
column names the predictor will match new data by.

This module is the one place that looks at what type the training data are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .source import Source, open_source

__all__ = ["TrainingData", "training_data", "column_names", "plain_label", "writable"]


class TrainingData:
    """The rows to train on. ``pair``: (X, y) as given when they came in memory (then
    ``source`` is opened from them only if a method reads partitions), else None;
    ``feature_names`` / ``target_name``: what the predictor will know the columns by."""

    def __init__(self, source: Source | None, pair: tuple[Any, Any] | None,
                 feature_names: list[Any] | None, target_name: Any) -> None:
        self._source, self.pair = source, pair
        self.feature_names, self.target_name = feature_names, target_name

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = open_source(self.pair)
        return self._source

    @property
    def num_features(self) -> int:
        if self.pair is None:
            return self.source.num_features
        shape = np.shape(self.pair[0])
        return int(shape[1]) if len(shape) == 2 else 1

    def num_rows(self) -> int:
        return self.source.num_rows() if self.pair is None else len(self.pair[0])

    def distinct_inputs(self) -> int | None:
        """How many distinct input rows the arrays in memory hold: the rows the exact GP
        keeps once it merges copies of one input (:mod:`gpscale.models.copies`). None
        for a source (counting would cost a pass) and inputs that are not numbers."""
        if self.pair is None:
            return None
        X = self.pair[0]
        if isinstance(X, torch.Tensor):
            X = X.detach().cpu()
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            return None
        X = X[:, None] if X.ndim == 1 else X
        if X.ndim != 2 or not len(X):
            return None
        return int(len(np.unique(X, axis=0)))

    @property
    def has_target(self) -> bool:
        return self.pair is not None or self.source.has_target

    @property
    def description(self) -> str:
        return "the input arrays" if self.pair is not None else self.source.description

    @property
    def inputs(self) -> Any:
        """How the inputs were made from a string column, or None."""
        return None if self.pair is not None else self.source.inputs


def training_data(X: Any, y: Any = None, target: str | None = None, *,
                  columns: Sequence[str] | None = None, exclude: Sequence[str] = (),
                  categorical: Sequence[str] = (), date_features: Any = "days",
                  client: Any = None) -> TrainingData:
    """The rows of ``X`` and ``y`` (arrays, tensors, pandas objects in memory), or of
    ``X`` alone (a :class:`Source`, paths, a data frame, a dask collection) with
    ``target`` naming its target column and ``columns``, ``exclude``, ``categorical``,
    ``date_features`` choosing and reading its inputs (:func:`gpscale.io.open_source`;
    its survey pass on ``client``'s workers when given)."""
    named = (columns is not None or bool(exclude) or bool(categorical)
             or date_features != "days")
    if isinstance(X, Source):
        if y is not None or target is not None or named:
            raise ValueError("a Source carries its own target and columns: pass it alone "
                             "(no y, target=, columns=, exclude=, categorical=, "
                             "date_features=)")
        return TrainingData(X, None, X.feature_names, X.target_name)
    if y is None:
        source = open_source(X, target=target, columns=columns, exclude=exclude,
                             categorical=categorical, date_features=date_features,
                             client=client)
        return TrainingData(source, None, source.feature_names, source.target_name)
    if target is not None or named:
        raise ValueError("target=, columns=, exclude=, categorical= and date_features= "
                         "are for a file or data frame given as X alone; with X and y in "
                         "memory leave them out")
    return TrainingData(None, (writable(X), writable(y)), column_names(X), _series_name(y))


def column_names(obj: Any) -> list[Any] | None:
    """A data frame's column names (text, integers, any plain label), or None for data
    without named columns (arrays, tensors). Predictions match columns by these names;
    ValueError when two columns share a name."""
    cols = getattr(obj, "columns", None)
    if cols is None or isinstance(obj, (np.ndarray, torch.Tensor)):
        return None
    names = [plain_label(c) for c in cols]
    if not names:
        return None
    dupes = sorted({repr(c) for c in names if names.count(c) > 1})
    if dupes:
        raise ValueError(f"the columns of X must have distinct names to be matched by name "
                         f"(repeated: {', '.join(dupes)}); rename them or pass a plain array")
    return names


def plain_label(name: Any) -> Any:
    """A column name as a plain value that a model file can hold (numpy scalars become
    Python ones; labels other than text, numbers and tuples of them become their text)."""
    if isinstance(name, np.generic):
        name = name.item()
    if isinstance(name, tuple):
        return tuple(plain_label(c) for c in name)
    return name if isinstance(name, (str, int, float, bool)) else str(name)


def writable(a: Any) -> Any:
    """Array-likes as writable float arrays: torch cannot wrap read-only memory."""
    try:
        arr = a if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return a  # as_matrix / as_vector say what is wrong with it
    return arr if isinstance(arr, torch.Tensor) or arr.flags.writeable else arr.copy()


def _series_name(obj: Any) -> Any:
    """A pandas Series' name (text or another plain label), else None."""
    name = getattr(obj, "name", None) if hasattr(obj, "to_numpy") else None
    return None if name is None else plain_label(name)
