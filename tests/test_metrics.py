import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from gpscale.metrics import mse, msll, nlml_per_point, nlpd, rmse, smse, snlp

Y = np.array([1.0, 2.0, 3.0])
M = np.array([1.0, 2.0, 5.0])  # errors 0, 0, 2 -> MSE 4/3


def test_rmse_and_mse_hand_computed():
    assert mse(Y, M) == pytest.approx(4 / 3, rel=1e-15)
    assert rmse(Y, M) == pytest.approx(math.sqrt(4 / 3), rel=1e-15)
    assert rmse(Y, Y) == 0.0


def test_smse_test_variance_and_training_mean():
    # var(Y) (ddof=0) = 2/3, so SMSE = (4/3) / (2/3) = 2
    assert smse(Y, M) == pytest.approx(2.0, rel=1e-14)
    # training mean 0: denominator (1 + 4 + 9) / 3 = 14/3
    assert smse(Y, M, y_train=[-1.0, 1.0]) == pytest.approx(2 / 7, rel=1e-14)
    # predicting the test mean scores exactly 1
    assert smse(Y, np.full(3, Y.mean())) == pytest.approx(1.0, rel=1e-14)


def test_nlpd_matches_scipy():
    rng = np.random.default_rng(0)
    y, m = rng.normal(size=50), rng.normal(size=50)
    v = rng.uniform(0.1, 2.0, size=50)
    ref = -np.mean(norm.logpdf(y, loc=m, scale=np.sqrt(v)))
    assert nlpd(y, m, v) == pytest.approx(ref, rel=1e-13)
    # a scalar variance applies to every point
    assert nlpd(y, m, 0.5) == pytest.approx(-np.mean(norm.logpdf(y, m, math.sqrt(0.5))),
                                            rel=1e-13)


def test_nlpd_hand_computed_single_point():
    # y = m, var = 1: ½ log(2π)
    assert nlpd([0.0], [0.0], [1.0]) == pytest.approx(0.5 * math.log(2 * math.pi), rel=1e-15)


def test_snlp_is_msll_against_scipy():
    rng = np.random.default_rng(1)
    y_train = rng.normal(2.0, 3.0, size=40)
    y, m = rng.normal(2.0, 3.0, size=30), rng.normal(2.0, 3.0, size=30)
    v = rng.uniform(0.5, 4.0, size=30)
    trivial = -norm.logpdf(y, loc=y_train.mean(), scale=y_train.std())
    ref = np.mean(-norm.logpdf(y, m, np.sqrt(v)) - trivial)
    assert snlp(y, m, v, y_train) == pytest.approx(ref, rel=1e-12)
    assert msll is snlp
    # the trivial model itself scores exactly 0
    assert snlp(y, np.full(30, y_train.mean()), y_train.var(), y_train) == pytest.approx(
        0.0, abs=1e-14)


def test_torch_inputs_columns_and_python_floats():
    yt = torch.tensor(Y, requires_grad=True).reshape(-1, 1)
    mt = torch.tensor(M)
    out = rmse(yt, mt)
    assert type(out) is float and out == pytest.approx(math.sqrt(4 / 3))
    assert type(nlpd(yt, mt, torch.ones(3))) is float
    assert type(smse(list(Y), list(M))) is float


def test_nlml_per_point():
    assert nlml_per_point(10.0, 4) == 2.5
    assert nlml_per_point(torch.tensor(9.0, requires_grad=True), 3) == 3.0
    assert type(nlml_per_point(np.float64(1.0), 2)) is float
    with pytest.raises(ValueError, match="n must be"):
        nlml_per_point(1.0, 0)
    with pytest.raises(ValueError, match="nlml is nan"):
        nlml_per_point(float("nan"), 3)
    with pytest.raises(ValueError, match="scalar"):
        nlml_per_point(torch.ones(2), 3)


def test_shape_mismatch_names_arguments():
    with pytest.raises(ValueError, match="y has 3 values but mean has 2"):
        rmse(Y, M[:2])
    with pytest.raises(ValueError, match="var has 2 values but y has 3"):
        nlpd(Y, M, [1.0, 1.0])
    with pytest.raises(ValueError, match=r"mean must be 1-D"):
        rmse(Y, np.ones((3, 2)))


def test_nonpositive_variance_rejected():
    with pytest.raises(ValueError, match="var must be > 0"):
        nlpd(Y, M, [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="var must be > 0"):
        snlp(Y, M, -1.0, [0.0, 1.0])


def test_bad_values_rejected():
    with pytest.raises(ValueError, match="y contains 1 NaN/inf"):
        rmse([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="empty"):
        rmse([], [])
    with pytest.raises(ValueError, match="numeric"):
        rmse(["a"], [1.0])
    with pytest.raises(ValueError, match="y_train needs at least two distinct"):
        snlp(Y, M, 1.0, [1.0, 1.0])
    with pytest.raises(ValueError, match="cannot be standardised"):
        smse([2.0, 2.0], [1.0, 1.0])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.floats(1e-3, 1e3)),
                min_size=1, max_size=20))
def test_nlpd_property_matches_scipy(rows):
    y, m, v = (np.array(c) for c in zip(*rows))
    ref = -np.mean(norm.logpdf(y, m, np.sqrt(v)))
    assert nlpd(y, m, v) == pytest.approx(ref, rel=1e-10, abs=1e-10)
