"""Fuzz (hypothesis) over column scales from 1e-300 to 1e300, X columns and y scaled
independently, through gpscale.fit / predict: finite predictions or a clear ValueError,
never NaN or inf."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpscale

OPTIONS = {"exact": {"max_iter": 5}, "rff": {"max_iter": 5, "num_features": 16}}
exponents = st.integers(min_value=-300, max_value=300)


def _base(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.standard_normal(n)


@pytest.mark.parametrize("method", sorted(OPTIONS))
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ex=st.tuples(exponents, exponents), ey=exponents,
       signs=st.tuples(st.sampled_from([-1.0, 1.0]), st.sampled_from([-1.0, 1.0])),
       offset=st.sampled_from([0.0, 1.0, 1e3]))
def test_any_column_scale_gives_finite_predictions_or_a_value_error(method, ex, ey, signs,
                                                                    offset):
    X, y = _base(40, 0)
    Xt, _ = _base(15, 1)
    sx = np.array([s * 10.0 ** e for s, e in zip(signs, ex)])
    sy = 10.0 ** ey
    Xs, Xts, ys = (X + offset) * sx, (Xt + offset) * sx, (y + offset) * sy
    assert np.isfinite(Xs).all() and np.isfinite(ys).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pred = gpscale.fit(Xs, ys, method=method, **OPTIONS[method])
        except ValueError as err:
            assert str(err), "a ValueError must say what is wrong"
            return
        mean, std = pred.predict(Xts, return_std=True)
    assert np.isfinite(mean).all(), (ex, ey, mean)
    assert np.isfinite(std).all() and np.all(std >= 0), (ex, ey, std)
    # the predictions are in y's units: within the range the data spans, give or take
    lo, hi = ys.min(), ys.max()
    span = hi - lo
    assert np.all(mean >= lo - 2 * span) and np.all(mean <= hi + 2 * span), (ex, ey)
