"""Every registered method end to end: fit on raw data, predict, save, load."""

import numpy as np
import pytest

import gpscale

METHODS = ["exact", "rff", "grief-ii", "admm-hocv", "admm-kfold", "admm-consensus"]


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, 2)) * [1.0, 100.0]  # unscaled columns
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n) + 50.0
    return X, y


@pytest.mark.parametrize("method", METHODS)
def test_method_fits_predicts_and_round_trips(method, tmp_path):
    X, y = _data()
    pred = gpscale.fit(X, y, method=method, max_iter=25)
    assert pred.method == method and pred.result.method == method
    mean, std = pred.predict(X[:40], return_std=True)
    rmse = float(np.sqrt(np.mean((mean - y[:40]) ** 2)))
    assert rmse < 0.2, rmse  # noise std 0.1; y's std is about 0.7
    assert np.all(std > 0)
    loaded = gpscale.load(pred.save(tmp_path / "model.pt"))
    m2, s2 = loaded.predict(X[:40], return_std=True)
    np.testing.assert_allclose(m2, mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s2, std, rtol=1e-10, atol=1e-10)


def test_feature_methods_need_a_spectral_kernel():
    X, y = _data(40)
    for method in ("rff", "grief-ii"):
        with pytest.raises(ValueError, match="RBF or Matérn"):
            gpscale.fit(X, y, method=method, kernel="periodic")


def test_rff_matern_and_options():
    X, y = _data(80)
    pred = gpscale.fit(X, y, method="rff", kernel="matern52-ard", num_features=64, max_iter=10)
    assert pred.model.features.kernel == "matern52"
    assert pred.model.features.num_features == 64
    with pytest.raises(ValueError, match="does not take"):
        gpscale.fit(X, y, method="rff", restarts=2)


def test_grief_i_method_mixture_predicts_and_round_trips(tmp_path):
    X, y = _data()
    pred = gpscale.fit(X, y, method="grief-i", num_features=40, n_iter=600, burn=200, thin=10)
    assert pred.method == "grief-i" and pred.model.num_samples == 40
    diag = pred.result.history[-1]
    assert 0.0 < diag["acceptance_rate"] <= 1.0 and diag["ess_min"] > 0
    mean, std = pred.predict(X[:40], return_std=True)
    assert float(np.sqrt(np.mean((mean - y[:40]) ** 2))) < 0.2
    assert np.all(std > 0)
    assert "GRIEF-I posterior: 40 draws" in pred.summary()
    loaded = gpscale.load(pred.save(tmp_path / "model.pt"))
    m2, s2 = loaded.predict(X[:40], return_std=True)
    np.testing.assert_allclose(m2, mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s2, std, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="burn"):
        gpscale.fit(X, y, method="grief-i", n_iter=100, burn=100)
    with pytest.raises(ValueError, match="RBF or Matérn"):
        gpscale.fit(X, y, method="grief-i", kernel="periodic")


@pytest.mark.parametrize("method,options", [
    ("grief-ii", {"max_iter": 10}), ("grief-i", {"num_features": 40, "n_iter": 300,
                                                  "burn": 100, "thin": 10,
                                                  "fill_grid": False})])
def test_grief_quantile_grid_reaches_the_features_and_round_trips(method, options, tmp_path):
    """grid="quantile" on a column that is 0 on 70 % of the rows: the merged quantile
    grid is smaller than the uniform one, and a saved model rebuilds the same grid."""
    X, y = _data()
    X[: int(0.7 * len(X)), 1] = 0.0
    pred = gpscale.fit(X, y, method=method, grid="quantile", **options)
    f = pred.model.features
    assert f.grid_kind == "quantile" and f.grid_sizes[1] < 10 == f.grid_sizes[0]
    mean, std = pred.predict(X[:40], return_std=True)
    loaded = gpscale.load(pred.save(tmp_path / "model.pt"))
    assert loaded.model.features.grid_sizes == f.grid_sizes
    m2, s2 = loaded.predict(X[:40], return_std=True)
    np.testing.assert_allclose(m2, mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s2, std, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="grid"):
        gpscale.fit(X, y, method=method, grid="kmeans", **options)


@pytest.mark.parametrize("method,options", [
    ("grief-ii", {"max_iter": 3, "num_features": 20}),
    ("grief-i", {"num_features": 20, "n_iter": 40, "burn": 10, "thin": 10,
                 "fill_grid": False})])
def test_grief_methods_place_the_grid_at_quantiles_unless_told_otherwise(method, options):
    """The methods' default grid is "quantile" (uci-large: never worse than the evenly
    spaced one by more than 0.2 %, better on heavy-tailed columns); "uniform" on request."""
    X, y = _data()
    X[: int(0.7 * len(X)), 1] = 0.0
    default = gpscale.fit(X, y, method=method, **options).model.features
    even = gpscale.fit(X, y, method=method, grid="uniform", **options).model.features
    assert default.grid_kind == "quantile" and default.grid_sizes[1] < 10
    assert even.grid_kind == "uniform" and even.grid_sizes == [10, 10]
