"""Issue 59, items 6, 7 and 9: integer id columns are refused as string ids are; the
no-skill check judges a fit with category inputs against the per-level means; the
messages of item 9 say what is wrong and what to do (exit codes as the README classes
them). Each case failed (or gave a misleading message) before."""

from __future__ import annotations

import numpy as np
import pytest

import gpscale
from gpscale.io import open_source

pd = pytest.importorskip("pandas")

FIT = {"method": "exact", "max_iter": 5, "seed": 0}


# -- item 6: integer ids -----------------------------------------------------------------
def _with_ids(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    return pd.DataFrame({
        "row": np.arange(1, n + 1),  # a row counter
        "customer": rng.permutation(n) + 10_000,  # ids handed out, rows shuffled
        "hashed": rng.integers(0, 2**40, n),  # hashed ids
        "x": x, "y": np.sin(x) + 0.1 * rng.standard_normal(n)})


@pytest.mark.parametrize("column, why", [("row", "rising with the row order"),
                                         ("customer", "spread evenly"),
                                         ("hashed", "spread evenly")])
def test_an_integer_id_column_is_refused_naming_exclude(tmp_path, column, why):
    df = _with_ids()[[column, "x", "y"]]
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        with pytest.raises(ValueError) as err:
            open_source(data, target="y")
        msg = str(err.value)
        assert "look like ids" in msg and why in msg
        assert f"--exclude {column}" in msg and f"exclude=[{column!r}]" in msg
        assert "--columns" in msg  # how to keep one that is a real input
    open_source(df, target="y", exclude=[column])


def test_a_row_counter_split_over_files_is_refused(tmp_path):
    df = _with_ids()[["row", "x", "y"]]
    df[:100].to_csv(tmp_path / "a.csv", index=False)
    df[100:].to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="'row'.*rising with the row order"):
        open_source(str(tmp_path / "*.csv"), target="y")
    # the files out of order: no longer monotone, but a permutation of a range
    with pytest.raises(ValueError, match="'row'.*spread evenly"):
        open_source([str(tmp_path / "b.csv"), str(tmp_path / "a.csv")], target="y")


def test_an_id_like_column_named_in_columns_or_alone_is_kept():
    df = _with_ids()
    src = open_source(df, target="y", columns=["row", "x"])  # the user asked for it
    assert src.feature_names == ["row", "x"]
    src = open_source(df[["row", "y"]], target="y")  # a series: nothing else to fit on
    assert src.feature_names == ["row"]


def test_integer_measurements_are_not_ids():
    rng = np.random.default_rng(1)
    n = 400
    df = pd.DataFrame({
        "year": np.sort(rng.integers(1990, 2020, n)),  # sorted, but few distinct values
        "money": np.round(np.exp(rng.normal(10, 1, n))).astype(np.int64),  # skewed
        "count": rng.poisson(30, n), "few": np.arange(n) % 7,
        "y": rng.standard_normal(n)})
    assert open_source(df, target="y").feature_names == ["year", "money", "count", "few"]
    small = df[:40].assign(row=np.arange(40))  # too few rows to tell
    open_source(small, target="y")


def test_the_distinct_count_merges_pieces_in_any_split():
    from gpscale.io.survey import DISTINCT_KEEP, DistinctSample

    rng = np.random.default_rng(0)
    values = rng.integers(0, 10**12, 5 * DISTINCT_KEEP)
    whole = DistinctSample().add(np.unique(values))
    pieces = DistinctSample()
    for piece in np.array_split(values, 7):
        pieces = pieces.merge(DistinctSample().add(np.unique(piece)))
    assert pieces == whole and whole.level > 0
    assert abs(whole.count / len(np.unique(values)) - 1) < 0.05
    small = DistinctSample().add(np.unique(values[:1000]))
    assert small.count == len(np.unique(values[:1000])) and small.level == 0
