import os

import numpy as np
import pandas as pd
import pytest
import torch

import gpscale
from gpscale import api
from gpscale.kernels import RBF, Scale
from gpscale.models import ExactGP


def _data(n=40, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, d)) * np.array([1.0, 200.0])[:d] + np.array([0.0, 1e3])[:d]
    f = np.sin(X[:, 0]) + (X[:, 1] - 1e3) / 200 if d > 1 else np.sin(X[:, 0])
    return X, 50.0 + 4.0 * f + 0.05 * rng.standard_normal(n)


@pytest.fixture(scope="module")
def fitted():
    X, y = _data()
    return X, y, gpscale.fit(X, y, max_iter=40)


def test_fit_predict_round_trip(fitted):
    X, y, pred = fitted
    assert isinstance(pred, api.Predictor) and pred.method == "exact"
    assert pred.kernel_name == pred.kernel_choice.kernel and pred.n_features == 2
    assert isinstance(pred.result, gpscale.FitResult) and pred.result.n_evals > 0
    mean, std = pred.predict(X, return_std=True)
    assert mean.shape == std.shape == (40,) and isinstance(mean, np.ndarray)
    assert np.sqrt(np.mean((mean - y) ** 2)) < 0.2 * y.std()
    latent = pred.predict(X, return_std=True, include_noise=False)[1]
    assert (latent < std).all() and (latent >= 0).all()
    # lists, tensors and data frames are accepted too
    np.testing.assert_allclose(pred.predict(X[:3].tolist()), mean[:3])
    np.testing.assert_allclose(pred.predict(torch.tensor(X[:3])), mean[:3])
    assert "kernel.base.lengthscale" in pred.summary() and "exact" in pred.summary()


def test_standardize_off_on_prescaled_data_matches_standardize_on():
    X, y = _data()
    on = gpscale.fit(X, y, kernel="rbf-ard", max_iter=40)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    off = gpscale.fit(Xs, ys, kernel="rbf-ard", standardize=False, max_iter=40)
    assert not off.standardize and np.allclose(off.scaler.x_scale, 1.0)
    Xt = X[:10] + 0.3
    m_on, s_on = on.predict(Xt, return_std=True)
    m_off, s_off = off.predict((Xt - X.mean(0)) / X.std(0), return_std=True)
    np.testing.assert_allclose(m_on, m_off * y.std() + y.mean(), rtol=1e-6)
    np.testing.assert_allclose(s_on, s_off * y.std(), rtol=1e-5)


def test_standardized_predictions_are_invariant_to_affine_rescaling():
    X, y = _data()
    a = gpscale.fit(X, y, kernel="rbf-ard", max_iter=40)
    b = gpscale.fit(X * [1e-3, 10.0] - 7.0, 1e4 * y + 3.0, kernel="rbf-ard", max_iter=40)
    Xt = X[:8] * 0.9
    m_a, s_a = a.predict(Xt, return_std=True)
    m_b, s_b = b.predict(Xt * [1e-3, 10.0] - 7.0, return_std=True)
    np.testing.assert_allclose(m_b, 1e4 * m_a + 3.0, rtol=1e-6)
    np.testing.assert_allclose(s_b, 1e4 * s_a, rtol=1e-4)


def test_raw_unscaled_data_needs_standardization():
    X, y = _data()
    pred = gpscale.fit(X, y, max_iter=40)  # column 2 ~ 1000 ± 600, y ~ 50
    assert np.sqrt(np.mean((pred.predict(X) - y) ** 2)) < 1.0


@pytest.mark.parametrize("kernel, d, opts", [("rbf-ard", 2, {}), ("co2", 1, {}),
                                             ("se+lp", 1, {"mean": "constant"}),
                                             ("matern32-ard", 2, {"restarts": 1, "seed": 3})])
def test_save_load_identical_predictions(tmp_path, kernel, d, opts):
    X, y = _data(n=30, d=d)
    pred = gpscale.fit(X, y, kernel=kernel, max_iter=15, **opts)
    path = pred.save(tmp_path / "model.pt")
    back = gpscale.load(path)
    m0, s0 = pred.predict(X, return_std=True)
    m1, s1 = back.predict(X, return_std=True)
    np.testing.assert_array_equal(m0, m1)
    np.testing.assert_array_equal(s0, s1)
    assert back.kernel_name == kernel and back.method == "exact"
    assert back.result == pred.result
    assert back.model.mean_kind == pred.model.mean_kind
    assert back.summary() == pred.summary()


def test_saved_file_loads_with_weights_only(fitted, tmp_path):
    _, _, pred = fitted
    pred.save(tmp_path / "m.pt")
    saved = torch.load(tmp_path / "m.pt", weights_only=True)
    assert saved["format_version"] == api.FORMAT_VERSION
    assert saved["model_class"] == "ExactGP" and saved["method"] == "exact"
    assert saved["kernel_config"] == pred.model.kernel.config()
    assert set(saved["state_dict"]) == set(pred.model.state_dict())
    assert saved["scaler"] == pred.scaler.state()
    assert saved["result"]["objective"] == pred.result.objective


def test_failed_save_leaves_no_file(fitted, tmp_path, monkeypatch):
    _, _, pred = fitted

    def broken_save(obj, f):  # f: a path, or the buffer save() fills before writing
        if hasattr(f, "write"):
            f.write(b"partial")
        else:
            with open(f, "wb") as fh:
                fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        pred.save(tmp_path / "m.pt")
    assert os.listdir(tmp_path) == []
    # an existing file is left as it was
    (tmp_path / "m.pt").write_bytes(b"old")
    with pytest.raises(OSError):
        pred.save(tmp_path / "m.pt")
    assert os.listdir(tmp_path) == ["m.pt"] and (tmp_path / "m.pt").read_bytes() == b"old"


def test_save_into_missing_directory(fitted, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        fitted[2].save(tmp_path / "nope" / "m.pt")
    assert not (tmp_path / "nope").exists()


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        gpscale.load(tmp_path / "missing.pt")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a gpscale model"):
        gpscale.load(tmp_path / "x.csv")
    torch.save({"format": "gpscale-model", "format_version": 99}, tmp_path / "new.pt")
    with pytest.raises(ValueError, match="upgrade gpscale"):
        gpscale.load(tmp_path / "new.pt")


@pytest.mark.parametrize("X, y, message", [
    ([[0.0], [np.nan], [1.0]], [1.0, 2.0, 3.0], "NaN/inf"),
    ([[0.0], [1.0], [2.0]], [1.0, np.inf, 3.0], "NaN/inf"),
    ([[0.0], [1.0], [2.0]], [1.0, 2.0], "rows but y has"),
    ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], "1-D"),
    (np.zeros((0, 2)), np.zeros(0), "empty"),
    ([[0.0], [1.0], [2.0]], [5.0, 5.0, 5.0], "constant"),
    ([[0.0]], [1.0], "1 sample"),
    ([["a"], ["b"]], [1.0, 2.0], "numeric"),
])
def test_bad_data(X, y, message):
    with pytest.raises(ValueError, match=message):
        gpscale.fit(X, y, max_iter=2)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "nope"}, r"unknown method 'nope'; choose one of \[.*'exact'"),
    ({"kernel": "nope"}, "unknown kernel"),
    ({"kernel": 3}, "kernel must be"),
    ({"noise": 0.0}, "noise must be a positive"),
    ({"noise": -1}, "noise must be a positive"),
    ({"max_iter": 0}, "max_iter"),
    ({"restarts": -1}, "restarts"),
    ({"bogus": 1}, r"does not take option\(s\) \['bogus'\]"),
    ({"dtype": "int64"}, "dtype"),
])
def test_bad_arguments(kwargs, message):
    X, y = _data(n=10)
    with pytest.raises(ValueError, match=message):
        gpscale.fit(X, y, **kwargs)


def test_constant_y_allowed_without_standardization():
    X = np.linspace(0, 1, 8)[:, None]
    pred = gpscale.fit(X, np.full(8, 2.0), standardize=False, max_iter=5)
    assert np.isfinite(pred.predict(X)).all()


def test_kernel_object_is_copied_not_trained_in_place():
    X, y = _data(n=20)
    k = Scale(RBF(1.0, ard_dims=2))
    pred = gpscale.fit(X, y, kernel=k, max_iter=10)
    assert k.outputscale.item() == pytest.approx(1.0)
    assert pred.model.kernel is not k and pred.kernel_name == "Scale"


def test_data_frame_columns_are_remembered_and_checked(tmp_path):
    X, y = _data(n=25)
    df = pd.DataFrame(X, columns=["u", "v"])
    pred = gpscale.fit(df, pd.Series(y, name="target"), max_iter=10)
    assert pred.feature_names == ["u", "v"] and pred.target_name == "target"
    ref = pred.predict(X)
    np.testing.assert_allclose(pred.predict(df[["v", "u"]]), ref)  # reordered by name
    with pytest.raises(ValueError, match=r"missing \['v'\]"):
        pred.predict(df.rename(columns={"v": "w"}))
    back = gpscale.load(pred.save(tmp_path / "m.pt"))
    assert back.feature_names == ["u", "v"] and back.target_name == "target"


def test_register_a_method_and_a_model_class(tmp_path):
    """A new method is one registration; a model class that honours the GPModel contract
    (here inherited from ExactGP) saves and loads with no hook, and a model that does not
    is refused at save time with a message naming the contract."""

    class FixedNoiseGP(ExactGP):
        pass

    class PlainModule(torch.nn.Module):
        def predict(self, X, include_noise=False):
            return torch.zeros(X.shape[0]), torch.ones(X.shape[0])

    def fit_fixed(X, y, kernel, noise=0.01, max_iter=20):
        model = FixedNoiseGP(kernel, X, y, noise=noise)
        model.raw_noise.requires_grad_(False)
        return model, gpscale.fit_lbfgs(model, max_iter=max_iter, method="fixed-noise")

    def fit_plain(X, y, kernel):
        return PlainModule(), gpscale.FitResult(method="plain", theta={}, objective=0.0)

    X, y = _data(n=20)
    api.register_method("fixed-noise", fit_fixed, "exact GP with a fixed noise")
    api.register_method("plain", fit_plain, "not a GPModel")
    try:
        with pytest.raises(ValueError, match="already registered"):
            api.register_method("fixed-noise", fit_fixed)
        assert api.METHODS["fixed-noise"].options == ("noise", "max_iter")
        pred = gpscale.fit(X, y, method="fixed-noise", noise=0.02)
        assert float(pred.model.noise) == pytest.approx(0.02)
        back = gpscale.load(pred.save(tmp_path / "m.pt"))
        assert type(back.model) is FixedNoiseGP and back.method == "fixed-noise"
        np.testing.assert_array_equal(back.predict(X), pred.predict(X))
        plain = gpscale.fit(X, y, method="plain")
        with pytest.raises(ValueError, match="GPModel contract"):
            plain.save(tmp_path / "plain.pt")
        assert not (tmp_path / "plain.pt").exists()
    finally:
        api.METHODS.pop("fixed-noise", None)
        api.METHODS.pop("plain", None)
