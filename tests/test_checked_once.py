"""From ``gpscale.fit(X, y)`` to the model, X is checked once over its rows and converted
once (its standardisation): a checked tensor is marked and taken as it is by every later
check, until it is modified in place (issue 60)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import gpscale
import gpscale.validation as validation
from gpscale.preprocessing import Standardizer
from gpscale.validation import as_matrix, as_vector, check_xy, mark_checked

N, D = 120, 3


@pytest.fixture
def traced(monkeypatch):
    """The rows of X checked over their values (where), and the standardised X made."""
    seen = {"checked": [], "standardised": []}
    check, transform = validation._check_finite, Standardizer.transform_x

    def counting_check(T, name):
        if name == "X" and tuple(T.shape) == (N, D):
            seen["checked"].append(T.data_ptr())
        return check(T, name)

    def recording_transform(self, X):
        out = transform(self, X)
        if out.shape == (N, D):
            seen["standardised"].append(out.ctypes.data)
        return out

    monkeypatch.setattr(validation, "_check_finite", counting_check)
    monkeypatch.setattr(Standardizer, "transform_x", recording_transform)
    return seen


@pytest.mark.parametrize("kw", [{"method": "exact", "kernel": "rbf-ard"},
                                {"method": "exact"},  # five kernel families fitted
                                {"method": "sgpr", "kernel": "rbf-ard"}])
def test_fit_checks_x_once_and_converts_it_once(traced, kw):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = gpscale.fit(X, y, max_iter=3, **kw)
    # one pass over the user's rows, in place (no copy before it) ...
    assert traced["checked"] == [X.ctypes.data]
    # ... and one conversion, the standardisation, whose result the fit holds
    assert len(traced["standardised"]) == 1
    if kw["method"] == "exact":
        assert p.model.X.data_ptr() == traced["standardised"][0]


def test_a_checked_tensor_is_taken_as_it_is():
    T = as_matrix(np.ones((4, 2)))
    assert as_matrix(T) is T
    y = as_vector(np.ones(4))
    assert check_xy(T, y) == (T, y)
    assert as_matrix(T, dtype=torch.float32) is not T  # another dtype: converted, checked


def test_a_checked_tensor_changed_in_place_is_checked_again():
    T = mark_checked(torch.ones(4, 2, dtype=torch.float64))
    T[1, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        as_matrix(T)
    y = mark_checked(torch.ones(4, dtype=torch.float64))
    y[0] = float("inf")
    with pytest.raises(ValueError, match="NaN/inf"):
        as_vector(y)


def test_a_tensor_that_requires_grad_is_not_taken_as_checked():
    T = mark_checked(torch.ones(4, 2, dtype=torch.float64))
    T.requires_grad_(True)
    out = as_matrix(T)
    assert out is not T and not out.requires_grad
