"""MINIMAX, SCGD, BSGD and SVGP trained from Parquet files (rows never loaded): through
gpscale.fit, the checkpoints' exact NLML against the in-memory formula at the returned
θ, saved files without rows whose size does not grow with n, reservoir-sampled and
streamed k-means inducing points, and the in-memory-only options."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import gpscale
from gpscale.features import FeatureKernel, RandomFourierFeatures
from gpscale.io import Rows, open_source
from gpscale.methods import get_method
from gpscale.models.feature import FeatureGP
from gpscale.preprocessing import Standardizer
from gpscale.train.batches import ShuffledStream
from gpscale.train.stochastic import fit_minimax, fit_scgd
from gpscale.train.svgp import exact_feature_nlml, fit_svgp, init_inducing_stream

OPTIONS = {
    "minimax": {"num_features": 32, "epochs": 2, "batch_size": 25, "optimizer": "adam",
                "lr": 0.05},
    "scgd": {"num_features": 32, "epochs": 2, "batch_size": 25, "optimizer": "adam",
             "lr": 0.05, "tracker": "independent"},
    "bsgd": {"num_features": 32, "epochs": 2, "batch_size": 25, "optimizer": "adam",
             "lr": 0.05},
    "svgp": {"num_inducing": 20, "epochs": 2, "batch_size": 25, "lr": 0.03},
}


def smooth(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2)) * [1.0, 10.0] + [0.0, 50.0]
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n) + 3.0
    return X, y


def write(folder, X, y, files=3, row_group=40):
    folder.mkdir()
    for k, idx in enumerate(np.array_split(np.arange(len(y)), files)):
        pq.write_table(pa.table({"a": X[idx, 0], "b": X[idx, 1], "y": y[idx]}),
                       folder / f"part-{k}.parquet", row_group_size=row_group)
    return folder


def rows_of(folder, X, y):
    parts = tuple(open_source(str(folder), target="y").partitions())
    return Rows(parts, 2, Standardizer.fit(X, y)), Standardizer.fit(X, y)


@pytest.mark.parametrize("method", sorted(OPTIONS))
def test_fit_from_parquet_predicts_and_saves_no_rows(method, tmp_path):
    X, y = smooth(400)
    folder = write(tmp_path / "train", X, y)
    pred = gpscale.fit(str(folder), target="y", method=method, **OPTIONS[method])
    assert pred.feature_names == ["a", "b"] and pred.model.n == 400
    assert getattr(pred.model, "rows", None) is None  # a FeatureGP is frozen
    Xt, yt = smooth(200, seed=1)
    rmse = np.sqrt(np.mean((pred.predict(Xt) - yt) ** 2)) / np.std(yt)
    assert rmse < 0.5, rmse
    path = pred.save(tmp_path / f"{method}.pt")
    saved = torch.load(path, weights_only=True)["state_dict"]
    assert "X" not in saved and "y" not in saved
    assert all(400 not in v.shape for v in saved.values())
    back = gpscale.load(path)
    np.testing.assert_allclose(back.predict(Xt[:20]), pred.predict(Xt[:20]), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("method", ["scgd", "svgp"])
def test_saved_file_size_does_not_grow_with_n(method, tmp_path):
    sizes = []
    for n in (200, 1600):
        X, y = smooth(n, seed=n)
        folder = write(tmp_path / f"n{n}", X, y, row_group=200)
        opts = OPTIONS[method] | {"epochs": 1, "batch_size": 50}
        pred = gpscale.fit(str(folder), target="y", method=method, **opts)
        sizes.append(pred.save(tmp_path / f"{method}-{n}.pt").stat().st_size)
    assert abs(sizes[1] - sizes[0]) < 0.02 * sizes[0], sizes


@pytest.mark.parametrize("fit", [fit_minimax, fit_scgd])
def test_checkpoints_on_a_source_are_the_exact_nlml_at_the_returned_theta(fit, tmp_path):
    X, y = smooth(300)
    rows, sc = rows_of(write(tmp_path / "d", X, y), X, y)
    feats = RandomFourierFeatures(2, 16, lengthscale=2.0, seed=0)
    model, res = fit(rows, None, feats, batch_size=30, epochs=3, optimizer="adam", lr=0.05,
                     eval_every=4, buffer_rows=60, seed=2)
    assert model.rows is None and model.n == 300  # frozen: statistics, no rows
    assert len([h for h in res.history if "objective" in h]) == math.ceil(30 / 4)
    Xs = torch.as_tensor(sc.transform_x(X))
    ys = torch.as_tensor(sc.transform_y(y))
    twin = FeatureGP(model.features, Xs, ys, noise=float(model.noise.detach()),
                     weights="fixed")
    with torch.no_grad():
        assert math.isclose(float(twin.nlml()) / 300, res.objective, rel_tol=1e-10)
        assert math.isclose(float(model.nlml()) / 300, res.objective, rel_tol=1e-10)
    best = min(h["objective"] for h in res.history if "objective" in h)
    assert res.objective == best


def test_streamed_fit_is_seeded_and_the_buffer_matters(tmp_path):
    X, y = smooth(240)
    rows, _ = rows_of(write(tmp_path / "d", X, y), X, y)

    def run(seed, buffer):
        feats = RandomFourierFeatures(2, 12, seed=0)
        return fit_scgd(rows, None, feats, batch_size=24, epochs=2, optimizer="sgd",
                        lr=1e-3, seed=seed, buffer_rows=buffer, eval_every=100)[1].theta

    assert run(1, 40) == run(1, 40)
    assert run(1, 40) != run(2, 40) and run(1, 40) != run(1, 240)


def test_svgp_feature_nlml_checkpoints_from_a_source(tmp_path):
    X, y = smooth(200)
    rows, sc = rows_of(write(tmp_path / "d", X, y), X, y)
    rff = RandomFourierFeatures(2, 12, seed=0)
    model, res = fit_svgp(rows, None, FeatureKernel(rff), num_inducing=10, batch_size=20,
                          epochs=2, evaluate="feature-nlml", eval_every=5, seed=1,
                          buffer_rows=50)
    Xs = torch.as_tensor(sc.transform_x(X))
    ys = torch.as_tensor(sc.transform_y(y))
    assert math.isclose(exact_feature_nlml(rff, Xs, ys, model.noise), res.objective,
                        rel_tol=1e-10)
    assert math.isclose(exact_feature_nlml(rff, rows, None, model.noise), res.objective,
                        rel_tol=1e-10)
    assert model.num_data == 200 and len(res.history) == 4


def test_svgp_optimal_q_from_chunks_equals_in_memory():
    from gpscale.kernels import RBF
    from gpscale.models import SVGP

    g = torch.Generator().manual_seed(0)
    X = torch.randn(70, 2, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0])
    a = SVGP(RBF(), X[:6], num_data=70, whiten=False)
    b = SVGP(RBF(), X[:6], num_data=70, whiten=False)
    a.set_optimal_q(X, y)
    b.set_optimal_q_chunks((X[s:s + 9], y[s:s + 9]) for s in range(0, 70, 9))
    torch.testing.assert_close(a.q_mu, b.q_mu, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a.q_chol(), b.q_chol(), rtol=1e-10, atol=1e-12)
    assert not torch.equal(a.q_mu, torch.zeros(6))


class _IdRows:
    """Rows 0..n-1 with X = [id, id²] in partitions of the given sizes."""

    def __init__(self, start, size):
        self.X = np.arange(start, start + size, dtype=np.float64)[:, None] ** [1, 2]
        self.y = np.zeros(size)
        self.num_rows = size

    def chunks(self, rows):
        for s in range(0, self.num_rows, rows):
            yield self.X[s:s + rows], self.y[s:s + rows]


def test_reservoir_inducing_points_are_a_uniform_sample_without_replacement():
    sizes = [3, 9, 1, 7]
    starts = np.cumsum([0, *sizes])
    stream = ShuffledStream([_IdRows(a, k) for a, k in zip(starts, sizes)], 4, rows=2)
    counts = np.zeros(20)
    for seed in range(1500):
        Z = init_inducing_stream(stream, 5, seed=seed)
        ids = Z[:, 0].long().numpy()
        assert len(set(ids.tolist())) == 5 and torch.equal(Z[:, 1], Z[:, 0] ** 2)
        counts[ids] += 1
    # each row is drawn with probability 5/20: 375 ± 17 times in 1500 draws
    assert np.all(np.abs(counts - 375) < 90), counts
    with pytest.raises(ValueError, match="exceeds"):
        init_inducing_stream(stream, 21)


def test_streamed_kmeans_equals_lloyd_in_memory():
    g = np.random.default_rng(0)
    X = g.normal(size=(90, 2)) + np.repeat([[0, 0], [5, 5], [0, 6]], 30, axis=0)

    class Part:
        def __init__(self, A):
            self.A, self.num_rows = A, len(A)

        def chunks(self, rows):
            for s in range(0, len(self.A), rows):
                yield self.A[s:s + rows], np.zeros(len(self.A[s:s + rows]))

    stream = ShuffledStream([Part(X[:50]), Part(X[50:])], 8, rows=7)
    Z = init_inducing_stream(stream, 3, init="random", seed=4)
    Xt = torch.as_tensor(X)
    for _ in range(4):  # the Lloyd iteration of init_inducing, on all rows at once
        assign = torch.cdist(Xt, Z).argmin(1)
        sums = torch.zeros_like(Z).index_add_(0, assign, Xt)
        counts = torch.bincount(assign, minlength=3).to(Xt.dtype)[:, None]
        Z = torch.where(counts > 0, sums / counts.clamp_min(1.0), Z)
    got = init_inducing_stream(stream, 3, init="kmeans", seed=4, iters=4)
    torch.testing.assert_close(got, Z, rtol=1e-12, atol=1e-12)


def test_buffer_rows_is_for_sources_and_y_comes_with_the_rows(tmp_path):
    X, y = smooth(60)
    feats = RandomFourierFeatures(2, 8, seed=0)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    with pytest.raises(ValueError, match="buffer_rows applies"):
        fit_scgd(Xt, yt, feats, buffer_rows=10)
    with pytest.raises(ValueError, match="buffer_rows applies"):
        fit_svgp(Xt, yt, FeatureKernel(feats), 5, 10, buffer_rows=10)
    with pytest.raises(ValueError, match="buffer_rows applies"):
        gpscale.fit(X, y, method="minimax", num_features=8, buffer_rows=10)
    rows, _ = rows_of(write(tmp_path / "d", X, y), X, y)
    with pytest.raises(ValueError, match="y must be None"):
        fit_scgd(rows, yt, feats)
    with pytest.raises(ValueError, match="exceeds"):
        fit_minimax(rows, None, feats, batch_size=61)
    assert all(get_method(m).streams for m in OPTIONS)


def test_on_a_local_cluster_the_same_fit_as_in_process(tmp_path):
    """Checkpoints and the final statistics as tasks on 2 worker processes (the stream
    itself is read here): the same numbers as the passes in this process."""
    distributed = pytest.importorskip("distributed")
    from pathlib import Path

    X, y = smooth(300)
    folder = write(tmp_path / "d", X, y)
    kw = OPTIONS["scgd"] | {"epochs": 1, "eval_every": 4}
    here = gpscale.fit(str(folder), target="y", method="scgd", **kw)
    src = str(Path(gpscale.__file__).resolve().parents[1])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env={"PYTHONPATH": src}) as cluster, \
            distributed.Client(cluster) as client:
        there = gpscale.fit(str(folder), target="y", method="scgd", scheduler=client, **kw)
    assert there.model.rows is None and len(there.result.history) == 3  # 12 steps
    assert math.isclose(there.result.objective, here.result.objective, rel_tol=1e-12)
    np.testing.assert_allclose(there.predict(X[:30]), here.predict(X[:30]), rtol=1e-10,
                               atol=1e-12)
