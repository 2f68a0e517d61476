"""Issue 59, items 3-5 and 9: a text column is never silently turned into categories when
it holds dates with a typo, dates written day or month first, or numbers with separators
or units; category values are trimmed; a level seen only on rows without a target is
unknown. Each case failed (or gave a misleading message) before."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpscale
from gpscale.io import open_source
from gpscale.io.encoding import UnseenLevelWarning
from gpscale.io.text_kind import text_kind

pd = pytest.importorskip("pandas")

FIT = {"method": "exact", "max_iter": 5, "seed": 0}


def _dates(n: int, fmt: str = "%Y-%m-%d", freq: str = "D") -> list[str]:
    return pd.date_range("2020-01-01", periods=n, freq=freq).strftime(fmt).tolist()


def _frame(when: list[str], seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = len(when)
    return pd.DataFrame({"when": when, "x": rng.standard_normal(n),
                         "y": np.sin(np.arange(n) / 20) + 0.1 * rng.standard_normal(n)})


@pytest.mark.parametrize("where", [3, 150])
def test_a_date_column_with_one_typo_is_refused_naming_the_value(tmp_path, where):
    """Early (inside the sample that tells the kind) or late, the message names the value
    and its position; before, an early typo made the column 'ids or free text'."""
    when = _dates(200)
    when[where] = "unknown"
    df = _frame(when)
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        with pytest.raises(ValueError, match=r"holds dates, but 'unknown' .* not an ISO date"
                                             r".*--exclude when"):
            gpscale.fit(data, target="y", **FIT)


def test_monthly_dates_with_a_typo_never_become_a_few_categories():
    """Twelve dates repeated over 240 rows: few enough distinct values to pass as
    levels, which is what happened silently before."""
    when = (_dates(12, freq="MS") * 20)
    when[7] = "2020-13-01?"
    with pytest.raises(ValueError, match=r"'2020-13-01\?'.*not an ISO date"):
        gpscale.fit(_frame(when), target="y", **FIT)
    src = open_source(_frame(_dates(12, freq="MS") * 20), target="y")
    assert src.encoding.code("when").kind == "date"


@pytest.mark.parametrize("fmt, what", [("%d/%m/%Y", "day or month first"),
                                       ("%m-%d-%Y", "day or month first"),
                                       ("%Y/%m/%d", "slashes or dots")])
def test_dates_in_other_formats_are_refused_with_the_format_named(tmp_path, fmt, what):
    df = _frame(_dates(120, fmt))
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        with pytest.raises(ValueError) as err:
            gpscale.fit(data, target="y", **FIT)
        msg = str(err.value)
        assert what in msg and "ISO dates (YYYY-MM-DD)" in msg and "--exclude when" in msg
        assert "ids or free text" not in msg


@pytest.mark.parametrize("values, what", [
    (["1,234", "12", "5,678,901", "2,001"], "thousands separators"),
    (["12,5", "3,25", "1,0", "7,75"], "decimal comma"),
    ([f"{v} kg" for v in range(8)], "with a unit or currency sign"),
    ([f"${v}.50" for v in range(8)], "with a unit or currency sign"),
])
def test_numbers_written_as_text_are_refused_with_what_to_do(values, what):
    df = pd.DataFrame({"w": values * 10, "y": np.arange(len(values) * 10, dtype=float)})
    with pytest.raises(ValueError) as err:
        gpscale.fit(df, target="y", **FIT)
    msg = str(err.value)
    assert what in msg and "--categorical w" in msg and "--exclude w" in msg
    src = open_source(df, target="y", categorical=["w"])  # the user's word decides
    assert src.encoding.code("w").kind == "category"


@pytest.mark.parametrize("values", [["2wd", "4wd", "fwd"], ["1st", "2nd", "3rd", "4th", "5th"],
                                    ["a", "b", "c"], ["Austin", "El Paso"]])
def test_codes_and_ranks_stay_categories(values):
    assert text_kind("c", values * 5) == "category"


def test_category_values_are_trimmed_like_numbers_and_dates():
    rng = np.random.default_rng(1)
    c = rng.choice(["a", "b"], 80)
    df = pd.DataFrame({"c": c, "y": np.where(c == "a", 1.0, -1.0) + 0.1 * rng.standard_normal(80)})
    df.loc[::7, "c"] = df.loc[::7, "c"] + " "
    src = open_source(df, target="y")
    assert src.encoding.code("c").levels == ("a", "b")
    model = gpscale.fit(df, target="y", **FIT)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnseenLevelWarning)
        padded = model.predict(pd.DataFrame({"c": [" b", "a  "]}), return_std=True)
    plain = model.predict(pd.DataFrame({"c": ["b", "a"]}), return_std=True)
    for u, v in zip(padded, plain):
        np.testing.assert_array_equal(u, v)


def test_a_level_seen_only_on_rows_without_a_target_is_unknown():
    """Item 3: such a level had a one-hot column no training row set, and predicting it
    gave a mean far off with no warning."""
    rng = np.random.default_rng(2)
    c = rng.choice(["a", "b"], 60).astype(object)
    y = np.where(c == "a", 2.0, -2.0) + 0.1 * rng.standard_normal(60)
    c[:5], y[:5] = "z", np.nan
    df = pd.DataFrame({"c": c, "y": y})
    src = open_source(df, target="y")
    assert src.encoding.code("c").levels == ("a", "b")
    model = gpscale.fit(df, target="y", **FIT)
    with pytest.warns(UnseenLevelWarning):
        model.predict(pd.DataFrame({"c": ["z"]}))


@pytest.mark.parametrize("cols", [["k", "i"], ["k", "b"], ["d", "i"], ["c", "f"],
                                  ["c", "d", "i", "f", "b", "k"]])
def test_the_estimator_takes_every_pandas_dtype_fit_takes(cols):
    """Item 8: a category or date column beside a nullable one raised pandas' cast error
    in scikit-learn's array check."""
    from gpscale.sklearn import GPRegressor

    rng = np.random.default_rng(3)
    n = 60
    df = pd.DataFrame({
        "c": pd.array(rng.choice(["a", "b"], n), dtype="string"),
        "k": pd.Categorical(rng.choice(["u", "v"], n)),
        "i": pd.array(rng.integers(0, 5, n), dtype="Int64"),
        "f": pd.array(rng.standard_normal(n), dtype="Float64"),
        "b": pd.array(rng.random(n) < 0.5, dtype="boolean"),
        "d": pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 300, n), unit="D")})
    df.loc[3, "i"], df.loc[4, "f"], df.loc[5, "b"] = pd.NA, pd.NA, pd.NA
    y = rng.standard_normal(n)
    est = GPRegressor(max_iter=3).fit(df[cols], y)
    assert list(est.feature_names_in_) == cols and est.n_features_in_ == len(cols)
    want = gpscale.fit(df[cols].assign(y=y), target="y", max_iter=3).predict(df[cols][:5])
    np.testing.assert_allclose(est.predict(df[cols][:5]), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[cols[::-1]][:5])
