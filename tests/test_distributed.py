"""gpscale.parallel and the passes it runs: the feature statistics and their gradient
over row partitions, kernel products of the exact GP, fold maps and connecting,
in-process and on a real LocalCluster (2 worker processes), against dense references."""

from __future__ import annotations

import math
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import gpscale  # noqa: E402
from gpscale.features import NeuralFeatures, RandomFourierFeatures, ScaledFeatures  # noqa: E402
from gpscale.kernels import cluster_operator as cop  # noqa: E402
from gpscale.models import feature_stats as fs  # noqa: E402
from gpscale.parallel import cluster, reduce  # noqa: E402
from gpscale.preprocessing import Standardizer  # noqa: E402
from gpscale.threads import thread_limit  # noqa: E402

SRC = Path(gpscale.__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
D = 4
LOG_2PI = math.log(2 * math.pi)


# -- partitions satisfying gpscale.io's protocol (importable on the workers) ----------

class ArrayPartition:
    def __init__(self, X, y):
        self.X, self.y = np.asarray(X), np.asarray(y)
        self.num_rows = len(self.X)

    def chunks(self, rows):
        for s in range(0, self.num_rows, rows):
            yield self.X[s : s + rows], self.y[s : s + rows]


class ParquetPartition:
    """One Parquet file; only the path travels. ``forbid_pid``: fail if read there."""

    def __init__(self, path, forbid_pid=None):
        self.path, self.forbid_pid = str(path), forbid_pid
        self.num_rows = pq.ParquetFile(self.path).metadata.num_rows

    def chunks(self, rows):
        if self.forbid_pid == os.getpid():
            raise AssertionError(f"{self.path} read in the client process")
        for batch in pq.ParquetFile(self.path).iter_batches(batch_size=rows):
            cols = [batch.column(i).to_numpy() for i in range(batch.num_columns)]
            yield np.column_stack(cols[:-1]), cols[-1]


def make_rows(seed, m, forbid_pid=None):
    if forbid_pid == os.getpid():
        raise AssertionError("delayed rows computed in the client process")
    return make_data(m, seed)


def make_frame(seed, m, forbid_pid=None):
    import pandas as pd

    X, y = make_rows(seed, m, forbid_pid)
    return pd.DataFrame({**{f"x{j}": X[:, j] for j in range(D)}, "target": y})


def frame_to_xy(df):
    return df.drop(columns="target").to_numpy(), df["target"].to_numpy()


class DelayedPartition:
    """A partition of a dask collection: on a cluster its ``delayed`` must compute it on
    a worker; ``chunks`` (the in-process path) must run in the client process."""

    def __init__(self, seed, m, frame=False):
        self.seed, self.num_rows, self.client_pid = seed, m, os.getpid()
        make = make_frame if frame else make_rows
        self.delayed = dask.delayed(make, pure=True)(seed, m, self.client_pid)
        if frame:
            self.to_xy = frame_to_xy

    def chunks(self, rows):
        if os.getpid() != self.client_pid:
            raise AssertionError("chunks() called on a worker instead of the delayed")
        return ArrayPartition(*make_rows(self.seed, self.num_rows)).chunks(rows)


def _gpscale_file():
    return gpscale.__file__


def _scaled(item, scale):
    return item * scale


def _set_threads(n):
    torch.set_num_threads(n)
    return torch.get_num_threads()


def _torch_threads(item):
    return torch.get_num_threads()


def _fail(item):
    raise KeyError(f"fold {item} failed")


# -- data and dense references ---------------------------------------------------------

def make_data(n, seed=0):
    """Raw, unscaled columns (so the Standardizer matters) and a noisy target."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) * [1.0, 5.0, 0.1, 20.0] + [0.0, 10.0, -3.0, 100.0]
    y = 300 + 50 * np.sin(X[:, 0]) + X[:, 1] + 5 * rng.normal(size=n)
    return X, y


def split(X, y, cuts):
    edges = [0, *cuts, len(X)]
    return [ArrayPartition(X[a:b], y[a:b]) for a, b in zip(edges, edges[1:])]


def rff(p=64, seed=1):
    return RandomFourierFeatures(D, p, lengthscale=[0.7, 1.3, 1.0, 2.0], seed=seed)


def dense(features, X, y, scaler):
    Xs = torch.as_tensor(scaler.transform_x(X))
    return features(Xs), torch.as_tensor(scaler.transform_y(y))


def nlml_from(s, noise=0.1, weight=1.3):
    """FeatureGP's NLML (scalar W = w I) from (ΦᵀΦ, Φᵀy, yᵀy, n)."""
    p = s.gram.shape[0]
    L = torch.linalg.cholesky(s.gram + (noise / weight) * torch.eye(p, dtype=s.gram.dtype))
    beta = torch.linalg.solve_triangular(L, s.proj[:, None], upper=False)[:, 0]
    logdet = (s.n - p) * math.log(noise) + p * math.log(weight) \
        + 2 * torch.log(torch.diagonal(L)).sum()
    return 0.5 * ((s.yy - beta @ beta) / noise + logdet + s.n * LOG_2PI)


def nlml_dense(phi, y, noise=0.1, weight=1.3):
    n = phi.shape[0]
    L = torch.linalg.cholesky(weight * phi @ phi.mT + noise * torch.eye(n, dtype=phi.dtype))
    a = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
    return 0.5 * (a @ a + 2 * torch.log(torch.diagonal(L)).sum() + n * LOG_2PI)


def rel(a, b):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return float((a - b).norm() / b.norm())


# -- the cluster -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    # the workers import this worktree's gpscale and this test module (for the partition
    # classes); OMP_NUM_THREADS=2 makes torch start with 2 threads there, so the thread
    # test sees gpscale bring it to the worker's 1
    env = {"PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "OMP_NUM_THREADS": "2"}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env=env) as local, \
            distributed.Client(local) as c:
        yield c


@pytest.fixture(scope="module")
def data():
    X, y = make_data(3000)
    return X, y, Standardizer.fit(X, y), split(X, y, [412, 1500, 1537, 2301])


def test_workers_import_this_gpscale(client):
    files = set(client.run(_gpscale_file).values())
    assert files == {gpscale.__file__}
    assert len(client.scheduler_info()["workers"]) == 2


def test_distributed_statistics_equal_in_process_and_dense(client, data):
    X, y, scaler, parts = data
    f = rff()
    here = fs.statistics(f, parts, scaler=scaler, rows=200)
    there = fs.statistics(f, parts, scaler=scaler, rows=200, client=client)
    assert here.n == there.n == 3000
    for a, b in zip(there[:3], here[:3]):
        assert rel(a, b) <= 1e-12
    phi, ys = dense(f, X, y, scaler)
    with torch.no_grad():
        assert rel(here.gram, phi.mT @ phi) <= 1e-12
        assert rel(here.proj, phi.mT @ ys) <= 1e-12
    assert rel(here.yy, ys @ ys) <= 1e-12
    assert not here.gram.requires_grad


def test_same_tree_sum_bitwise_with_more_partitions_than_fan_in(client):
    X, y = make_data(1100, seed=3)
    scaler = Standardizer.fit(X, y)
    cuts = sorted({int(c) for c in np.random.default_rng(3).integers(1, 1100, size=12)})
    parts = split(X, y, cuts)
    assert len(parts) > reduce.FAN_IN and len(parts) % reduce.FAN_IN  # two levels, a short group
    f = rff(p=32)
    with thread_limit(1):  # the workers' thread count, so each BLAS call matches too
        here = fs.statistics(f, parts, scaler=scaler, rows=64)
    there = fs.statistics(f, parts, scaler=scaler, rows=64, client=client)
    for a, b in zip(there[:3], here[:3]):
        assert torch.equal(a, b)


def test_nlml_from_distributed_statistics(client, data):
    X, y, scaler, parts = data
    f = rff()
    here = nlml_from(fs.statistics(f, parts, scaler=scaler, rows=500))
    there = nlml_from(fs.statistics(f, parts, scaler=scaler, rows=333, client=client))
    assert rel(there, here) <= 1e-10
    with torch.no_grad():
        assert rel(here, nlml_dense(*dense(f, X, y, scaler))) <= 1e-9


def _small():
    X, y = make_data(300, seed=5)
    return X, y, Standardizer.fit(X, y), split(X, y, [50, 51, 180])


def test_gradients_distributed_in_process_and_dense(client):
    X, y, scaler, parts = _small()
    f = rff(p=16)
    gen = torch.Generator().manual_seed(0)
    G = torch.randn(16, 16, generator=gen, dtype=torch.float64)
    g = torch.randn(16, generator=gen, dtype=torch.float64)
    phi, ys = dense(f, X, y, scaler)
    ((G * (phi.mT @ phi)).sum() + g @ (phi.mT @ ys)).backward()
    want = f.raw_lengthscale.grad.clone()
    here = fs.statistics_gradients(f, parts, G, g, scaler=scaler, rows=37)
    there = fs.statistics_gradients(f, parts, G, g, scaler=scaler, rows=37, client=client)
    assert len(here) == len(there) == 1
    assert rel(here[0], want) <= 1e-12
    assert rel(there[0], here[0]) <= 1e-12


@pytest.mark.parametrize("on_cluster", [False, True])
def test_streamed_nlml_gradient_matches_dense_autograd(client, on_cluster):
    X, y, scaler, parts = _small()
    f = ScaledFeatures(rff(p=16), outputscale=0.8)
    nlml_dense(*dense(f, X, y, scaler)).backward()
    want = [t.grad.clone() for t in fs.trainable(f)]
    f.zero_grad()
    s = fs.streamed_statistics(f, parts, scaler, client if on_cluster else None, rows=64)
    assert s.n == 300 and not s.yy.requires_grad
    nlml_from(s).backward()
    got = [t.grad for t in fs.trainable(f)]
    assert len(got) == 2
    for a, b in zip(got, want):
        assert rel(a, b) <= 1e-9


def test_gradcheck_in_process():
    X, y = make_data(40, seed=7)
    scaler = Standardizer.fit(X, y)
    parts = split(X, y, [9, 30])
    f = ScaledFeatures(RandomFourierFeatures(D, 6, lengthscale=[0.7, 1.3, 1.0, 2.0]))
    params = tuple(fs.trainable(f))  # perturbed in place by gradcheck: the map sees them

    def fn(*_):
        s = fs.streamed_statistics(f, parts, scaler, rows=7)
        return s.gram, s.proj

    assert torch.autograd.gradcheck(fn, params, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_neural_gradients_with_a_frozen_parameter(client):
    X, y, scaler, parts = _small()
    f = NeuralFeatures(D, "rbf", hidden=(8,), num_rff=12, seed=2)
    f.body[0].bias.requires_grad_(False)
    p = f.num_features
    G = torch.randn(p, p, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    g = torch.ones(p, dtype=torch.float64)
    phi, ys = dense(f, X, y, scaler)
    ((G * (phi.mT @ phi)).sum() + g @ (phi.mT @ ys)).backward()
    want = [t.grad for t in fs.trainable(f)]
    assert len(want) == 3 and f.body[0].bias.grad is None  # weight, lengthscale, scale
    here = fs.statistics_gradients(f, parts, G, g, scaler=scaler, rows=40)
    there = fs.statistics_gradients(f, parts, G, g, scaler=scaler, rows=40, client=client)
    for a, b, c in zip(here, there, want, strict=True):
        assert a.shape == c.shape
        assert rel(a, c) <= 1e-11 and rel(b, a) <= 1e-12


def test_parquet_partitions_are_read_on_the_workers(client, tmp_path):
    X, y = make_data(900, seed=11)
    scaler = Standardizer.fit(X, y)
    parts, edges = [], [0, 100, 550, 900]
    for i, (a, b) in enumerate(zip(edges, edges[1:])):
        path = tmp_path / f"part-{i}.parquet"
        cols = {f"x{j}": X[a:b, j] for j in range(D)} | {"target": y[a:b]}
        pq.write_table(pa.table(cols), path, row_group_size=128)
        parts.append(ParquetPartition(path, forbid_pid=os.getpid()))
    assert [pt.num_rows for pt in parts] == [100, 450, 350]
    assert all(len(pickle.dumps(pt)) < 400 for pt in parts)  # only the path travels
    with pytest.raises(AssertionError, match="client process"):  # the guard works here
        fs.statistics(rff(), parts, scaler=scaler, rows=64)
    f = rff()
    there = fs.statistics(f, parts, scaler=scaler, rows=64, client=client)
    here = fs.statistics(f, split(X, y, edges[1:-1]), scaler=scaler, rows=64)
    for a, b in zip(there[:3], here[:3]):
        assert rel(a, b) <= 1e-12
    G, g = torch.eye(64, dtype=torch.float64), torch.ones(64, dtype=torch.float64)
    grad_there = fs.statistics_gradients(f, parts, G, g, scaler=scaler, rows=64, client=client)
    grad_here = fs.statistics_gradients(f, split(X, y, edges[1:-1]), G, g, scaler=scaler,
                                        rows=64)
    assert rel(grad_there[0], grad_here[0]) <= 1e-12


@pytest.mark.parametrize("frame", [False, True])
def test_delayed_partitions_are_computed_on_the_workers(client, frame):
    parts = [DelayedPartition(seed, m, frame) for seed, m in [(1, 120), (2, 301), (3, 77)]]
    f = rff(p=16)
    scaler = Standardizer.fit(*make_rows(1, 120))
    there = fs.statistics(f, parts, scaler=scaler, client=client, rows=50)
    here = fs.statistics(f, parts, scaler=scaler, rows=50)
    assert there.n == here.n == 498
    for a, b in zip(there[:3], here[:3]):
        assert rel(a, b) <= 1e-12


def test_worker_threads_and_client_untouched(client, data):
    # torch's thread count is per OS thread (OpenMP): probe the workers' task threads
    _, _, scaler, parts = data
    f = rff(p=8)
    before = torch.get_num_threads()
    for addr in client.scheduler_info()["workers"]:
        on = {"workers": [addr], "pure": False}
        assert client.submit(_set_threads, 2, **on).result() == 2
        assert client.submit(fs.partition_statistics, f, parts[0], scaler, **on).result().n \
            == parts[0].num_rows
        assert client.submit(torch.get_num_threads, **on).result() == 1  # threads_per_worker
        assert client.submit(_set_threads, 2, **on).result() == 2
    assert cluster.fold_map(client, _torch_threads, range(6)) == [1] * 6
    fs.statistics(f, parts, scaler=scaler, client=client)
    fs.statistics(f, parts, scaler=scaler)
    assert torch.get_num_threads() == before


def test_fold_map_in_order_here_and_there(client):
    items = [5, 3, 9, 1, 7, 2]
    weights = torch.arange(4.0)
    here = cluster.fold_map(None, _scaled, items, scale=weights)
    there = cluster.fold_map(client, _scaled, items, scale=weights)
    assert len(there) == len(items)
    for a, b, item in zip(here, there, items):
        assert torch.equal(a, b) and torch.equal(a, item * weights)
    with pytest.raises(KeyError, match="fold 4 failed"):
        cluster.fold_map(client, _fail, [4])
    assert cluster.fold_map(client, _fail, []) == []


# -- in-process properties ---------------------------------------------------------------

class Node:
    """A sum that remembers its brackets."""

    def __init__(self, s):
        self.s = s

    def __add__(self, other):
        return Node(f"({self.s}+{other.s})")


def cluster_tree(k):
    level = [str(i) for i in range(k)]
    while len(level) > 1:
        groups = [level[s : s + reduce.FAN_IN] for s in range(0, len(level), reduce.FAN_IN)]
        nxt = []
        for group in groups:
            total = group[0]
            for item in group[1:]:
                total = f"({total}+{item})"
            nxt.append(total)
        level = nxt
    return level[0]


@given(st.integers(1, 200))
@settings(max_examples=60, deadline=None)
def test_streamed_sum_has_the_cluster_tree(k):
    assert reduce.stream_sum([Node(str(i))] for i in range(k))[0].s == cluster_tree(k)


@given(st.integers(0, 300), st.integers(1, 40))
@settings(max_examples=80, deadline=None)
def test_row_blocks_are_cut_into_runs_of_nearly_equal_length(items, count):
    runs = cop.even_runs(list(range(items)), count)
    assert [i for run in runs for i in run] == list(range(items))  # in order, all kept
    assert len(runs) == min(count, items)
    lengths = [len(run) for run in runs]
    assert all(lengths) and max(lengths, default=0) - min(lengths, default=0) <= 1
    assert lengths == sorted(lengths, reverse=True)


def test_two_workers_share_25_row_blocks_13_and_12():
    runs = cop.even_runs(list(range(25)), 4)
    assert [len(r) for r in runs] == [7, 6, 6, 6]  # was 7, 7, 7, 4: 14 and 11 per worker


_HX, _HY = make_data(90, seed=13)
_HSCALER = Standardizer.fit(_HX, _HY)
_HF = RandomFourierFeatures(D, 8, seed=4)
with torch.no_grad():
    _HPHI, _HYS = dense(_HF, _HX, _HY, _HSCALER)


@given(st.lists(st.integers(0, 90), max_size=20), st.integers(1, 100))
@settings(max_examples=40, deadline=None)
def test_statistics_invariant_to_partition_and_chunk_sizes(cuts, rows):
    parts = split(_HX, _HY, sorted(cuts))  # empty partitions included
    s = fs.statistics(_HF, parts, scaler=_HSCALER, rows=rows)
    assert s.n == 90
    assert rel(s.gram, _HPHI.mT @ _HPHI) <= 1e-13
    assert rel(s.proj, _HPHI.mT @ _HYS) <= 1e-13
    assert rel(s.yy, _HYS @ _HYS) <= 1e-13


def test_bad_partitions_and_chunks():
    f = rff(p=8)
    X, y = make_data(20)
    with pytest.raises(ValueError, match="partitions is empty"):
        fs.statistics(f, [])
    with pytest.raises(ValueError, match=r"partitions\[1\].*chunks"):
        fs.statistics(f, [ArrayPartition(X, y), object()])
    with pytest.raises(ValueError, match="rows"):
        fs.statistics(f, [ArrayPartition(X, y)], rows=0)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN|finite"):
        fs.statistics(f, [ArrayPartition(bad, y)])
    with pytest.raises(ValueError, match="19 targets"):
        fs.statistics(f, [ArrayPartition(X, y[:19])], rows=50)


# -- connect -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"scheduler": "tcp://127.0.0.1:8786", "workers": 2}, "not both"),
    ({"workers": 0}, "workers"),
    ({"workers": -1}, "workers"),
    ({"workers": 2.5}, "workers"),
    ({"workers": True}, "workers"),
    ({"workers": "2"}, "workers"),
    ({"scheduler": "localhost"}, "address"),
    ({"scheduler": "http://host:8786"}, "address"),
    ({"scheduler": "tcp://host:99999"}, "address"),
    ({"scheduler": "tcp://host:87 86"}, "address"),
    ({"scheduler": 8786}, "address"),
])
def test_connect_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match), cluster.connect(**kwargs):
        pass  # pragma: no cover


def test_connect_without_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"pip install 'gpscale\[distributed\]'"), \
            cluster.connect(workers=1):
        pass  # pragma: no cover
    with cluster.connect() as nothing:  # in-process needs no dask
        assert nothing is None
    f = rff(p=8)
    assert fs.statistics(f, split(*make_data(30), [10])).n == 30


def test_connect_to_a_client_or_an_address_leaves_the_cluster_running(client):
    with cluster.connect(scheduler=client) as same:
        assert same is client
    with cluster.connect(scheduler=client.scheduler.address) as other:
        assert other is not client and other.status == "running"
        assert len(other.scheduler_info()["workers"]) == 2
    assert other.status == "closed" and client.status == "running"
    assert client.submit(sum, [1, 2]).result() == 3


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.filterwarnings("ignore:Port .* is already in use")  # the module cluster's
def test_connect_workers_starts_and_closes_processes():
    with cluster.connect(workers=2) as c:
        pids = list(c.run(os.getpid).values())
        assert len(pids) == 2 and os.getpid() not in pids
        assert all(_alive(pid) for pid in pids)
        # a lambda travels by value: these workers cannot import this test module
        assert set(c.run(lambda: __import__("gpscale").__file__).values()) \
            == {gpscale.__file__}
    assert c.status == "closed"
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


# -- kernel products on the workers (the exact GP's reduction) -------------------------

@pytest.mark.parametrize("kernel_name", ["rbf-ard", "matern32-ard"])
@pytest.mark.parametrize("block_dtype", [None, torch.float32])
def test_kernel_products_on_the_cluster_equal_in_process(client, kernel_name, block_dtype):
    from gpscale.kernels import make_kernel
    from gpscale.kernels.operator import KernelOperator

    g = torch.Generator().manual_seed(3)
    X = torch.randn(700, 3, generator=g, dtype=torch.float64)
    kernel = make_kernel(kernel_name, 3)
    kernel.base.lengthscale = torch.tensor([0.7, 1.3, 2.0], dtype=torch.float64)
    here = KernelOperator(kernel, X, 0.05, block=64, block_dtype=block_dtype)
    there = cop.ClusterOperator(kernel, X, 0.05, client, block=64, block_dtype=block_dtype)
    assert len(there._groups) >= 4  # several tasks, each a run of blocks
    for V in (torch.randn(700, generator=g, dtype=torch.float64),
              torch.randn(700, 5, generator=g, dtype=torch.float64)):
        with thread_limit(1):  # the workers' threads: float32 GEMMs block by thread count
            a = here.matmul(V)
        b = there.matmul(V)
        assert a.shape == b.shape == V.shape
        assert float((a - b).norm() / a.norm()) <= 1e-12
    X_new = torch.randn(9, 3, generator=g, dtype=torch.float64)  # predictions: in process
    V = torch.randn(700, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(there.cross_matmul(X_new, V), here.cross_matmul(X_new, V),
                               rtol=1e-12, atol=1e-12)


def test_the_exact_gp_on_every_row_sends_its_products_to_the_cluster(client):
    """``gpscale.fit(method="exact", solver="cg", scheduler=...)``: the CG products run
    as tasks on the workers, and the model equals the in-process one."""

    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, (800, 3))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(800)
    opts = dict(method="exact", solver="cg", subsample=200, precond_rank=20, seed=0,
                max_iter=20)
    # one thread in this process too, as on the workers: every product, sum and
    # factorisation then rounds alike (the refinement's line search would otherwise turn
    # rounding into other steps after tens of evaluations)
    with thread_limit(1):
        here = gpscale.fit(X, y, **opts)
        with distributed.get_task_stream(client) as stream:
            there = gpscale.fit(X, y, scheduler=client, **opts)
    ran = [t["key"] for t in stream.data]
    assert any("_block_products" in str(k) for k in ran), ran[:5]  # on the workers
    assert any("_extend_block" in str(k) for k in ran), ran[:5]  # the factor's rows too
    assert _on_cg(there.model) and there.model.solver.client is None
    a, b = here.result.history[-1], there.result.history[-1]
    assert a["iterations"] == b["iterations"] and a["passes"] == b["passes"]
    X_new = rng.uniform(-2, 2, (30, 3))
    for u, v in zip(here.predict(X_new, return_std=True), there.predict(X_new, return_std=True)):
        np.testing.assert_allclose(v, u, rtol=1e-10, atol=1e-12)


def test_the_refinement_on_every_row_contracts_on_the_cluster(client):
    """The gradient pass of ``refine=`` (:meth:`ClusterOperator.contraction`) runs as
    tasks on the workers and equals the in-process contraction; a refined fit with
    ``scheduler=`` equals the one in process."""
    from gpscale.kernels import make_kernel
    from gpscale.kernels.operator import KernelOperator

    g = torch.Generator().manual_seed(4)
    X = torch.randn(600, 3, generator=g, dtype=torch.float64)
    kernel = make_kernel("rbf-ard", 3)
    kernel.base.lengthscale = torch.tensor([0.7, 1.3, 2.0], dtype=torch.float64)
    left = torch.randn(600, 3, generator=g, dtype=torch.float64)
    right = torch.randn(600, 3, generator=g, dtype=torch.float64)
    with thread_limit(1):
        here = KernelOperator(kernel, X, 0.05, block=64).contraction(left, right)
    with distributed.get_task_stream(client) as stream:
        there = cop.ClusterOperator(kernel, X, 0.05, client, block=64).contraction(left, right)
    assert any("_block_contractions" in str(t["key"]) for t in stream.data)
    assert len(here) == len(there) == 2
    for a, b in zip(here, there):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)

    rng = np.random.default_rng(6)
    Xn = rng.uniform(-2, 2, (700, 3))
    y = np.sin(2 * Xn[:, 0]) + 0.1 * rng.standard_normal(700)
    opts = dict(method="exact", solver="cg", subsample=200, precond_rank=20, seed=0,
                refine=3, probes=4)
    with thread_limit(1):  # as above
        a = gpscale.fit(Xn, y, **opts)
        b = gpscale.fit(Xn, y, scheduler=client, **opts)
    for u, v in zip(a.model.parameters(), b.model.parameters()):
        torch.testing.assert_close(v, u, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel_name", ["rbf-ard", "matern32-ard", "linear"])
def test_rectangles_of_k_multiply_and_contract_on_the_cluster(client, kernel_name):
    """:meth:`ClusterOperator.range_products` / :meth:`~ClusterOperator.range_contraction`
    (GPCV-ADMM's K_VT, K_TV and K_TT on the rows [X_T; X_V]) against the dense blocks
    and the in-process contraction, for the fast RBF path, the vjp path and a kernel
    without a stationary form."""
    from gpscale.kernels import make_kernel
    from gpscale.train.admm import rank1_vjp

    g = torch.Generator().manual_seed(11)
    X = torch.randn(430, 3, generator=g, dtype=torch.float64)
    kernel = make_kernel(kernel_name, 3)
    op = cop.ClusterOperator(kernel, X, 0.0, client, block=40)
    params = [p for p in kernel.parameters() if p.requires_grad]
    for rows, cols in [((0, 250), (0, 250)), ((250, 430), (0, 250)), ((0, 250), (250, 430)),
                       ((17, 18), (3, 429)), (None, None)]:
        r0, r1 = rows or (0, 430)
        c0, c1 = cols or (0, 430)
        V = torch.randn(c1 - c0, 2, generator=g, dtype=torch.float64)
        with torch.no_grad():
            dense = kernel(X[r0:r1], X[c0:c1])
        KV = op.range_products(rows, cols, V)
        assert float((KV - dense @ V).norm() / (dense @ V).norm()) <= 1e-12
        Kv = op.range_products(rows, cols, V[:, 0])  # a vector in, a vector out
        assert Kv.shape == (r1 - r0,)
        torch.testing.assert_close(Kv, KV[:, 0], rtol=1e-12, atol=1e-13)
        a = torch.randn(r1 - r0, generator=g, dtype=torch.float64)
        b = torch.randn(c1 - c0, generator=g, dtype=torch.float64)
        with thread_limit(1):
            want = rank1_vjp(kernel, X[r0:r1], X[c0:c1], a, b, block=64)
        got = op.range_contraction(rows, cols, a[:, None], b[:, None])
        assert len(got) == len(params)
        for p, grad in zip(params, got):
            torch.testing.assert_close(grad, want[p], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="not within"):
        op.range_products((0, 431), None, torch.zeros(430))
    with pytest.raises(ValueError, match="rows for"):
        op.range_products((0, 10), (0, 20), torch.zeros(10))


def test_admm_hocv_sends_its_recomputed_products_to_the_cluster(client):
    """``gpscale.fit(method="admm-hocv", scheduler=...)`` with the kernel blocks
    recomputed (``memory="chunked"``): the z-step's products, the θ-gradient's
    contractions and the scale's solve run as tasks on the workers, and the fit equals
    the in-process one; in dense mode the blocks are held here and nothing is sent."""
    rng = np.random.default_rng(8)
    X = rng.uniform(-2, 2, (360, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(360)
    opts = dict(method="admm-hocv", seed=0, memory="chunked", block=50, max_iter=4,
                eps=1e-9)
    with thread_limit(1):
        here = gpscale.fit(X, y, **opts)
        with distributed.get_task_stream(client) as stream:
            there = gpscale.fit(X, y, scheduler=client, **opts)
    ran = [str(t["key"]) for t in stream.data]
    assert any("_block_products" in k for k in ran), ran[:5]
    assert any("_block_contractions" in k for k in ran), ran[:5]
    assert len(here.result.history) == len(there.result.history) == 5  # start + 4
    for a, b in zip(here.result.history, there.result.history):
        assert b["cv_loss"] == pytest.approx(a["cv_loss"], rel=1e-9)
        assert b.get("cg_iters") == a.get("cg_iters")
    assert here.result.history[-1]["scale_factor"] is not None  # the solve ran
    assert there.result.history[-1]["scale_factor"] == pytest.approx(
        here.result.history[-1]["scale_factor"], rel=1e-9)
    for u, v in zip(here.model.parameters(), there.model.parameters()):
        torch.testing.assert_close(v, u, rtol=1e-8, atol=1e-12)
    X_new = rng.uniform(-2, 2, (25, 2))
    np.testing.assert_allclose(there.predict(X_new), here.predict(X_new), rtol=1e-8,
                               atol=1e-10)

    with distributed.get_task_stream(client) as stream:  # dense: K_TT, K_VT held here
        gpscale.fit(X, y, scheduler=client, **{**opts, "memory": "dense"})
    assert not any("_block_products" in str(t["key"]) for t in stream.data)


@pytest.mark.parametrize("copies", [False, True])
def test_the_preconditioners_factor_is_built_and_applied_on_the_workers(client, copies):
    """Randomly pivoted Cholesky with the cluster's store (:class:`ClusterFactor`) keeps
    L's rows on the workers and equals the in-process factor (the same pivots; the
    kernel blocks' rounding differs); its products, LᵀL and the Woodbury apply equal
    the dense ones, and its blocks are freed with it."""
    import gc

    from gpscale.kernels import make_kernel
    from gpscale.kernels.operator import KernelOperator
    from gpscale.linalg.lowrank import factor_gram, factor_tmatmul, low_rank_inverse, rp_cholesky

    g = torch.Generator().manual_seed(7)
    X = torch.randn(700, 3, generator=g, dtype=torch.float64)
    kernel = make_kernel("rbf-ard", 3)
    kernel.base.lengthscale = torch.tensor([0.7, 1.3, 2.0], dtype=torch.float64)
    scale = torch.randint(1, 4, (700,), generator=g).to(torch.float64).sqrt() if copies else None
    here = KernelOperator(kernel, X, 0.05, block=64)
    there = cop.ClusterOperator(kernel, X, 0.05, client, block=64)
    assert len(there._groups) >= 4
    opts = dict(block=16, seed=1, scale=scale)
    with thread_limit(1):
        near = rp_cholesky(kernel, X, 90, store=here.factor_store(90, scale), **opts)
    L = near.L
    with distributed.get_task_stream(client) as stream:
        far = rp_cholesky(kernel, X, 90, store=there.factor_store(90, scale), **opts)
        R = torch.randn(700, 4, generator=g, dtype=torch.float64)
        W = torch.randn(90, 4, generator=g, dtype=torch.float64)
        products = (far @ W, factor_tmatmul(far, R), factor_gram(far))
    ran = {str(t["key"]).split("-")[0] for t in stream.data}
    assert {"_block_pivot_columns", "_extend_block", "_rows_of", "_rows_times",
            "_rows_t_times", "_gram_of"} <= ran
    assert isinstance(far, cop.ClusterFactor) and far.shape == L.shape == (700, 90)
    dense = far @ torch.eye(90, dtype=torch.float64)
    assert torch.equal(dense, L)  # the same steps on each block of rows
    with thread_limit(1):  # the same row blocks, added in the same order
        same = (near @ W, factor_tmatmul(near, R), factor_gram(near))
    for got, want, dense_product in zip(products, same, (L @ W, L.mT @ R, L.mT @ L)):
        assert torch.equal(got, want)
        assert float((got - dense_product).norm() / dense_product.norm()) <= 1e-12
    a = low_rank_inverse(L, torch.tensor(0.05, dtype=torch.float64), scale=scale)(R)
    b = low_rank_inverse(far, torch.tensor(0.05, dtype=torch.float64), scale=scale)(R)
    assert float((a - b).norm() / a.norm()) <= 1e-9
    # stopped early by the trace test: the blocks are trimmed to the rank found
    tol = 0.05 * float(kernel.diag(X).detach().sum())
    short = rp_cholesky(kernel, X, 200, store=here.factor_store(200, scale), abs_tol=tol,
                        **opts).L
    far_short = rp_cholesky(kernel, X, 200, store=there.factor_store(200, scale), abs_tol=tol,
                            **opts)
    assert short.shape[1] < 200 and far_short.shape == short.shape
    widths = client.gather([client.submit(lambda b: b.shape[1], blk, pure=False)
                            for blk in far_short._blocks])
    assert set(widths) == {short.shape[1]}
    del far, far_short
    gc.collect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        keys = [str(k) for ks in client.has_what().values() for k in ks]
        if not any(k.startswith(("_empty_rows", "_first_columns")) for k in keys):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the factor's blocks stayed on the workers: {keys}")


def _on_cg(model) -> bool:
    """The exact GP, solved by conjugate gradients."""
    from gpscale.models import ExactGP

    return isinstance(model, ExactGP) and model.solver.name == "cg"
