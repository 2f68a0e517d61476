"""gpscale.io (sources, partitions, writers) and the streaming Standardizer."""

from __future__ import annotations

import gzip
import math
import os
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.csv as pv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpscale.io import (
    ArrayPartition,
    CsvPartition,
    DaskPartition,
    FramePartition,
    ParquetPartition,
    open_source,
    write_table,
)
from gpscale.preprocessing import Moments, Standardizer, chunk_moments

EPS = np.finfo(np.float64).eps
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _close(a, b, scale, tol=1e-12):
    """|a - b| <= tol * (|b| + scale), elementwise (for means near zero)."""
    assert np.all(np.abs(np.asarray(a) - b) <= tol * (np.abs(b) + scale)), (a, b)


def _data(n=97, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * [1.0, 1e3, 1e-3][:d] + np.arange(d)
    y = X @ np.linspace(1, 2, d) + 0.1 * rng.standard_normal(n)
    return X, y


def _table(X, y, ids=True):
    cols = {f"x{j}": X[:, j] for j in range(X.shape[1])}
    cols["y"] = y
    if ids:
        cols["id"] = pa.array([f"r{i}" for i in range(len(y))])
    return pa.table(cols)


@pytest.fixture
def xy():
    return _data()


@pytest.fixture(autouse=True)
def _sync_dask():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


# -- round trips ----------------------------------------------------------------------------
def test_csv_round_trip_with_keep_and_prediction_inputs(tmp_path, xy):
    X, y = xy
    path = str(tmp_path / "train.csv")
    pv.write_csv(_table(X, y), path)
    src = open_source(path, target="y", keep=["id"])
    assert src.feature_names == ["x0", "x1", "x2"] and src.target_name == "y"
    assert src.num_features == 3 and src.keep_names == ["id"]
    Xs, ys = src.to_arrays()
    np.testing.assert_array_equal(Xs, X)
    np.testing.assert_array_equal(ys, y)
    assert Xs.flags.c_contiguous and Xs.dtype == np.float64
    assert src.num_rows() == len(y) and src.memory_bytes() == 8 * len(y) * 4
    batch = src.read_all()
    assert batch.keep["id"].to_pylist() == [f"r{i}" for i in range(len(y))]
    pred = open_source(path, columns=["x0", "x1", "x2"], keep=["id"])
    assert not pred.has_target
    chunks = list(pred.chunks(10))
    assert all(yc is None for _, yc in chunks)
    np.testing.assert_array_equal(np.concatenate([c for c, _ in chunks]), X)


def test_csv_gz_spaces_and_multiline_fields(tmp_path):
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(' a , y ,note\n 1.5 , 2 ,plain\n3,4,"two\nlines"\n5 ,6,x\n')
    src = open_source(str(path), target="y", keep=["note"])
    assert src.feature_names == ["a"]
    b = src.read_all()
    np.testing.assert_array_equal(b.X[:, 0], [1.5, 3, 5])
    np.testing.assert_array_equal(b.y, [2, 4, 6])
    assert b.keep["note"].to_pylist() == ["plain", "two\nlines", "x"]


def test_csv_restarts_for_long_multiline_fields_without_losing_rows(tmp_path):
    n = 60_000  # more than one reader block before the odd row
    a = np.arange(n + 3, dtype=float)
    note = '"' + "long\n" * 400_000 + '"'  # 2 MB, spanning lines: larger than a block
    text = "a,y,note\n" + "".join(f"{i:.0f},{2 * i:.0f},n\n" for i in a[:n])
    text += f"{a[n]:.0f},{2 * a[n]:.0f},{note}\n" + "".join(f"{i:.0f},{2 * i:.0f},m\n"
                                                          for i in a[n + 1:])
    (tmp_path / "long.csv").write_text(text)
    src = open_source(str(tmp_path / "long.csv"), target="y", keep=["note"])
    b = src.read_all()
    np.testing.assert_array_equal(b.X[:, 0], a)
    np.testing.assert_array_equal(b.y, 2 * a)
    assert b.keep["note"][n].as_py() == "long\n" * 400_000
    assert b.keep["note"][n + 1].as_py() == "m" and src.num_rows() == n + 3


def test_parquet_row_groups_glob_and_directory(tmp_path, xy):
    X, y = xy
    folder = tmp_path / "parts"
    folder.mkdir()
    cuts = [0, 40, 97]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        pq.write_table(_table(X[a:b], y[a:b], ids=False), folder / f"part-{i}.parquet",
                       row_group_size=15)
    (folder / "_SUCCESS").write_text("")
    for data in (str(folder), str(folder / "part-*.parquet"),
                 [folder / "part-0.parquet", folder / "part-1.parquet"]):
        src = open_source(data, target="y")
        parts = src.partitions()
        assert all(isinstance(p, ParquetPartition) for p in parts)
        assert [p.known_rows() for p in parts] == [15, 15, 10, 15, 15, 15, 12]
        Xs, ys = src.to_arrays()
        np.testing.assert_array_equal(Xs, X)
        np.testing.assert_array_equal(ys, y)
    # chunks never span partitions; each is `rows` long except a partition's last
    sizes = [len(c) for c, _ in open_source(str(folder), target="y").chunks(6)]
    assert sizes[:3] == [6, 6, 3] and sum(sizes) == len(y)


def test_mixed_csv_and_parquet_files(tmp_path, xy):
    X, y = xy
    pv.write_csv(_table(X[:50], y[:50], ids=False), tmp_path / "a.csv")
    pq.write_table(_table(X[50:], y[50:], ids=False), tmp_path / "b.parquet")
    src = open_source(str(tmp_path), target="y")
    assert [type(p) for p in src.partitions()] == [CsvPartition, ParquetPartition]
    np.testing.assert_array_equal(src.to_arrays()[0], X)


@FUZZ
@given(rows=st.integers(1, 120), prows=st.integers(1, 120))
def test_any_chunking_gives_the_same_rows_and_scaler(tmp_path, rows, prows):
    X, y = _data(n=101, seed=3)
    path = tmp_path / "fuzz.parquet"
    if not path.exists():
        pq.write_table(_table(X, y, ids=False), path, row_group_size=33)
    ref = Standardizer.fit(X, y)
    for src in (open_source(str(path), target="y"), open_source((X, y), partition_rows=prows)):
        chunks = list(src.chunks(rows))
        assert all(len(c) <= rows for c, _ in chunks)
        np.testing.assert_array_equal(np.concatenate([c for c, _ in chunks]), X)
        np.testing.assert_array_equal(np.concatenate([c for _, c in chunks]), y)
        s = Standardizer.fit_chunks(chunks)
        _close(s.x_mean, ref.x_mean, ref.x_scale)
        np.testing.assert_allclose(s.x_scale, ref.x_scale, rtol=1e-12)
        assert abs(s.y_mean - ref.y_mean) <= 1e-12 * ref.y_scale
        assert abs(s.y_scale / ref.y_scale - 1) <= 1e-12


def test_arrays_tensors_and_frames(xy):
    torch = pytest.importorskip("torch")
    pd = pytest.importorskip("pandas")
    X, y = xy
    src = open_source((X, y), partition_rows=40)
    Xs, ys = src.to_arrays()
    assert Xs is X and ys is y  # float64 C-contiguous numpy: no copy
    parts = src.partitions()
    assert [p.num_rows for p in parts] == [40, 40, 17]
    assert all(np.shares_memory(p.X, X) for p in parts)
    Xt, yt = open_source((torch.as_tensor(X), torch.as_tensor(y)[:, None])).to_arrays()
    np.testing.assert_array_equal(Xt, X)
    np.testing.assert_array_equal(yt, y)
    np.testing.assert_array_equal(open_source(np.asfortranarray(X)).to_arrays()[0], X)
    df = pd.DataFrame({"b": X[:, 1], "a": X[:, 0], "y": y, "id": np.arange(len(y))})
    src = open_source(df, target="y", exclude=["id"], partition_rows=30)
    assert src.feature_names == ["b", "a"]
    np.testing.assert_array_equal(src.to_arrays()[0], X[:, [1, 0]])
    src = open_source((df[["a", "b"]], df["y"]))
    assert src.feature_names == ["a", "b"] and src.target_name == "y"


def test_dask_array_and_dataframe_sources(xy):
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = xy
    src = open_source((da.from_array(X, chunks=(30, 2)), da.from_array(y, chunks=45)))
    parts = src.partitions()
    assert all(isinstance(p, DaskPartition) for p in parts)
    assert [p.known_rows() for p in parts] == [30, 30, 30, 7]
    Xs, ys = src.to_arrays()
    np.testing.assert_array_equal(Xs, X)
    np.testing.assert_array_equal(ys, y)
    keep = X[:, 0] > 0  # blocks of unknown length: counted with one computation
    dX, dy = da.from_array(X, chunks=30), da.from_array(y, chunks=30)
    dkeep = dX[:, 0] > 0
    masked = open_source((dX[dkeep], dy[dkeep]))
    assert masked.partitions()[0].known_rows() is None
    assert masked.num_rows() == keep.sum()
    np.testing.assert_array_equal(masked.to_arrays()[1], y[keep])
    value = parts[1].delayed.compute()  # what a worker task receives
    assert isinstance(value, ArrayPartition)
    np.testing.assert_array_equal(next(value.chunks(100))[0], X[30:60])
    df = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "y": y, "k": np.arange(len(y))})
    src = open_source(dd.from_pandas(df, npartitions=3), target="y", keep=["k"])
    assert src.feature_names == ["x0", "x1"] and src.num_rows() == len(y)
    b = src.read_all()
    np.testing.assert_array_equal(b.X, X[:, :2])
    np.testing.assert_array_equal(b.y, y)
    assert b.keep["k"].to_pylist() == list(range(len(y)))


def test_every_partition_type_pickles(tmp_path, xy):
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = xy
    pv.write_csv(_table(X, y), tmp_path / "a.csv")
    pq.write_table(_table(X, y), tmp_path / "a.parquet", row_group_size=50)
    df = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "y": y})
    sources = [open_source(str(tmp_path / "a.csv"), target="y", keep=["id"]),
               open_source(str(tmp_path / "a.parquet"), target="y", exclude=["id"]),
               open_source((X, y), partition_rows=50),
               open_source(df, target="y", partition_rows=50),
               open_source((da.from_array(X, chunks=50), da.from_array(y, chunks=50))),
               open_source(dd.from_pandas(df, npartitions=2), target="y")]
    kinds = set()
    for src in sources:
        for part in src.partitions():
            kinds.add(type(part))
            copy = pickle.loads(pickle.dumps(part))
            got = list(copy.chunks(7))
            want = list(part.chunks(7))
            assert len(got) == len(want) > 0
            for (a, b), (c, d) in zip(got, want):
                np.testing.assert_array_equal(a, c)
                np.testing.assert_array_equal(b, d)
    assert kinds == {CsvPartition, ParquetPartition, ArrayPartition, FramePartition,
                     DaskPartition}


def test_csv_partition_counts_rows_with_a_pass_and_caches_it(tmp_path, xy):
    X, y = xy
    pv.write_csv(_table(X, y), tmp_path / "a.csv")
    part = open_source(str(tmp_path / "a.csv"), exclude=["id"]).partitions()[0]
    assert part.known_rows() is None
    assert part.num_rows == len(y) and part.known_rows() == len(y)
    # training rows: the pass that learns the table's encoding counted them
    part = open_source(str(tmp_path / "a.csv"), target="y", exclude=["id"]).partitions()[0]
    assert part.known_rows() == len(y)


# -- errors ---------------------------------------------------------------------------------
def _error(data, exc=ValueError, **kw):
    with pytest.raises(exc) as info:
        open_source(data, **kw).to_arrays()
    return str(info.value)


def test_path_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "no files match 'nope*.csv'" in _error("nope*.csv", FileNotFoundError)
    assert "'gone.csv' not found" in _error("gone.csv", FileNotFoundError)
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "empty_dir" / "readme.txt").write_text("x")
    msg = _error("empty_dir", FileNotFoundError)
    assert "holds no data files" in msg and "readme.txt" in msg
    (tmp_path / "data.xlsx").write_text("x")
    msg = _error("data.xlsx")
    assert "'data.xlsx'" in msg and "unknown extension .xlsx" in msg


def test_csv_content_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = {"text.csv": "a,name,y\n1,x,2\n2,z,3\n",
             "gap.csv": "a,y\n1,2\n\n,3\n3,4\n5,inf\n",
             "empty.csv": "",
             "header.csv": "a,y\n",
             "ragged.csv": "a,y\n1,2\n3\n",
             "dupe.csv": "a,a,y\n1,2,3\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    msg = _error("gap.csv", target="y")  # blank lines count as lines
    assert "missing or non-finite values" in msg and "'gap.csv'" in msg
    assert "'y' (first on line 6)" in msg and "'a'" not in msg  # (a's gap is filled)
    assert "'empty.csv' is empty" in _error("empty.csv", target="y")
    assert "'header.csv' has a header but no data rows" in _error("header.csv", target="y")
    assert "'ragged.csv' line 3: 1 fields, but the header has 2" in _error("ragged.csv",
                                                                              target="y")
    assert "duplicated: ['a']" in _error("dupe.csv", target="y")
    msg = _error("text.csv", target="q")
    assert "target column 'q' is not in 'text.csv'; available columns: a, name, y" in msg
    assert "['zz'] not in 'text.csv'" in _error("text.csv", target="y", columns=["zz"])
    assert "no input columns besides the target 'y'" in _error("text.csv", target="y",
                                                               exclude=["a", "name"])


def test_csv_error_after_the_first_block_names_the_line(tmp_path):
    rows = "".join(f"{i},{2 * i},{i % 7}\n" for i in range(60_000))  # > 1 MiB before it
    (tmp_path / "late.csv").write_text("a,b,y\n" + rows + "1,oops,3\n2,3,bad\n")
    msg = _error(str(tmp_path / "late.csv"), target="y")
    assert "'b' (e.g. 'oops' on line 60002)" in msg and "'a'" not in msg


def test_columns_differ_between_files(tmp_path):
    pq.write_table(pa.table({"a": [1.0, 2.0], "y": [1, 2]}), tmp_path / "p1.parquet")
    pq.write_table(pa.table({"a": [1.0, 3.0], "b": [1, 2], "y": [1, 2]}),
                   tmp_path / "p2.parquet")
    msg = _error(str(tmp_path / "p*.parquet"), target="y")
    assert "p2.parquet" in msg and "differ from those of" in msg and "extra ['b']" in msg


def test_parquet_and_frame_value_errors(tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    pq.write_table(pa.table({"a": [1.0, 2.0], "s": [None, "v"], "y": [1, 2]}),
                   tmp_path / "s.parquet")
    pq.write_table(pa.table({"a": [1.0, 2.0, None], "y": [1, 2, 3]}), tmp_path / "n.parquet")
    assert open_source(str(tmp_path / "s.parquet"), target="y").encoding.names == [
        "a", "s=v", "s (missing)"]
    assert open_source(str(tmp_path / "n.parquet"), target="y").encoding.names == [
        "a", "a (missing)"]
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert "could not read" in _error(str(tmp_path / "bad.parquet"))
    df = pd.DataFrame({"a": [1.0, 2.0, np.inf], "o": pd.Series([1, "q", 2], dtype=object),
                       "y": [1.0, 2.0, 3.0]})
    assert "column 'o' of the DataFrame mixes value types (int, str)" in _error(df, target="y")
    assert "'a' (first at position 2)" in _error(df, target="y", exclude=["o"])
    msg = _error(dd.from_pandas(df[["a", "y"]], npartitions=2), target="y")
    assert "dask partition 1" in msg and "'a' (first at position 0)" in msg
    msg = _error((np.array([[1.0, 2.0], [3.0, np.nan]]), np.ones(2)))
    assert "X[:, 1] (first at index 1)" in msg
    assert "rows but y has" in _error((np.ones((3, 2)), np.ones(2)))
    assert "for arrays pass (X, y)" in _error((np.ones((3, 2)), np.ones(3)), target="y")


# -- Standardizer ---------------------------------------------------------------------------
def test_fit_matches_numpy_and_state_keeps_its_keys(xy):
    X, y = xy
    s = Standardizer.fit(X, y)
    _close(s.x_mean, X.mean(0), X.std(0), 1e-14)
    np.testing.assert_allclose(s.x_scale, X.std(0), rtol=1e-14)
    assert s.y_mean == pytest.approx(y.mean(), rel=1e-14)
    assert s.y_scale == pytest.approx(y.std(), rel=1e-14)
    state = s.state()
    assert set(state) == {"x_mean", "x_scale", "y_mean", "y_scale"}
    t = Standardizer.from_state(state)
    np.testing.assert_array_equal(t.transform_x(X), s.transform_x(X))
    saved_today = {"x_mean": [1.0, 2.0], "x_scale": [3.0, 4.0], "y_mean": 5.0, "y_scale": 6.0}
    old = Standardizer.from_state(saved_today)
    np.testing.assert_allclose(old.transform_x([[4.0, 10.0]]), [[1.0, 2.0]])
    np.testing.assert_allclose(old.inverse_y(np.array([1.0]), np.array([2.0])),
                               ([11.0], [72.0]))


def test_constant_relative_to_magnitude():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, 2))
    y = rng.standard_normal(50)
    s = Standardizer.fit(X * 1e-13, y * 1e-13)  # small, not constant
    np.testing.assert_allclose(s.x_scale, X.std(0) * 1e-13, rtol=1e-13)
    assert s.y_scale == pytest.approx(y.std() * 1e-13, rel=1e-13)
    C = np.column_stack([np.full(50, 1e300), np.full(50, -3e-300), 1 + EPS * (X[:, 0] > 0)])
    s = Standardizer.fit(C)
    np.testing.assert_array_equal(s.x_scale, [1e300, 1.0, 1.0 + EPS])
    assert np.abs(s.transform_x(C)).max() <= 2 * EPS  # constant columns become ~0
    with pytest.raises(ValueError, match=r"y is constant.*standardize=False \(--no-standardize"):
        Standardizer.fit(X, np.full(50, 1e-200))
    with pytest.raises(ValueError, match="NaN or inf"):
        Standardizer.fit(np.array([[1.0], [np.nan]]))


@pytest.mark.parametrize("cut", [None, 1, 700])
def test_a_constant_column_in_a_wide_block_stays_constant(cut):
    """A real set's column holds one value in every training row. Summed row after row,
    its mean was off by 1.8e-17 at n = 2000 and the scaler divided by that: a test row
    1e-6 away became 5e10. Its minimum equals its maximum, so it is constant."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 20))
    X[:, 5] = -0.00043009
    X[:, 6] = 1.0 + 1e-9 * rng.standard_normal(2000)  # varies: standardised as usual
    chunks = [(X, None)] if cut is None else [(X[:cut], None), (X[cut:], None)]
    mx, _ = chunk_moments(chunks)
    assert mx.constant().tolist() == [j == 5 for j in range(20)]
    assert mx.means[5] == -0.00043009 and mx.stds[5] == 0.0
    assert mx.mins[5] == mx.maxs[5] == -0.00043009
    np.testing.assert_array_equal(mx.mins, X.min(0))
    np.testing.assert_array_equal(mx.maxs, X.max(0))
    s = Standardizer.from_moments(mx)
    assert s.x_scale[5] == 1.0
    assert s.x_scale[6] == pytest.approx(X[:, 6].std(), rel=1e-12)
    test = X[:3].copy()
    test[:, 5] = [-0.00043009, -0.00043009 + 1e-6, 0.99957]
    np.testing.assert_allclose(s.transform_x(test)[:, 5], [0.0, 1e-6, 1.0], atol=1e-15)


@FUZZ
@given(k=st.lists(st.integers(-300, 300), min_size=1, max_size=4),
       shift=st.integers(-3, 3), ky=st.integers(-300, 300), cut=st.integers(1, 60))
def test_scale_fuzz(k, shift, ky, cut):
    rng = np.random.default_rng(len(k) + 7 * cut)
    scales = 10.0 ** np.array(k, dtype=float)
    X = (rng.standard_normal((60, len(k))) + shift) * scales
    y = (rng.standard_normal(60) + shift) * 10.0 ** ky
    s = Standardizer.fit_chunks([(X[:cut], y[:cut]), (X[cut:], y[cut:])])
    assert np.isfinite(s.x_mean).all() and np.isfinite(s.x_scale).all()
    assert np.all(s.x_scale > 0) and np.isfinite([s.y_mean, s.y_scale]).all()
    np.testing.assert_allclose(s.x_scale / scales, (X / scales).std(0), rtol=1e-12)
    Z = s.transform_x(X)
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(Z.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(Z.std(0), 1, rtol=1e-12)
    back = s.inverse_x(Z)
    assert np.all(np.abs(back - X) <= 32 * EPS * np.abs(X).max(0))
    t = s.transform_y(y)
    assert np.all(np.abs(s.inverse_y(t) - y) <= 32 * EPS * np.abs(y).max())
    with np.errstate(over="ignore"):
        _, v = s.inverse_y(t, np.full(60, 0.25))
    log_v = math.log(0.25) + 2 * math.log(s.y_scale)  # of the exact variance
    top = math.log(np.finfo(np.float64).max)
    if math.log(1e-300) < log_v < top - 1e-9:
        np.testing.assert_allclose(np.log(v), log_v, rtol=1e-14, atol=1e-14)
    elif log_v > top + 1e-9:  # beyond float64 whatever the order of operations
        assert np.all(v == np.inf)
    elif log_v < 0:
        assert np.all((v >= 0) & (v < 1e-299))
    assert np.all(np.isfinite(s.inverse_std(np.full(60, 0.5))))


def test_variance_does_not_overflow_on_the_way_back():
    s = Standardizer(np.zeros(1), np.ones(1), 0.0, 1e200)
    _, v = s.inverse_y(np.zeros(1), np.array([1e-250]))
    assert v[0] == pytest.approx(1e150, rel=1e-14)  # y_scale**2 alone would overflow
    assert s.inverse_x(s.transform_x(np.array([[1.7e308]])))[0, 0] == 1.7e308


def test_moments_merge_edges():
    a = Moments.of(np.arange(6.0).reshape(3, 2))
    assert a.merge(Moments.empty(2)) is a and Moments.empty(2).merge(a) is a
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(Moments.empty(3))
    np.testing.assert_allclose(Moments.combine([a, a]).stds, a.stds)
    with pytest.raises(ValueError, match="no rows"):
        Standardizer.fit_chunks([])


def test_per_partition_moments_merge_in_any_order(tmp_path, xy):
    X, y = xy
    pq.write_table(_table(X, y, ids=False), tmp_path / "a.parquet", row_group_size=20)
    parts = open_source(str(tmp_path / "a.parquet"), target="y").partitions()
    # what each worker would return for its partition, merged in reverse order
    per = [chunk_moments(pickle.loads(pickle.dumps(p)).chunks(7)) for p in parts][::-1]
    mx = Moments.combine(m for m, _ in per)
    my = Moments.combine(m for _, m in per)
    s, ref = Standardizer.from_moments(mx, my), Standardizer.fit(X, y)
    assert mx.n == len(y)
    np.testing.assert_allclose(s.x_scale, ref.x_scale, rtol=1e-12)
    _close(s.x_mean, ref.x_mean, ref.x_scale)
    assert abs(s.y_scale / ref.y_scale - 1) <= 1e-12


def test_standardizer_from_a_file_stream(tmp_path, xy):
    X, y = xy
    pv.write_csv(_table(X, y), tmp_path / "a.csv")
    src = open_source(str(tmp_path / "a.csv"), target="y", keep=["id"])
    s = Standardizer.fit_chunks(src.chunks(10))
    ref = Standardizer.fit(X, y)
    np.testing.assert_allclose(s.x_scale, ref.x_scale, rtol=1e-12)
    _close(s.x_mean, ref.x_mean, ref.x_scale)


# -- writers --------------------------------------------------------------------------------
@FUZZ
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64),
                       min_size=1, max_size=40))
def test_csv_floats_round_trip_exactly(tmp_path, values):
    v = np.array(values)
    path = tmp_path / "f.csv"
    n = write_table(path, [{"v": v[:5], "w": -v[:5]}, {"v": v[5:], "w": -v[5:]}])
    assert n == len(v)
    back = pv.read_csv(path, convert_options=pv.ConvertOptions(
        column_types={"v": pa.float64(), "w": pa.float64()}))
    np.testing.assert_array_equal(back.column("v").to_numpy(), v)
    np.testing.assert_array_equal(back.column("w").to_numpy(), -v)


@pytest.mark.parametrize("name", ["p.csv", "p.csv.gz", "p.parquet", "p.pq"])
def test_writer_round_trip(tmp_path, xy, name):
    X, y = xy
    src = open_source((X, y))
    ids = pa.array([f"r{i}" for i in range(len(y))])
    chunks = ({"id": ids.slice(a, len(c)), "mean": c[:, 0], "std": np.abs(c[:, 1])}
              for a, (c, _) in zip(range(0, len(y), 30), src.chunks(30)))
    path = tmp_path / name
    assert write_table(path, chunks, columns=["id", "mean", "std"]) == len(y)
    if name.endswith((".parquet", ".pq")):
        back = pq.read_table(path)
        assert pq.ParquetFile(path).metadata.num_row_groups == 4
    else:
        back = pv.read_csv(path)
        if name.endswith(".csv"):
            assert path.read_text().startswith("id,mean,std\n")
    assert back.column_names == ["id", "mean", "std"]
    assert back.column("id").to_pylist() == ids.to_pylist()
    np.testing.assert_array_equal(back.column("mean").to_numpy(), X[:, 0])
    src_back = open_source(str(path), keep=["id"], columns=["mean", "std"])
    np.testing.assert_array_equal(src_back.to_arrays()[0][:, 1], np.abs(X[:, 1]))


@pytest.mark.parametrize("name", ["keep.csv", "keep.parquet"])
def test_interrupted_write_leaves_the_old_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"precious")

    def chunks():
        yield {"a": np.arange(3.0)}
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_table(path, chunks())
    assert path.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == [name]


def test_writer_stdout_and_errors(tmp_path, capsysbinary):
    assert write_table("-", [{"m": np.array([0.1, 2.0])}, {"m": np.array([1e-300])}]) == 3
    assert capsysbinary.readouterr().out == b"m\n0.1\n2\n1e-300\n"
    with pytest.raises(ValueError, match="cannot tell the format of"):
        write_table(tmp_path / "x.xlsx", [{"a": np.ones(2)}])
    with pytest.raises(ValueError, match="chunk 1 has columns"):
        write_table(tmp_path / "x.csv", [{"a": np.ones(2)}, {"b": np.ones(2)}])
    with pytest.raises(ValueError, match="different lengths"):
        write_table(tmp_path / "x.csv", [{"a": np.ones(2), "b": np.ones(3)}])
    assert not (tmp_path / "x.csv").exists()
    assert write_table(tmp_path / "e.csv", [], columns=["mean", "std"]) == 0
    assert (tmp_path / "e.csv").read_text() == "mean,std\n"
