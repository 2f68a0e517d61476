"""dtype= and device= through gpscale.fit / predict / load for every method that takes
them (issue 22, case 9)."""

import warnings

import numpy as np
import pytest
import torch
from conftest import CHEAP_OPTIONS

import gpscale
from gpscale.methods.options import option_defaults
from gpscale.validation import check_device

DTYPE_METHODS = sorted(n for n, m in gpscale.METHODS.items() if "dtype" in option_defaults(m))
DEVICE_METHODS = sorted(n for n, m in gpscale.METHODS.items()
                        if "device" in option_defaults(m))
#: a device name that no machine running these tests has
NO_CUDA = ["gpu", 3, "cuda:99", "tpu:0"] + ([] if torch.cuda.is_available() else ["cuda"])


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


def test_the_main_methods_take_dtype():
    assert {"exact", "rff", "svgp", "cholqr-vfe", "cholqr-dtc"} <= set(DTYPE_METHODS)


@pytest.mark.parametrize("method", DTYPE_METHODS)
def test_float32_fit_predicts_in_float32(method, tmp_path):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = gpscale.fit(X, y, method=method, dtype="float32", **CHEAP_OPTIONS[method])
    dtypes = {t.dtype for t in [*model.model.parameters(), *model.model.buffers()]
              if t.is_floating_point()}
    assert dtypes == {torch.float32}
    mean, std = model.predict(X[:10], return_std=True)  # float64 numpy inputs, converted
    assert mean.dtype == np.float64 and np.isfinite(mean).all() and (std > 0).all()
    assert np.sqrt(np.mean((model.predict(X) - y) ** 2)) < y.std()
    model.save(tmp_path / "m.pt")
    again = gpscale.load(tmp_path / "m.pt")
    np.testing.assert_array_equal(again.predict(X[:10]), mean)


def test_dtype_is_checked():
    X, y = _data()
    with pytest.raises(ValueError, match="floating torch dtype"):
        gpscale.fit(X, y, dtype="int32")


@pytest.mark.parametrize("method", DEVICE_METHODS)
@pytest.mark.parametrize("device", NO_CUDA)
def test_bad_device_is_a_value_error_before_any_work(method, device):
    X, y = _data()
    X[0, 0] = np.nan  # the data would be refused too: the device is checked first
    with pytest.raises(ValueError, match=r"device .*accepted here: 'cpu'"):
        gpscale.fit(X, y, method=method, device=device, **CHEAP_OPTIONS[method])


@pytest.mark.parametrize("method", ["exact", "rff", "svgp", "cholqr-vfe"])
def test_cpu_device_by_name_or_object(method):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dev in ("cpu", torch.device("cpu")):
            model = gpscale.fit(X, y, method=method, device=dev, **CHEAP_OPTIONS[method])
            assert np.isfinite(model.predict(X[:5])).all()


def test_check_device_and_load_device(tmp_path):
    assert check_device(None) is None
    assert check_device(" cpu ") == torch.device("cpu")
    X, y = _data()
    gpscale.fit(X, y, max_iter=3).save(tmp_path / "m.pt")
    with pytest.raises(ValueError, match="accepted here"):
        gpscale.load(tmp_path / "m.pt", device="gpu")
    assert gpscale.load(tmp_path / "m.pt", device="cpu").predict(X[:2]).shape == (2,)
