"""gpscale.fit makes its plan once: a named method's before any row is read (its request
needs no data), auto's once the data's size is known."""

from __future__ import annotations

import numpy as np
import pytest

import gpscale
import gpscale.api as api
from gpscale.plan import PlanError


def _data(n: int = 40, d: int = 2):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


def _count_plans(monkeypatch) -> list[str]:
    made: list[str] = []
    real = api.make_plan

    def counting(data, method, *args, **kwargs):
        made.append(method)
        return real(data, method, *args, **kwargs)

    monkeypatch.setattr(api, "make_plan", counting)
    return made


@pytest.mark.parametrize("method", ["exact", "sgpr", "auto"])
def test_one_plan_per_fit(monkeypatch, method):
    made = _count_plans(monkeypatch)
    X, y = _data()
    gpscale.fit(X, y, method=method, kernel="rbf-ard")
    assert made == [method]


@pytest.fixture
def no_rows(monkeypatch):
    """Reading the rows fails the test: what is refused must be refused before."""
    def read(*args, **kwargs):
        raise AssertionError("rows were read before the request was checked")

    monkeypatch.setattr(api, "training_data", read)


def test_a_named_methods_request_is_refused_before_any_row_is_read(no_rows):
    X, y = _data()
    with pytest.raises(PlanError, match="unknown method"):
        gpscale.fit(X, y, method="no-such-method")
    with pytest.raises(PlanError, match="budget"):
        gpscale.fit(X, y, method="exact", budget=10.0)
    with pytest.raises(PlanError, match="max_iter"):
        gpscale.fit(X, y, method="exact", max_iter=-1)


def test_the_size_check_still_runs_once_the_columns_are_known():
    X, y = _data()
    with pytest.raises(PlanError, match=r"num_features=100000000000 needs about"):
        gpscale.fit(X, y, method="rff", num_features=10**11)


def test_an_admm_setting_is_checked_over_its_preset_before_any_row_is_read(no_rows):
    X, y = _data()
    with pytest.raises(PlanError, match="rho"):
        gpscale.fit(X, y, method="admm-kfold", rho=-1.0)
