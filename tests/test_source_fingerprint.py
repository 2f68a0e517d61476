"""Every pass over a source reads the same data (issue 31, case 3): a file of the source
that changes after the source was opened — between two passes of a fit — stops the read
with an error naming the file, instead of mixing two data sets in one model."""

import gzip
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from parquet_data import make_data, write_parquet

import gpscale
from gpscale.io import open_source


def _parquet_dir(tmp_path, n=400, parts=8):
    X, y = make_data(n)
    return write_parquet(tmp_path / "parts", X, y, parts=parts, row_group=25)


def _rewrite(path, rows, seed=1):
    """Replace the Parquet file ``path`` by ``rows`` other rows (same columns), as a job
    writing new data into the folder would."""
    X, y = make_data(rows, seed=seed)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y}), path,
                   row_group_size=25)


def _one_pass(src):
    return sum(len(X) for X, _ in src.chunks(rows=64))


def _error_type():
    return getattr(gpscale.io, "SourceChangedError", ValueError)


def test_parquet_file_replaced_between_passes_is_refused(tmp_path):
    folder = _parquet_dir(tmp_path)
    src = open_source(str(folder), target="y")
    assert _one_pass(src) == 400
    victim = folder / "part-5.parquet"
    _rewrite(victim, 60)  # a different row count: the footer says so
    with pytest.raises(ValueError, match=r"part-5\.parquet.*changed") as err:
        _one_pass(src)
    assert isinstance(err.value, _error_type())
    assert "50 rows when opened, 60 now" in str(err.value)


def test_same_size_rewrite_is_caught_by_its_modification_time(tmp_path):
    folder = _parquet_dir(tmp_path)
    src = open_source(str(folder), target="y")
    _one_pass(src)
    victim = folder / "part-2.parquet"
    _rewrite(victim, 50, seed=7)  # same row count, other values
    st = os.stat(victim)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # coarse clocks
    with pytest.raises(ValueError, match=r"part-2\.parquet.*changed"):
        _one_pass(src)


def test_unchanged_source_reads_alike_on_every_pass(tmp_path):
    folder = _parquet_dir(tmp_path)
    src = open_source(str(folder), target="y")
    a = np.concatenate([X for X, _ in src.chunks(rows=64)])
    b = np.concatenate([X for X, _ in src.chunks(rows=64)])
    np.testing.assert_array_equal(a, b)


def test_rff_fit_refuses_a_file_replaced_after_the_source_was_opened(tmp_path):
    """The fit's passes (moments, statistics) come after opening: the replaced file
    is named, nothing is fitted to a mix of old and new rows."""
    folder = _parquet_dir(tmp_path)
    src = open_source(str(folder), target="y")
    _rewrite(folder / "part-3.parquet", 500, seed=3)
    with pytest.raises(ValueError, match=r"part-3\.parquet.*changed") as err:
        gpscale.fit(src, method="rff", num_features=16, max_iter=3)
    assert isinstance(err.value, _error_type())


def test_csv_file_appended_to_between_passes_is_refused(tmp_path):
    path = tmp_path / "rows.csv"
    # a: not a row counter, which the survey would refuse as an id
    path.write_text("a,b,y\n" + "".join(f"{i % 13},{i % 7},{i * 0.5}\n" for i in range(100)))
    src = open_source(str(path), target="y")
    assert _one_pass(src) == 100
    with open(path, "a") as f:
        f.write("100,2,50.0\n")
    with pytest.raises(ValueError, match=r"rows\.csv.*changed.*bytes"):
        _one_pass(src)


def test_removed_file_is_named(tmp_path):
    folder = _parquet_dir(tmp_path)
    src = open_source(str(folder), target="y")
    os.remove(folder / "part-7.parquet")
    with pytest.raises(ValueError, match=r"part-7\.parquet' was removed"):
        _one_pass(src)


def test_gzip_data_named_csv_is_read(tmp_path):
    """Issue 31 case 8: gzip bytes under a ``.csv`` name are read as the CSV they hold
    (pyarrow decompresses by extension only, and parsed the bytes as text)."""
    text = "a,b,y\n" + "".join(f"{i},{i % 5},{i * 0.25}\n" for i in range(50))
    path = tmp_path / "rows.csv"
    path.write_bytes(gzip.compress(text.encode()))
    X, y = open_source(str(path), target="y").to_arrays()
    assert X.shape == (50, 2)
    np.testing.assert_allclose(y, np.arange(50) * 0.25)
