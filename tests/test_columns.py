"""Predictions match a data frame's columns by name whenever the model was trained on
named columns (text or integer names), and by position for plain arrays."""

import numpy as np
import pandas as pd
import pytest

import gpscale


@pytest.fixture(scope="module")
def int_named():
    r = np.random.default_rng(0)
    X = r.uniform(-2, 2, (80, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * r.standard_normal(80)
    df = pd.DataFrame(X, columns=[10, 20, 30])
    return gpscale.fit(df, pd.Series(y, name=99), max_iter=15, tol=1e-3), df, X, y


def test_integer_column_names_are_matched_by_name(int_named):
    pred, df, X, _ = int_named
    assert pred.feature_names == [10, 20, 30] and pred.target_name == 99
    ref = pred.predict(df)
    np.testing.assert_array_equal(pred.predict(df[[30, 10, 20]]), ref)
    np.testing.assert_array_equal(pred.predict(X), ref)  # a plain array: by position


def test_integer_names_survive_save_and_load(int_named, tmp_path):
    pred, df, _, y = int_named
    pred.save(tmp_path / "m.pt")
    back = gpscale.load(tmp_path / "m.pt")
    assert back.feature_names == [10, 20, 30]
    full = df[[20]].assign(**{"t": y}).rename(columns={"t": 99})  # target column is ignored
    full[30], full[10] = df[30], df[10]
    np.testing.assert_allclose(back.predict(full), pred.predict(df), rtol=1e-10, atol=1e-12)


def test_missing_names_are_refused_and_extra_ones_left_out(int_named):
    pred, df, _, _ = int_named
    with pytest.raises(ValueError, match=r"missing \[30\]\."):
        pred.predict(df.rename(columns={30: 31}))
    with pytest.raises(ValueError, match=r"missing \[30\]"):
        pred.predict(df[[10, 20]])
    np.testing.assert_array_equal(pred.predict(df.assign(**{"extra": 1.0})), pred.predict(df))


def test_numpy_integer_names_and_duplicates():
    r = np.random.default_rng(1)
    X = r.standard_normal((40, 2))
    df = pd.DataFrame(X, columns=np.array([3, 7], dtype=np.int64))
    pred = gpscale.fit(df, X[:, 0] - X[:, 1], max_iter=5)
    assert pred.feature_names == [3, 7] and all(type(c) is int for c in pred.feature_names)
    np.testing.assert_array_equal(pred.predict(df[[7, 3]]), pred.predict(X))
    with pytest.raises(ValueError, match="distinct names"):
        gpscale.fit(pd.DataFrame(X, columns=["a", "a"]), X[:, 0], max_iter=5)


def test_a_text_header_matches_integer_names_by_their_text(int_named):
    """What ``gpscale predict`` does with a CSV header for a model fitted on a data frame
    with integer column names."""
    pred, _, _, _ = int_named
    assert pred.match_columns(["30", "99", "10", "20"], "new.csv") == ["10", "20", "30"]
    with pytest.raises(ValueError, match=r"missing \[20\]"):
        pred.match_columns(["30", "10", "y"], "new.csv")
