"""A dask worker that dies during a fit: the fit on the cluster either gives the model the
in-process fit gives (the scheduler reruns the lost tasks; every task is a pure function
of its partition) or fails with a clear error — never a different model. A real
LocalCluster of worker processes, one of which is killed (SIGKILL) while it runs a task."""

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import gpscale

distributed = pytest.importorskip("distributed")

SRC = Path(gpscale.__file__).resolve().parents[1]
#: the fit's options: enough passes (one task per partition each) to be killed during
OPTIONS = {"num_features": 32, "max_iter": 2, "subsample": None}


def _data(n=1500, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(n)
    return X, y


def _source(tmp_path):
    """Three Parquet files: three partitions, read on the workers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    X, y = _data()
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(y)), 3)):
        pq.write_table(pa.table({"a": X[rows, 0], "b": X[rows, 1], "c": X[rows, 2],
                                 "y": y[rows]}), folder / f"p{i}.parquet")
    return str(folder)


def _kill_a_busy_worker(client, done, killed, task="partition_gradients"):
    """Wait until a worker runs a ``task`` of the fit (a gradient pass: the middle of
    L-BFGS), then SIGKILL that worker's process."""
    pids = client.run(os.getpid)
    while not done.is_set():
        busy = [w for w, keys in client.processing().items()
                if w in pids and any(task in str(k) for k in keys)]
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            killed.append(busy[0])
            return
        time.sleep(0.005)


def _import_gpscale():
    import gpscale  # noqa: F401


def test_a_worker_killed_during_a_fit_gives_the_same_model_or_a_clear_error(tmp_path):
    data = _source(tmp_path)
    env = {"PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env=env) as cluster, \
            distributed.Client(cluster) as client:
        warm = [client.submit(_import_gpscale, workers=[w], pure=False)
                for w in client.scheduler_info()["workers"]]  # they import while we fit
        here = gpscale.fit(data, target="y", method="rff", kernel="rbf-ard", **OPTIONS)
        distributed.wait(warm)
        del warm  # nothing of ours left on the workers to recompute after the kill
        done, killed = threading.Event(), []
        killer = threading.Thread(target=_kill_a_busy_worker, args=(client, done, killed))
        killer.start()
        try:
            there = gpscale.fit(data, target="y", method="rff", kernel="rbf-ard",
                                scheduler=client, **OPTIONS)
        except ConnectionError as err:  # the other allowed outcome: a clear error
            message = str(err)
            assert "\n" not in message and "worker" in message.lower(), message
            return
        finally:
            done.set()
            killer.join()
    assert killed, "no worker was killed during the fit (it ended first)"
    X, _ = _data(50, seed=9)
    for a, b in zip(there.predict(X, return_std=True), here.predict(X, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert len(there.result.history) == len(here.result.history)
    assert there.result.objective == pytest.approx(here.result.objective, rel=1e-10)
    for p, q in zip(there.model.state_dict().values(), here.model.state_dict().values()):
        if torch.is_tensor(p) and p.is_floating_point():
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12)
