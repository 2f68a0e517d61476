"""A date column's periodic components (issue 47, item 4: ``date_features=``,
``--date-features``): the sin/cos values of known dates, saved with the model and applied
to raw prediction tables, bad dates at prediction time, older model files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import gpscale
from gpscale.io import open_source
from gpscale.io.batch import Columns, Origin
from gpscale.io.dates import date_features, periodic
from gpscale.io.encoding import ColumnCode, TableEncoding

pd = pytest.importorskip("pandas")

SRC = Path(gpscale.__file__).resolve().parents[1]
FIT = {"max_iter": 5, "seed": 0}


def _frame(n=60, seed=0):
    rng = np.random.default_rng(seed)
    day = pd.to_datetime("2019-06-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D")
    x = rng.uniform(0, 1, n)
    doy = day.day_of_year.to_numpy()
    y = np.sin(2 * np.pi * doy / 365.25) + 0.3 * day.day_of_week.to_numpy() / 6 + x
    return pd.DataFrame({"sold": day.strftime("%Y-%m-%d"), "x": x, "y": y})


def test_known_dates_give_known_phases():
    # 2020-01-01 (a Wednesday: w = 2, a = 0), 2020-07-02 (a Thursday, day 183 of a
    # leap year), 2021-01-04 12:00 (a Monday noon: w = 0.5, a = 3.5), 1969-12-29 (a Monday)
    t = np.array([18262.0, 18445.0, 18631.5, -3.0])
    a, w = np.array([0.0, 183.0, 3.5, 362.0]), np.array([2.0, 3.0, 0.5, 0.0])
    want = np.column_stack([np.sin(2 * np.pi * a / 365.25), np.cos(2 * np.pi * a / 365.25),
                            np.sin(2 * np.pi * w / 7), np.cos(2 * np.pi * w / 7)])
    np.testing.assert_allclose(periodic(t, ("yearly", "weekly")), want, rtol=0, atol=1e-14)
    assert periodic(t, ()).shape == (4, 0)


def test_encoded_columns_match_a_hand_made_reference(tmp_path):
    df = pd.DataFrame({"d": ["2020-01-01", "2020-07-02", None, "2021-01-04T12:00"],
                       "y": [1.0, 2.0, 3.0, 4.0]})
    df.to_csv(tmp_path / "t.csv", index=False)
    days = np.array([0.0, 183.0, 0.0, 369.5])
    days[2] = days[[0, 1, 3]].mean()  # a missing date: the training mean date
    t = 18262.0 + days
    want = np.column_stack([days, periodic(t, ("yearly", "weekly")), [0, 0, 1, 0]])
    for data in (df, str(tmp_path / "t.csv")):
        src = open_source(data, target="y", date_features="weekly, Yearly")
        assert src.encoding.names == ["d", "d (yearly sin)", "d (yearly cos)",
                                      "d (weekly sin)", "d (weekly cos)", "d (missing)"]
        assert src.encoding.raw_columns() == [5]  # the sin/cos pairs are standardised
        np.testing.assert_allclose(src.to_arrays()[0], want, rtol=1e-14, atol=1e-14)
    # datetime64 values, in pandas and as a Parquet timestamp column
    stamps = df.assign(d=pd.to_datetime(df["d"], format="ISO8601"))
    stamps.to_parquet(tmp_path / "t.parquet")
    for data in (stamps, str(tmp_path / "t.parquet")):
        X = open_source(data, target="y", date_features="yearly,weekly").to_arrays()[0]
        np.testing.assert_allclose(X, want, rtol=1e-14, atol=1e-14)
    line = src.encoding.lines()[0]
    assert line.startswith("'d': date, days since 2020-01-01, yearly sin/cos, weekly sin/cos;")


def test_the_option_is_checked_before_any_row_is_read(tmp_path):
    df = _frame()
    assert date_features("days") == () and date_features(["yearly", "days"]) == ("yearly",)
    with pytest.raises(ValueError, match=r"date_features: \['monthly'\] is not one of"):
        gpscale.fit(str(tmp_path / "absent.csv"), target="y", date_features="monthly")
    with pytest.raises(ValueError, match="no input column of the DataFrame holds dates"):
        open_source(df.drop(columns=["sold"]), target="y", date_features="yearly")
    with pytest.raises(ValueError, match="date_features= is for training rows"):
        open_source(df, date_features="yearly")


def test_save_load_and_raw_prediction_tables(tmp_path):
    df = _frame()
    p = gpscale.fit(df, target="y", date_features="yearly,weekly", **FIT)
    assert p.n_features == 6
    q = gpscale.load(p.save(tmp_path / "m.pt"))
    assert q.inputs == p.inputs and q.inputs.code("sold").periodic == ("yearly", "weekly")
    raw = df.drop(columns=["y"]).iloc[:9][["x", "sold"]].assign(extra=1.0)
    X = open_source(df, target="y", date_features="yearly,weekly").to_arrays()[0][:9]
    np.testing.assert_allclose(q.predict(raw), p.predict(X), rtol=1e-12, atol=1e-12)
    assert "column 'sold': date, days since 2019-06-0" in q.summary()
    assert "yearly sin/cos, weekly sin/cos" in q.summary()


def test_a_bad_date_at_prediction_time_names_it():
    p = gpscale.fit(_frame(), target="y", date_features="yearly", **FIT)
    new = pd.DataFrame({"sold": ["2020-02-03", "2020-02-30"], "x": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"'2020-02-30' at position 1 .* is not an ISO "
                       r"date .* or leave it empty \(a missing date\)"):
        p.predict(new)


def test_model_files_from_before_periodic_components_load():
    old = {"kind": "table", "dropped": 0, "version": 2, "codes": [
        {"name": "d", "kind": "date", "mean": 4.0, "missing": True, "levels": [],
         "origin": 18262.0},
        {"name": "x", "kind": "number", "mean": 0.5, "missing": False, "levels": [],
         "origin": 0.0}]}
    enc = TableEncoding.from_state(old)
    assert enc.code("d") == ColumnCode("d", "date", mean=4.0, missing=True, origin=18262.0)
    assert enc.names == ["d", "d (missing)", "x"] and enc.raw_columns() == [1]
    table = pa.table({"d": pa.array(["2020-01-03", None]), "x": [1.0, 2.0]})
    X = enc.batch(table, Columns(("d", "x"), None), Origin("t", 0, "position")).X
    np.testing.assert_array_equal(X, [[2.0, 0.0, 1.0], [4.0, 1.0, 2.0]])
    assert TableEncoding.from_state(enc.state()) == enc
    with pytest.raises(ValueError, match="version 4; this gpscale reads versions 1 to 3"):
        TableEncoding.from_state({**enc.state(), "version": 4})


def test_cli_fit_with_date_features_and_predict_in_a_subprocess(tmp_path):
    df = _frame(40)
    df.to_csv(tmp_path / "train.csv", index=False)
    df.drop(columns=["y"]).iloc[:6].to_csv(tmp_path / "test.csv", index=False)
    env = {"PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "gpscale.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)

    bad = run("fit", "--data", "train.csv", "--target", "y", "--date-features", "hourly",
              "--out", "m.pt")
    assert bad.returncode != 0 and "is not one of ['days', 'yearly', 'weekly']" in bad.stderr
    done = run("fit", "--data", "train.csv", "--target", "y", "--date-features", "yearly",
               "--max-iter", "5", "--out", "m.pt")
    assert done.returncode == 0, done.stderr
    pred = run("predict", "--model", "m.pt", "--data", "test.csv", "--out", "p.csv")
    assert pred.returncode == 0, pred.stderr
    info = run("info", "m.pt")
    assert "'sold': date, days since 2019-06-0" in info.stdout and "yearly sin/cos" in info.stdout
    want = gpscale.load(tmp_path / "m.pt").predict(df.drop(columns=["y"]).iloc[:6])
    np.testing.assert_allclose(pd.read_csv(tmp_path / "p.csv")["mean"], want, rtol=1e-9)
