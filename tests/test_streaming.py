"""Training from rows that are not in memory: CSV / Parquet files through gpscale.fit and
the command line, in this process and on a real dask LocalCluster (2 worker processes),
each against the in-memory path at the same hyperparameters."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from parquet_data import make_data, write_parquet

import gpscale
from gpscale.models import FeatureGP

distributed = pytest.importorskip("distributed")
SRC = Path(gpscale.__file__).resolve().parents[1]
RFF = {"num_features": 32, "max_iter": 4, "seed": 3}


def in_memory_twin(pred, X, y):
    """A FeatureGP on the standardised rows in memory with the streamed model's θ."""
    Xs = torch.as_tensor(pred.scaler.transform_x(X))
    ys = torch.as_tensor(pred.scaler.transform_y(y))
    m = pred.model
    twin = FeatureGP(m.features, Xs, ys, weights=m.weights_kind)
    state = {k: v for k, v in m.state_dict().items() if not k.startswith("stat_")}
    missing, unexpected = twin.load_state_dict(state, strict=False)
    assert sorted(missing) == ["X", "y"] and not unexpected
    return twin, Xs


@pytest.fixture(scope="module")
def client():
    env = {"PYTHONPATH": str(SRC)}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env=env) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_rff_from_parquet_files_equals_in_memory_at_the_same_theta(tmp_path):
    X, y = make_data(700)
    folder = write_parquet(tmp_path / "train", X, y)
    pred = gpscale.fit(str(folder / "*.parquet"), target="y", method="rff", **RFF)
    assert pred.feature_names == ["a", "b", "c"] and pred.target_name == "y"
    assert pred.model.n == 700 and pred.model.rows is None  # frozen: no rows kept
    ref = gpscale.preprocessing.Standardizer.fit(X, y)
    np.testing.assert_allclose(pred.scaler.x_mean, ref.x_mean, rtol=1e-12)
    np.testing.assert_allclose(pred.scaler.y_scale, ref.y_scale, rtol=1e-12)
    twin, Xs = in_memory_twin(pred, X, y)
    with torch.no_grad():
        torch.testing.assert_close(pred.model.nlml(), twin.nlml(), rtol=1e-10, atol=0)
        for a, b in zip(pred.model.predict(Xs[:50], include_noise=True),
                        twin.predict(Xs[:50], include_noise=True)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_rff_on_a_local_cluster_equals_in_process(client, tmp_path):
    """The statistics and gradient passes as tasks on 2 worker processes (Parquet row
    groups read there) give the same fit as the same passes in this process."""
    X, y = make_data(900, seed=1)
    folder = write_parquet(tmp_path / "train", X, y, parts=2, row_group=200)
    here = gpscale.fit(folder, target="y", method="rff", **RFF)
    there = gpscale.fit(folder, target="y", method="rff", scheduler=client, **RFF)
    assert there.result.n_evals == here.result.n_evals
    np.testing.assert_allclose(there.result.objective, here.result.objective, rtol=1e-10)
    Xt, _ = make_data(40, seed=2)
    for a, b in zip(there.predict(Xt, return_std=True), here.predict(Xt, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-9)
    assert len(client.scheduler_info()["workers"]) == 2  # the caller's cluster stays up


def test_in_memory_arrays_on_a_cluster_and_refusals(client):
    X, y = make_data(300, seed=4)
    there = gpscale.fit(X, y, method="rff", scheduler=client, **RFF)
    here = gpscale.fit(X, y, method="rff", **RFF)
    np.testing.assert_allclose(there.predict(X[:20]), here.predict(X[:20]), rtol=1e-8)
    with pytest.raises(ValueError, match="trains in this process"):
        gpscale.fit(X, y, method="cholqr-vfe", scheduler=client)
    with pytest.raises(ValueError, match="target="):
        gpscale.fit(X, y, method="rff", target="y")


def test_row_hungry_methods_load_a_file_source(tmp_path):
    X, y = make_data(120, seed=5)
    folder = write_parquet(tmp_path / "train", X, y, parts=2, row_group=50)
    from_files = gpscale.fit(folder, target="y", method="exact", max_iter=5)
    in_memory = gpscale.fit(X, y, method="exact", max_iter=5)
    assert from_files.feature_names == ["a", "b", "c"]
    np.testing.assert_allclose(from_files.predict(X[:10]), in_memory.predict(X[:10]),
                               rtol=1e-8)
    with pytest.raises(ValueError, match="no target"):
        gpscale.fit(folder, method="exact")


def _gpscale(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "gpscale.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_fit_on_parquet_with_workers_and_streamed_parquet_predictions(tmp_path):
    X, y = make_data(600, seed=6)
    write_parquet(tmp_path / "train", X, y)
    Xt, yt = make_data(70, seed=7)
    pq.write_table(pa.table({"c": Xt[:, 2], "a": Xt[:, 0],
                             "b": Xt[:, 1], "y": yt}), tmp_path / "test.parquet")
    fit = _gpscale("fit", "--data", "train/*.parquet", "--target", "y", "--method", "rff",
                   "--workers", "2", "--max-iter", "4", "--seed", "3", "--option",
                   "num_features=48", "--option", "refine=0", "--out", "m.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    assert gpscale.load(tmp_path / "m.pt").model.features.num_features == 48
    pred = _gpscale("predict", "--model", "m.pt", "--data", "test.parquet", "--out",
                    "p.parquet", cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.column_names == ["mean", "std"] and table.num_rows == 70
    model = gpscale.load(tmp_path / "m.pt")
    mean, std = model.predict(Xt, return_std=True)  # columns reordered by name
    np.testing.assert_allclose(table["mean"].to_numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(table["std"].to_numpy(), std, rtol=1e-12)
    rmse = float(np.sqrt(np.mean((mean - yt) ** 2)))
    assert rmse < 0.5 * float(np.std(yt)), rmse
    # the output may not be an input
    again = _gpscale("predict", "--model", "m.pt", "--data", "test.parquet", "--out",
                     "test.parquet", cwd=tmp_path)
    assert again.returncode != 0 and "is the input file" in again.stderr
    assert pq.read_table(tmp_path / "test.parquet").num_rows == 70


def test_cli_admm_hocv_with_workers_equals_the_fit_in_process(tmp_path):
    """``gpscale fit --method admm-hocv --workers 2`` with recomputed kernel blocks: its
    products run on the local cluster, and the model predicts as the in-process one."""
    X, y = make_data(300, seed=9)
    write_parquet(tmp_path / "train", X, y)
    opts = ["memory=chunked", "block=64", "max_iter=3"]
    fit = _gpscale("fit", "--data", "train/*.parquet", "--target", "y", "--method",
                   "admm-hocv", "--workers", "2", "--seed", "0",
                   *[a for o in opts for a in ("--option", o)], "--out", "m.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    there = gpscale.load(tmp_path / "m.pt")
    here = gpscale.fit(tmp_path / "train", target="y", method="admm-hocv", seed=0,
                       memory="chunked", block=64, max_iter=3)
    assert [r.get("cv_loss") for r in there.result.history] == pytest.approx(
        [r.get("cv_loss") for r in here.result.history], rel=1e-6)
    Xt, _ = make_data(40, seed=10)
    np.testing.assert_allclose(there.predict(Xt), here.predict(Xt), rtol=1e-6, atol=1e-8)


def test_sample_rows_is_uniform_seeded_and_the_same_on_a_cluster(client, tmp_path):
    from gpscale.io import open_source
    from gpscale.io.sample import sample_rows

    X, y = make_data(3000, seed=8)
    parts = open_source(write_parquet(tmp_path / "s", X, y, parts=3, row_group=250),
                        target="y").partitions()
    Xs, ys = sample_rows(parts, 600, seed=1)
    again = sample_rows(parts, 600, seed=1, client=client)
    np.testing.assert_array_equal(Xs, again[0])
    np.testing.assert_array_equal(ys, again[1])
    # Bernoulli(0.2) over 3000 rows: the size is within 6 sd of 600 (sd = 21.9)
    assert abs(len(ys) - 600) < 6 * 21.9
    # every sampled row is a row of the data, and the sample covers the whole range
    rows = {tuple(r) for r in np.column_stack([X, y]).round(12)}
    assert all(tuple(r) in rows for r in np.column_stack([Xs, ys]).round(12))
    assert Xs[:, 0].min() < -1.8 and Xs[:, 0].max() > 1.8
    assert len(sample_rows(parts, 10_000, seed=1)[1]) == 3000  # all rows when m >= n
    with pytest.raises(ValueError, match="integer >= 1"):
        sample_rows(parts, 0)


def test_rff_subsample_learns_theta_on_the_sample_then_refines_on_all_rows(tmp_path):
    """subsample=m: the first phase is exactly an rff fit on the sampled rows; the model
    then holds the statistics of every row, and refine=0 keeps the sample's θ."""
    X, y = make_data(1500, seed=9)
    folder = write_parquet(tmp_path / "t", X, y, parts=2, row_group=300)
    opts = {"num_features": 32, "max_iter": 6, "seed": 3}
    pred = gpscale.fit(folder, target="y", method="rff", subsample=400, refine=0, **opts)
    assert pred.model.n == 1500
    phases = {h.get("phase") for h in pred.result.history}
    assert phases == {None}  # refine=0: one phase, on the sample
    # the same θ from fitting the sampled rows directly
    from gpscale.io import open_source
    from gpscale.io.sample import sample_rows

    Xr, yr = sample_rows(open_source(folder, target="y").partitions(), 400, seed=3)
    Xs = torch.as_tensor(pred.scaler.transform_x(Xr))
    ys = torch.as_tensor(pred.scaler.transform_y(yr))
    from gpscale.features import RandomFourierFeatures
    from gpscale.train import fit_lbfgs

    feats = RandomFourierFeatures(3, 32, seed=3)
    direct = FeatureGP(feats, Xs, ys, noise=0.1)
    fit_lbfgs(direct, max_iter=6, method="rff")
    torch.testing.assert_close(pred.model.features.lengthscale, feats.lengthscale,
                               rtol=1e-10, atol=0)
    torch.testing.assert_close(pred.model.noise, direct.noise, rtol=1e-10, atol=0)
    refined = gpscale.fit(folder, target="y", method="rff", subsample=400, refine=2, **opts)
    assert {h["phase"] for h in refined.result.history} == {"subsample", "all rows"}
    assert refined.result.objective <= float(pred.model.nlml()) + 1e-9
    with pytest.raises(ValueError, match="subsample"):
        gpscale.fit(X, y, method="rff", subsample=1)


@pytest.mark.parametrize("method", ["admm-kfold", "admm-consensus"])
def test_admm_folds_as_tasks_on_the_cluster_equal_in_process(client, method):
    """K-fold and consensus GPCV-ADMM send their folds to the cluster: the same fit."""
    X, y = make_data(160, seed=10)
    opts = {"max_iter": 3, "seed": 1}
    here = gpscale.fit(X, y, method=method, **opts)
    there = gpscale.fit(X, y, method=method, scheduler=client, **opts)
    assert there.result.n_evals == here.result.n_evals
    np.testing.assert_allclose(there.result.objective, here.result.objective, rtol=1e-10)
    np.testing.assert_allclose(there.predict(X[:15]), here.predict(X[:15]), rtol=1e-9)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_fit_against_a_dask_scheduler_and_worker_started_by_hand(tmp_path):
    """The README's recipe: `dask scheduler`, `dask worker ADDRESS`, then
    `gpscale fit ... --scheduler ADDRESS` — the same model as the in-process fit."""
    dask_cli = Path(sys.executable).with_name("dask")
    if not dask_cli.exists():
        pytest.skip("the dask command is not installed next to this Python")
    X, y = make_data(500, seed=11)
    write_parquet(tmp_path / "train", X, y)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env,
             "cwd": tmp_path}
    scheduler = subprocess.Popen([str(dask_cli), "scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--no-dashboard"], **quiet)
    worker = subprocess.Popen([str(dask_cli), "worker", address, "--nworkers", "2",
                               "--nthreads", "1", "--no-dashboard"], **quiet)
    try:
        with distributed.Client(address, timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
        args = ["fit", "--data", "train/*.parquet", "--target", "y", "--method", "rff",
                "--max-iter", "4", "--seed", "3", "--option", "num_features=32"]
        there = _gpscale(*args, "--scheduler", address, "--out", "there.pt", cwd=tmp_path)
        assert there.returncode == 0, there.stderr
        here = _gpscale(*args, "--out", "here.pt", cwd=tmp_path)
        assert here.returncode == 0, here.stderr
        with distributed.Client(address, timeout=60) as c:  # the passes ran there
            ran = c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        assert any("partition_statistics" in name for name in ran), ran
    finally:
        for proc in (worker, scheduler):
            proc.terminate()
            proc.wait(timeout=60)
    a, b = gpscale.load(tmp_path / "there.pt"), gpscale.load(tmp_path / "here.pt")
    Xt, _ = make_data(40, seed=12)
    np.testing.assert_allclose(a.predict(Xt), b.predict(Xt), rtol=1e-10, atol=1e-12)
