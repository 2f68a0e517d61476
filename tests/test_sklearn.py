import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import gpscale
from gpscale import load
from gpscale.sklearn import GPRegressor

# Every sklearn check passes; this list stays empty unless a check cannot apply to a GP.
EXPECTED_FAILED: dict[str, str] = {}


def _expected_failed(estimator) -> dict[str, str]:
    return EXPECTED_FAILED


@parametrize_with_checks([GPRegressor(max_iter=5)], expected_failed_checks=_expected_failed)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 2)) * [1.0, 50.0]
    y = np.sin(X[:, 0]) + X[:, 1] / 50 + 0.05 * rng.standard_normal(n) + 20.0
    return X, y


def test_fit_predict_std_and_score():
    X, y = _data()
    est = GPRegressor(max_iter=50).fit(X, y)
    assert est.n_features_in_ == 2
    mean, std = est.predict(X, return_std=True)
    assert mean.shape == std.shape == (40,)
    assert (std > 0).all()
    assert est.score(X, y) > 0.95


def test_params_roundtrip_and_clone():
    est = GPRegressor(kernel="matern52-ard", max_iter=7, options={"mean": "constant"})
    params = est.get_params()
    assert params["kernel"] == "matern52-ard" and params["options"] == {"mean": "constant"}
    est.set_params(max_iter=3, noise=0.5)
    assert clone(est).get_params()["noise"] == 0.5


def test_options_reach_the_method_and_predictor_saves(tmp_path):
    X, y = _data()
    est = GPRegressor(max_iter=20, options={"mean": "constant"}).fit(X, y)
    assert est.predictor_.model.mean_kind == "constant"
    est.predictor_.save(tmp_path / "m.pt")
    np.testing.assert_allclose(load(tmp_path / "m.pt").predict(X), est.predict(X))


@pytest.mark.parametrize("bad, message", [
    ({"noise": -1.0}, "noise"),
    ({"method": "nope"}, "unknown method"),
    ({"kernel": "nope"}, "unknown kernel"),
    ({"options": {"bogus": 1}}, "bogus"),
])
def test_bad_parameters_raise_at_fit(bad, message):
    X, y = _data()
    est = GPRegressor(max_iter=3, **bad)  # no validation in __init__ (sklearn convention)
    with pytest.raises(ValueError, match=message):
        est.fit(X, y)


def test_works_in_model_selection():
    X, y = _data(n=30)
    scores = cross_val_score(GPRegressor(max_iter=20), X, y, cv=3)
    assert np.all(np.isfinite(scores))


@pytest.mark.parametrize("method", sorted(gpscale.METHODS))
def test_every_method_through_a_pipeline_and_cross_validation(method, cheap_options):
    """The estimator passes only the options given (None leaves the method's default),
    so every registered method fits inside a Pipeline under cross_val_score."""
    X, y = _data(n=60)
    est = make_pipeline(StandardScaler(), GPRegressor(method=method,
                                                      options=cheap_options[method]))
    scores = cross_val_score(est, X, y, cv=3, error_score="raise")
    assert np.all(np.isfinite(scores))


def test_an_option_the_method_does_not_take_is_refused_not_dropped():
    X, y = _data()
    with pytest.raises(ValueError, match="does not take"):
        GPRegressor(method="svgp", max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match="does not take"):
        GPRegressor(method="rff", restarts=2).fit(X, y)
