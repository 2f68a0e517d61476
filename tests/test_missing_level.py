"""Issue 47: a category level whose text is "(missing)" and the level that missing
values form are two levels, in training, in the saved model and at prediction; model
files written before the distinction load as they did."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest

import gpscale
from gpscale.io import open_source
from gpscale.io.encoding import ColumnCode, TableEncoding, UnseenLevelWarning

pd = pytest.importorskip("pandas")


def _frame(n=40):
    c = np.array(["(missing)", "a", None, "b"] * (n // 4), dtype=object)
    x = np.linspace(0.0, 1.0, n)
    effect = {"(missing)": 2.0, "a": 0.0, None: -2.0, "b": 1.0}
    return pd.DataFrame({"c": c, "x": x, "y": [effect[v] for v in c] + x})


def test_the_text_and_the_missing_values_are_distinct_levels(tmp_path):
    df = _frame()
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    for data in (df, str(path)):
        src = open_source(data, target="y")
        code = src.encoding.code("c")
        assert code.levels == ("(missing)", "a", "b") and code.missing
        assert src.encoding.names == ["c=(missing)", "c=a", "c=b", "c (missing)", "x"]
        X, _ = src.to_arrays()
        np.testing.assert_array_equal(X[:4, :4], [[1, 0, 0, 0], [0, 1, 0, 0],
                                                  [0, 0, 0, 1], [0, 0, 1, 0]])
    assert "and missing values a level of their own, 'c (missing)'" in code.describe()


def test_saved_and_loaded_they_stay_apart_at_prediction(tmp_path):
    df = _frame()
    p = gpscale.fit(df, target="y", max_iter=5, seed=0)
    q = gpscale.load(p.save(tmp_path / "m.pt"))
    assert q.inputs == p.inputs
    new = pd.DataFrame({"c": [None, "(missing)"], "x": [0.5, 0.5]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnseenLevelWarning)
        m = q.predict(new)
    assert m[1] - m[0] > 2.0  # effects +2 and -2: the two levels were learned apart


def test_a_text_level_named_missing_does_not_take_missing_values():
    train = pd.DataFrame({"c": ["(missing)", "a"] * 10, "y": np.arange(20.0)})
    enc = open_source(train, target="y").encoding
    assert not enc.code("c").missing
    with pytest.warns(UnseenLevelWarning, match="missing values not seen in training"):
        X = enc.batch(pa.table({"c": pa.array([None, "(missing)"], pa.string())}),
                      _columns(), _origin()).X
    # the missing value is a gap (NaN across the block), not the level named "(missing)"
    np.testing.assert_array_equal(X, [[np.nan, np.nan], [1, 0]])


def test_files_from_before_the_distinction_load_as_they_did():
    old = {"kind": "table", "dropped": 0, "codes": [
        {"name": "c", "kind": "category", "mean": 0.0, "missing": False,
         "levels": ["a", "b", "(missing)"], "origin": 0.0},
        {"name": "x", "kind": "number", "mean": 0.5, "missing": True, "levels": [],
         "origin": 0.0}]}
    enc = TableEncoding.from_state(old)
    assert enc.code("c") == ColumnCode("c", "category", levels=("a", "b"), missing=True)
    assert enc.num_features == 5  # the widths (and so the model) are unchanged
    assert TableEncoding.from_state(enc.state()) == enc


def _columns():
    from gpscale.io.batch import Columns

    return Columns(("c",), None)


def _origin():
    from gpscale.io.batch import Origin

    return Origin("a test table", 0)
