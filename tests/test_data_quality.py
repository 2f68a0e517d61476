"""Issue 31, reliability on real data: the data-quality report of every standardised fit
(constant / near-constant columns, duplicated rows, inputs far outside the training
range), duplicated rows at fit time (case 4), feature counts that cannot fit in memory
(case 6) and the advice for non-numeric columns (case 8)."""

import signal
import warnings

import numpy as np
import pytest
import torch
from parquet_data import write_parquet

import gpscale
from gpscale.io import open_source


def _quality_warning():
    return getattr(gpscale.train, "DataQualityWarning", None)


def _rows(n=80, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    return X, y


def test_duplicated_rows_are_counted_reported_and_warned():
    """Every row three times (case 4): 2/3 of the rows repeat another; the fit says so
    (a DataQualityWarning) and its summary counts them."""
    X, y = _rows(60)
    X3, y3 = np.repeat(X, 3, axis=0), np.repeat(y, 3)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pred = gpscale.fit(X3, y3, max_iter=15)
    kind = _quality_warning()
    assert kind is not None
    said = [str(w.message) for w in got if issubclass(w.category, kind)]
    assert said and "120 of 180" in said[0] and "drop the duplicates" in said[0]
    assert "duplicated rows: 120 of 180 (66.7%)" in pred.summary()


def test_duplicates_are_counted_across_partitions_like_in_memory(tmp_path):
    """The moments pass over files hashes rows per partition; copies in different files
    are found when the partitions' digests merge."""
    from gpscale.io.scaling import source_scaler

    X, y = _rows(90)
    X = np.vstack([X, X[:25]])  # 25 copies, most in another file than their original
    y = np.concatenate([y, y[:25]])
    folder = write_parquet(tmp_path / "p", X, y, parts=4, row_group=20)
    src = open_source(str(folder), target="y")
    streamed = source_scaler(src.partitions())
    assert streamed.quality.duplicates == 25 and streamed.quality.exact
    held = gpscale.preprocessing.Standardizer.fit(X, y)
    assert held.quality.duplicates == 25
    np.testing.assert_allclose(streamed.x_scale, held.x_scale, rtol=1e-12)


def test_duplicate_count_beyond_the_hash_cap_is_an_estimate(monkeypatch):
    import gpscale.quality as quality

    monkeypatch.setattr(quality, "MAX_HASHES", 2000)
    rng = np.random.default_rng(1)
    X = np.repeat(rng.standard_normal((20_000, 2)), 2, axis=0)  # 20 000 copies
    parts = [quality.RowDigest.of(X[a:a + 7000]) for a in range(0, len(X), 7000)]
    digest = parts[0]
    for p in parts[1:]:
        digest = digest.merge(p)
    assert not digest.exact and digest.rows == 40_000
    assert abs(digest.duplicates - 20_000) < 0.15 * 20_000
    q = quality.DataQuality(40_000, (), (), digest.duplicates, digest.exact, (0.0,), (1.0,))
    assert "about" in q.lines()[0] and "estimated" in q.lines()[0]


def test_constant_and_near_constant_columns_are_named_in_summary():
    X, y = _rows(100, d=4)
    X[:, 1] = 3.0                                   # constant
    X[:, 2] = 1e6 + 1e-7 * np.arange(100)           # differs in its last digits only
    X[:, 3] = 1e6 + np.random.default_rng(2).standard_normal(100)  # shifted: fine
    pred = gpscale.fit(X, y, max_iter=10)
    text = pred.summary()
    assert "constant input columns (they carry no information): X[:, 1]" in text
    assert "near-constant input columns" in text and "X[:, 2]" in text.split("near-")[1]
    assert "X[:, 3]" not in text.split("hyperparameters")[0]


def test_inputs_far_outside_the_training_range_warn_at_prediction():
    X, y = _rows(60)
    pred = gpscale.fit(X, y, max_iter=10)
    new = X[:5].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pred.predict(new)  # within range: silent
    new[:, 2] = 1000.0  # training range [-2, 2]: 250 ranges beyond
    with pytest.warns(_quality_warning() or UserWarning, match=r"X\[:, 2\]"):
        pred.predict(new)


def test_info_shows_the_saved_report(tmp_path):
    """``gpscale info`` reads the report from the model file (saved beside the scaler
    by gpscale.quality.quality_entry)."""
    from gpscale.commands.info import info_text, model_info
    from gpscale.quality import quality_entry

    X, y = _rows(50)
    X[:, 1] = 7.0
    pred = gpscale.fit(np.repeat(X, 2, axis=0), np.repeat(y, 2), max_iter=10)
    path = tmp_path / "m.pt"
    torch.save({**pred.to_dict(), **quality_entry(pred)}, path)
    found = model_info(path)
    assert found["data_quality"]["duplicates"] == 50
    text = info_text(found)
    assert "quality  constant input columns" in text and "'x1'" in text
    assert "duplicated rows: 50 of 100" in text


def _alarm(seconds):
    def stop(*_):
        raise TimeoutError(f"no answer within {seconds} s")
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)


def test_rff_feature_count_that_cannot_fit_is_refused_before_any_work(monkeypatch):
    """Case 6: num_features=1e11 drew frequencies block by block for minutes; it is
    refused before any frequency is drawn, with the largest count that fits."""
    import gpscale.features.rff as rff

    def no_draw(*_, **__):
        raise AssertionError("frequencies were drawn before the count was checked")

    monkeypatch.setattr(rff, "draw_frequencies", no_draw)
    X, y = _rows(50)
    _alarm(120)  # a hang guard only: the old code drew for minutes
    try:
        with pytest.raises(ValueError, match=r"num_features=100000000000 needs about .*"
                                             r"Choose num_features of at most \d+"):
            gpscale.fit(X, y, method="rff", num_features=10**11)
    finally:
        signal.alarm(0)


def test_non_numeric_column_advice_names_what_each_door_takes(tmp_path):
    """Case 8: the advice named exclude= / features=, which neither gpscale.fit nor the
    command line took; a text column is now a category, and text in a number column
    names the flags each door takes (--exclude / exclude=, --categorical)."""
    import pandas as pd

    df = pd.DataFrame({"a": np.arange(10.0), "b": ["x"] * 10, "y": np.arange(10.0) ** 2})
    assert open_source(df, target="y").encoding.names == ["a", "b=x"]
    assert open_source(df, target="y", exclude=["b"]).num_features == 1
    rows = "".join(f"{i},{i % 7}\n" for i in range(60_000))  # past pyarrow's first block
    (tmp_path / "late.csv").write_text("a,y\n" + rows + "oops,3\n")
    with pytest.raises(ValueError) as err:
        gpscale.fit(str(tmp_path / "late.csv"), target="y")
    msg = str(err.value)
    assert "--exclude a" in msg and "exclude=['a'] in gpscale.fit" in msg
    assert "--categorical a" in msg


def test_the_planner_refuses_a_feature_count_that_cannot_fit_before_reading_rows(tmp_path):
    """Case 6 at the planner: for a file source the refusal comes before the moments
    pass (the plan reads only the source's header), with the same advice."""
    from gpscale.io import open_source
    from gpscale.kernels import make_kernel
    from gpscale.plan import PlanError, make_plan

    X, y = _rows(50)
    path = tmp_path / "t.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", comments="",
               header=",".join([f"x{j}" for j in range(X.shape[1])] + ["y"]))
    source = open_source(path, target="y")
    with pytest.raises(PlanError, match=r"num_features=100000000000 needs about"):
        make_plan(source, "rff", make_kernel("rbf", X.shape[1]),
                  options={"num_features": 10**11})
    plan = make_plan(source, "rff", make_kernel("rbf", X.shape[1]),
                     options={"num_features": 64})
    assert plan.options["num_features"] == 64
