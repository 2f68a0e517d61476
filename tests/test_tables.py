"""Tables as they come (issue 47): columns chosen by name, categories one-hot, missing
values filled and marked, dates as days, ids and unusable columns refused before any
method is chosen; the encoding saved with the model and applied to raw prediction
tables at every door (gpscale.fit, the CLI in a subprocess, the estimator)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpscale
from gpscale.io import open_source
from gpscale.io.encoding import UnseenLevelWarning
from gpscale.io.survey import MissingTargetWarning, survey
from gpscale.kernels import Exchangeable

pd = pytest.importorskip("pandas")

SRC = Path(gpscale.__file__).resolve().parents[1]
FIT = {"max_iter": 5, "seed": 0}


def _frame(n=60, seed=0):
    """A small messy table: a text category, a numeric column with gaps, a date, an id."""
    rng = np.random.default_rng(seed)
    city = rng.choice(["Austin", "Dallas", "El Paso"], n)
    size = rng.uniform(50, 300, n)
    size[rng.random(n) < 0.2] = np.nan
    day = pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 400, n), unit="D")
    effect = {"Austin": 3.0, "Dallas": 1.0, "El Paso": -2.0}
    y = np.array([effect[c] for c in city]) + np.nan_to_num(size, nan=150) / 100
    return pd.DataFrame({"id": [f"row{i}" for i in range(n)], "city": city, "size": size,
                         "sold": day.strftime("%Y-%m-%d"), "price": y})


def test_encoding_matches_a_hand_made_reference(tmp_path):
    df = pd.DataFrame({"c": ["b", "a", None, "b"], "x": [1.0, np.nan, 3.0, 5.0],
                       "d": ["2020-01-03", "2020-01-01", None, "2020-01-11"],
                       "y": [1.0, 2.0, 3.0, 4.0]})
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        src = open_source(data, target="y")
        assert src.encoding.names == ["c=a", "c=b", "c (missing)", "x", "x (missing)", "d",
                                      "d (missing)"]
        X, y = src.to_arrays()
        mean_x, mean_d = 3.0, (2 + 0 + 10) / 3  # dates: days since 2020-01-01
        want = [[0, 1, 0, 1, 0, 2, 0], [1, 0, 0, mean_x, 1, 0, 0],
                [0, 0, 1, 3, 0, mean_d, 1], [0, 1, 0, 5, 0, 10, 0]]
        np.testing.assert_allclose(X, want, rtol=1e-15, atol=0)
        np.testing.assert_array_equal(y, df["y"])
        assert src.encoding.raw_columns() == [0, 1, 2, 4, 6]


def test_columns_and_exclude_choose_the_inputs_at_every_door(tmp_path):
    df = _frame()
    src = open_source(df, target="price", columns=["size", "city", "id"], exclude=["id"])
    assert src.feature_names == ["size", "city"]
    with pytest.raises(ValueError, match=r"columns: column\(s\) \['nope'\] not in"):
        open_source(df, target="price", columns=["nope"])
    p = gpscale.fit(df, target="price", exclude=["id", "sold"], **FIT)
    assert p.feature_names == ["city", "size"]
    with pytest.raises(ValueError, match="categorical: column"):
        gpscale.fit(df, target="price", exclude=["id"], categorical=["id"])


def test_an_id_column_is_refused_before_auto_chooses(tmp_path, monkeypatch):
    import gpscale.plan

    def no_choice(*_, **__):
        raise AssertionError("auto chose a method before the id column was refused")

    monkeypatch.setattr(gpscale.plan, "choose_method", no_choice)
    df = _frame(200)
    with pytest.raises(ValueError) as err:
        gpscale.fit(df, target="price", method="auto")
    msg = str(err.value)
    assert "'id' (200 distinct values in 200 rows)" in msg and "--exclude id" in msg


def test_save_load_unseen_levels_and_a_missing_column(tmp_path):
    df = _frame()
    p = gpscale.fit(df, target="price", exclude=["id"], **FIT)
    assert p.kernel_name == "rbf-ard"  # the default: ARD on the one-hot columns
    path = p.save(tmp_path / "m.pt")
    q = gpscale.load(path)
    assert q.inputs == p.inputs and q.input_names == p.input_names
    new = df.drop(columns=["price"]).iloc[:5][["sold", "size", "city"]].copy()  # reordered
    new["extra"] = 1.0
    np.testing.assert_allclose(q.predict(new), p.predict(df.iloc[:5]), rtol=1e-12)
    new.loc[new.index[0], "city"] = "Houston"
    with pytest.warns(UnseenLevelWarning, match=r"'city': levels \['Houston'\] not seen"):
        m, s = q.predict(new, return_std=True)
    assert np.isfinite(m).all() and np.isfinite(s).all()
    with pytest.raises(ValueError, match=r"\['size'\] not in"):
        q.predict(new.drop(columns=["size"]))
    assert "column 'size': number; missing values filled" in q.summary()


def test_the_categorical_kernel_by_name_saves_and_loads(tmp_path):
    df = _frame().drop(columns=["id"])
    p = gpscale.fit(df, target="price", kernel="rbf-ard-cat", **FIT)
    assert p.kernel_name == "rbf-ard-cat"
    assert sum(isinstance(k, Exchangeable) for k in p.kernel.modules()) == 1
    q = gpscale.load(p.save(tmp_path / "m.pt"))
    np.testing.assert_allclose(q.predict(df), p.predict(df), rtol=1e-12)
    with pytest.raises(ValueError, match="kernel 'rbf-ard-cat' is for tables with categ"):
        gpscale.fit(df.drop(columns=["city"]), target="price", kernel="rbf-ard-cat", **FIT)


def test_parquet_dictionary_and_pandas_category_give_the_same_model(tmp_path):
    df = _frame(40).drop(columns=["id", "sold"])
    df["size"] = df["size"].fillna(100.0)
    path = tmp_path / "t.parquet"
    table = pa.table({"city": pa.array(df["city"]).dictionary_encode(),
                      "size": df["size"].to_numpy(), "price": df["price"].to_numpy()})
    pq.write_table(table, path)
    assert pa.types.is_dictionary(pq.read_schema(path).field("city").type)
    cat = df.assign(city=df["city"].astype("category"))
    a = gpscale.fit(str(path), target="price", **FIT)
    b = gpscale.fit(cat, target="price", **FIT)
    assert a.inputs == b.inputs
    np.testing.assert_allclose(a.predict(cat), b.predict(cat), rtol=1e-10)


def test_streamed_levels_on_a_local_cluster_equal_the_in_memory_ones(tmp_path):
    distributed = pytest.importorskip("distributed")
    df = _frame(90)
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"p{i}.parquet")
        pq.write_table(pa.Table.from_pandas(df.iloc[30 * i:30 * i + 30],
                                            preserve_index=False), paths[-1])
    src = open_source([str(p) for p in paths], target="price", exclude=["id"])
    whole = open_source(df, target="price", exclude=["id"])
    for a, b in zip(src.encoding.codes, whole.encoding.codes, strict=True):
        assert (a.name, a.kind, a.levels, a.missing, a.origin) == \
            (b.name, b.kind, b.levels, b.missing, b.origin)
        assert a.mean == pytest.approx(b.mean, rel=1e-13)  # (sums in another order)
    kinds = src.encoding
    env = {"PYTHONPATH": str(SRC)}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env=env) as local, \
            distributed.Client(local) as client:
        remote = survey(src.partitions(), kinds, "price", client)
    here = survey(src.partitions(), kinds, "price")
    assert len(remote) == 3 and remote == here
    np.testing.assert_allclose(src.to_arrays()[0], whole.to_arrays()[0], rtol=1e-13)


def test_missing_targets_are_left_out_and_counted(tmp_path):
    df = _frame(50)
    df.loc[[3, 7, 11], "price"] = np.nan
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        with pytest.warns(MissingTargetWarning, match="3 of 50 rows"):
            src = open_source(data, target="price", exclude=["id"])
        X, y = src.to_arrays()
        assert src.num_rows() == 47 and len(X) == len(y) == 47 and np.isfinite(y).all()
        assert sum(p.num_rows for p in src.partitions()) == 47


def test_integer_codes_named_categorical_are_one_hot():
    df = pd.DataFrame({"code": [3, 1, 3, 2] * 5, "y": np.arange(20.0)})
    assert open_source(df, target="y").encoding is None  # plain numbers: no encoding
    src = open_source(df, target="y", categorical=["code"])
    assert src.encoding.names == ["code=1", "code=2", "code=3"]


@pytest.mark.parametrize("case", ["all missing", "one level", "many levels", "mixed types",
                                  "bad date"])
def test_hostile_tables_are_refused_clearly_or_handled(case, tmp_path):
    n = 100_000 if case == "many levels" else 40
    df = pd.DataFrame({"x": np.linspace(0, 1, n), "y": np.sin(np.arange(n))})
    if case == "all missing":
        df["z"] = np.nan
        with pytest.raises(ValueError, match=r"no values \(every row missing\): \['z'\]"):
            open_source(df, target="y")
    elif case == "one level":
        df["z"] = "only"
        src = open_source(df, target="y")
        assert src.encoding.names == ["x", "z=only"] and src.to_arrays()[0][:, 1].all()
    elif case == "many levels":
        df["z"] = [f"v{i}" for i in range(n)]
        path = tmp_path / "t.parquet"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path,
                       row_group_size=20_000)
        with pytest.raises(ValueError, match="'z' \\(more than 1000 distinct values"):
            open_source(str(path), target="y")
    elif case == "mixed types":
        df["z"] = pd.Series([1, "a"] * 20, dtype=object)
        with pytest.raises(ValueError, match="column 'z' of the DataFrame mixes value types"):
            open_source(df, target="y")
    else:
        df["z"] = ["2021-01-01"] * 39 + ["2021-13-45"]
        path = tmp_path / "t.csv"
        df.to_csv(path, index=False)
        with pytest.raises(ValueError, match="'2021-13-45' on line 41 .* is not an ISO date"):
            open_source(str(path), target="y")


def test_estimator_takes_a_data_frame():
    from gpscale.sklearn import GPRegressor

    df = _frame().drop(columns=["id"])
    X, y = df.drop(columns=["price"]), df["price"]
    est = GPRegressor(max_iter=5, seed=0).fit(X, y)
    assert list(est.feature_names_in_) == ["city", "size", "sold"]
    mean, std = est.predict(X.iloc[:7], return_std=True)
    assert mean.shape == (7,) and np.isfinite(std).all()
    assert est.score(X, y) > 0.5


def test_cli_fits_and_predicts_a_raw_table_in_a_subprocess(tmp_path, capsys, monkeypatch):
    from gpscale import cli

    df = _frame(80)
    df.loc[5, "price"] = np.nan
    df.to_csv(tmp_path / "train.csv", index=False)
    test = df.drop(columns=["price"]).iloc[:10][["sold", "id", "city", "size"]]
    test.to_csv(tmp_path / "test.csv", index=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--data", "train.csv", "--target", "price", "--out", "m.pt"]) == 1
    assert "--exclude id" in capsys.readouterr().err
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "gpscale.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)

    done = run("fit", "--data", "train.csv", "--target", "price", "--exclude", "id",
               "--max-iter", "5", "--out", "m.pt")
    assert done.returncode == 0, done.stderr
    assert "1 of 80 rows" in done.stderr and "days since 2020-01" in done.stdout
    pred = run("predict", "--model", "m.pt", "--data", "test.csv", "--keep", "id",
               "--out", "p.csv")
    assert pred.returncode == 0, pred.stderr
    out = pd.read_csv(tmp_path / "p.csv")
    assert list(out.columns) == ["id", "mean", "std"] and len(out) == 10
    assert cli.main(["info", "m.pt"]) == 0
    assert "column   'city': category, 3 levels one-hot" in capsys.readouterr().out


def test_warnings_name_unseen_missing_values_in_a_column_without_them():
    df = _frame().drop(columns=["id"])
    df["size"] = df["size"].fillna(120.0)
    p = gpscale.fit(df, target="price", **FIT)
    new = df.iloc[:3].copy()
    new.loc[new.index[0], "size"] = np.nan
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        p.predict(new)
    assert any("'size' has 1 missing value(s)" in str(w.message) for w in got)
