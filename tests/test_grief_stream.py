"""GP-GRIEF from rows that are not in memory: the one-pass summary (ranges, distinct
values, a bottom-k random sample), the grids it places, and grief-ii / grief-i trained
from Parquet files in this process and on a real dask LocalCluster (2 worker
processes), each against the in-memory path at the same grid and hyperparameters."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from parquet_data import make_data, write_parquet

import gpscale
from gpscale.features.grief import GriefFeatures, grid_1d
from gpscale.io import Rows, open_source
from gpscale.io.scaling import source_scaler
from gpscale.models import FeatureGP
from gpscale.models.grief import GriefIPosterior, OrthogonalGrief
from gpscale.models.grief_eigen import ReweightedGriefPosterior
from gpscale.threads import thread_limit
from gpscale.train.grid_pass import RowSummary, summarize_rows, summary_grids
from gpscale.train.grief import fit_grief_i, fit_grief_ii

distributed = pytest.importorskip("distributed")
SRC = Path(gpscale.__file__).resolve().parents[1]
FAST = {"p": 30, "init_points": 150, "init_max_iter": 30, "seed": 3}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread here, as on the workers: on a shared machine a second OpenMP
    thread that is not scheduled stalls every small factorisation."""
    with thread_limit(1):
        yield


def streamed_rows(folder, client=None, rows=None):
    """Rows of a folder, scaled as gpscale.fit scales them, and the scaled
    rows in memory (the reference)."""
    source = open_source(folder, target="y")
    parts = tuple(source.partitions())
    scaler = source_scaler(parts, client)
    X, y = source.to_arrays()
    Xs = torch.as_tensor(scaler.transform_x(X))
    ys = torch.as_tensor(scaler.transform_y(y))
    return Rows(parts, source.num_features, scaler, client, rows), Xs, ys


def twin(model, Xs, ys):
    """A FeatureGP on the rows in memory with the streamed model's features and θ."""
    other = FeatureGP(model.features, Xs, ys, weights=model.weights_kind)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("stat_")}
    missing, unexpected = other.load_state_dict(state, strict=False)
    assert sorted(missing) == ["X", "y"] and not unexpected
    return other


class Part:
    """A partition of rows in memory (the gpscale.io protocol)."""

    def __init__(self, X, y):
        self.X, self.y, self.num_rows = X, y, len(y)

    def chunks(self, rows):
        for s in range(0, self.num_rows, rows):
            yield self.X[s : s + rows], self.y[s : s + rows]


def split(X, y, cuts):
    edges = [0, *sorted(set(cuts)), len(y)]
    return [Part(X[a:b], y[a:b]) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def summary_of(parts, d, **options):
    return summarize_rows(parts, d, **{"size": 5, "max_distinct": 4, "seed": 0, **options})


def assert_same_summary(a: RowSummary, b: RowSummary, exact_y=False):
    assert a.n == b.n
    np.testing.assert_array_equal(a.lo, b.lo)
    np.testing.assert_array_equal(a.hi, b.hi)
    for u, v in zip(a.distinct, b.distinct):
        assert (u is None) == (v is None)
        if u is not None:
            np.testing.assert_array_equal(u, v)
    for name in ("X", "y", "index", "keys"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    if exact_y:
        assert (a.y_sum, a.y_m2) == (b.y_sum, b.y_m2)
    else:
        np.testing.assert_allclose([a.y_sum, a.y_m2], [b.y_sum, b.y_m2], rtol=1e-10,
                                   atol=1e-10)


# -- the one-pass summary ----------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), cuts=st.lists(st.integers(0, 60), max_size=6),
       rows=st.integers(1, 70), size=st.integers(1, 20), seed=st.integers(0, 2**63),
       data_seed=st.integers(0, 1000))
def test_summary_is_exact_over_any_partitioning(n, cuts, rows, size, seed, data_seed):
    """Min/max, distinct values and the sample merge exactly: any partitioning and chunk
    size gives the summary of one partition read in one chunk."""
    rng = np.random.default_rng(data_seed)
    X = np.column_stack([rng.standard_normal(n), rng.integers(0, 3, n) * 1.5,
                         rng.integers(0, 9, n).astype(float)])
    y = rng.standard_normal(n)
    opts = {"size": size, "max_distinct": 4, "seed": seed}
    whole = summary_of([Part(X, y)], 3, rows=10**6, **opts)
    parted = summary_of(split(X, y, [c for c in cuts if c < n]), 3, rows=rows, **opts)
    assert_same_summary(parted, whole)
    np.testing.assert_array_equal(whole.lo, X.min(0))
    np.testing.assert_array_equal(whole.hi, X.max(0))
    for j in range(3):
        u = np.unique(X[:, j])
        assert (whole.distinct[j] is None) == (u.size > 4)
        if u.size <= 4:
            np.testing.assert_array_equal(whole.distinct[j], u)
    k = min(n, size)
    assert whole.X.shape == (k, 3) and len(set(whole.index.tolist())) == k
    np.testing.assert_array_equal(whole.X, X[whole.index])
    np.testing.assert_array_equal(whole.y, y[whole.index])
    assert np.all(np.diff(whole.keys.astype(np.float64)) >= 0)
    np.testing.assert_allclose(whole.y_var if n > 1 else 0.0,
                               y.var(ddof=1) if n > 1 else 0.0, rtol=1e-10, atol=1e-12)


def test_sample_is_uniform():
    """Inclusion counts of each of n = 40 rows in samples of k = 4 (and of the first
    m = 2 of them) over 2000 fixed seeds: a chi-square test at a level no run can cross
    by chance (the seeds are fixed, so the test is deterministic), and every row's
    count within 6 standard deviations of its mean."""
    n, k, m, runs = 40, 4, 2, 2000
    X, y = np.arange(n, dtype=float)[:, None], np.zeros(n)
    parts = split(X, y, [7, 8, 25])
    counts = {k: np.zeros(n), m: np.zeros(n)}
    for seed in range(runs):
        s = summary_of(parts, 1, size=k, seed=seed, rows=5)
        counts[k][s.index] += 1
        counts[m][s.index[:m]] += 1
    for size, c in counts.items():
        p = size / n
        expected = runs * p
        sd = math.sqrt(runs * p * (1 - p))
        assert np.all(np.abs(c - expected) < 6 * sd), (size, c)
        chi2 = float(((c - expected) ** 2 / expected).sum())
        assert chi2 < 39 + 6 * math.sqrt(2 * 39), chi2  # df = 39: mean 39, sd √78


def test_summary_rejects_bad_options_and_rows():
    X, y = np.zeros((3, 1)), np.zeros(3)
    with pytest.raises(ValueError, match="size"):
        summary_of([Part(X, y)], 1, size=0)
    with pytest.raises(ValueError, match="NaN or inf"):
        summary_of([Part(np.array([[0.0], [np.nan]]), np.zeros(2))], 1)
    with pytest.raises(ValueError, match="m_bar=10"):
        summary_grids(summary_of([Part(X, y)], 1), 10)


def test_quantile_grid_from_the_sample(tmp_path):
    """Exact (= grid_1d on all rows) when the sample holds every row; else the end points
    are exact and each interior point's level in the data is within 0.1 of its target
    (DKW: P > 2e^{-2·1000·0.01} ≈ 4e-9 per column; fixed seeds). At the same θ the two
    grids give NLMLs within 0.01 nats per row (the grid moves the eigenfunctions)."""
    rng = np.random.default_rng(1)
    n, m_bar = 4000, 10
    X = np.column_stack([rng.exponential(1.0, n), rng.standard_normal(n) ** 3])
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    parts = split(X, y, [1000, 2500])
    small = summary_of(parts, 2, size=n, max_distinct=m_bar)
    big = summary_of(parts, 2, size=1000, max_distinct=m_bar)
    Xt = torch.as_tensor(X)
    exact = [grid_1d(Xt[:, j], m_bar, "quantile") for j in range(2)]
    for j, g in enumerate(summary_grids(small, m_bar, "quantile")):
        assert torch.equal(g, exact[j])
    levels = np.linspace(0, 1, m_bar)
    streamed = summary_grids(big, m_bar, "quantile")
    for j, g in enumerate(streamed):
        assert g.numel() == m_bar and g[0] == exact[j][0] and g[-1] == exact[j][-1]
        cdf = np.searchsorted(np.sort(X[:, j]), g.numpy(), side="right") / n
        assert np.all(np.abs(cdf[1:-1] - levels[1:-1]) < 0.1), cdf
    yt = torch.as_tensor(y)
    nlml = []
    for grids in (exact, streamed):
        f = GriefFeatures(None, 60, grids=grids, lengthscale=[0.7, 1.5])
        model = FeatureGP(f, Xt, yt, noise=0.05)
        with torch.no_grad():
            nlml.append(float(model.nlml()))
    assert abs(nlml[1] - nlml[0]) < 0.01 * n, nlml


# -- grief-ii / grief-i from Parquet files, in process --------------------------------------

def test_grief_ii_from_parquet_equals_in_memory_at_the_same_grid_and_theta(tmp_path):
    X, y = make_data(400)
    rows, Xs, ys = streamed_rows(write_parquet(tmp_path / "train", X, y, parts=2,
                                               row_group=100))
    model, result = fit_grief_ii(rows, None, max_iter=2, **FAST)
    assert model.n == 400 and result.n_evals >= 2
    f = model.features
    for j in range(3):  # min / max are exact: the uniform grid is the in-memory one
        assert torch.equal(f.grid_points(j), grid_1d(Xs[:, j], 10, "uniform"))
    ref = twin(model, Xs, ys)
    with torch.no_grad():
        torch.testing.assert_close(model.nlml(), ref.nlml(), rtol=1e-10, atol=0)
        for a, b in zip(model.predict(Xs[:50], include_noise=True),
                        ref.predict(Xs[:50], include_noise=True)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    # the same start (explicit θ, same grid): the same L-BFGS path
    start = {"init": "none", "lengthscale": [0.8, 1.1, 2.0], "outputscale": 0.9,
             "noise": 0.05, "max_iter": 3, "p": 30}
    here, r1 = fit_grief_ii(Xs, ys, **start)
    there, r2 = fit_grief_ii(rows, None, **start)
    assert r1.n_evals == r2.n_evals
    np.testing.assert_allclose(r2.objective, r1.objective, rtol=1e-10)
    torch.testing.assert_close(there.features.lengthscale, here.features.lengthscale,
                               rtol=1e-8, atol=0)
    with pytest.raises(ValueError, match="y must be None"):
        fit_grief_ii(rows, ys, **FAST)


def test_grief_fit_from_files_keeps_no_rows_and_round_trips(tmp_path):
    X, y = make_data(200, seed=2)
    folder = write_parquet(tmp_path / "train", X, y, parts=2, row_group=100)
    pred = gpscale.fit(folder, target="y", method="grief-ii", num_features=30, max_iter=2)
    assert pred.model.rows is None and pred.model.n == 200
    assert pred.model.to_config()["n"] == 200
    loaded = gpscale.load(pred.save(tmp_path / "m.pt"))
    np.testing.assert_allclose(loaded.predict(X[:30]), pred.predict(X[:30]), rtol=1e-12)
    post = gpscale.fit(folder, target="y", method="grief-i", num_features=30, n_iter=200,
                       burn=50, thin=10)
    assert getattr(post.model, "X", None) is None and post.model.n == 200
    assert post.model.to_config()["n"] == 200
    mean = post.predict(X[:60])
    assert float(np.sqrt(np.mean((mean - y[:60]) ** 2))) < 0.5 * float(np.std(y))
    again = gpscale.load(post.save(tmp_path / "p.pt"))
    assert again.model.n == 200
    np.testing.assert_allclose(again.predict(X[:30]), post.predict(X[:30]), rtol=1e-10)


def test_grief_i_from_parquet_equals_the_in_memory_statistics(tmp_path):
    """The streamed posterior's statistics are the in-memory ones at the same grid and
    θ: the same draws predict the same mixture (eq. 16 and the rotated basis)."""
    X, y = make_data(300, seed=4)
    rows, Xs, ys = streamed_rows(write_parquet(tmp_path / "train", X, y, parts=2,
                                               row_group=100))
    post, chain = fit_grief_i(rows, None, n_iter=100, burn=20, thin=10, **FAST)
    assert post.n == 300 and not {"X", "y"} & set(post.saved_state())
    f = post.features
    gram, proj, yy = FeatureGP(f, Xs, ys, weights="fixed").statistics()
    s0 = post.scale
    ref = ReweightedGriefPosterior(f, s0, gram * s0, proj * s0.sqrt(), yy, post.w,
                                   post.noise, n=300)
    for a, b in zip(post.predict(Xs[:40]), ref.predict(Xs[:40])):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    post, chain = fit_grief_i(rows, None, n_iter=100, burn=20, thin=10, basis="rotated",
                              **FAST)
    assert post.X is None and post.n == 300
    orth = OrthogonalGrief.from_statistics(gram * s0, proj * s0.sqrt(), yy, 300,
                                           normalize=False)
    ref = GriefIPosterior.from_orthogonal(f, s0, orth, post.w, post.noise)
    # eigenvalues carry absolute errors of order eps·‖ΦᵀΦ‖ (Weyl), so the small ones are
    # compared on the scale of the largest
    torch.testing.assert_close(post.sv2, ref.sv2, rtol=1e-10,
                               atol=1e-10 * float(ref.sv2.max()))
    for a, b in zip(post.predict(Xs[:40]), ref.predict(Xs[:40])):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


# -- on a real cluster ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    env = {"PYTHONPATH": str(SRC)}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env=env) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_grief_on_a_local_cluster_equals_in_process(client, tmp_path):
    """The summary, statistics and gradient passes as tasks on 2 worker processes
    (Parquet row groups read there) give the same summary and fit as in this process."""
    X, y = make_data(500, seed=1)
    folder = write_parquet(tmp_path / "train", X, y, parts=2, row_group=200)
    rows, _, _ = streamed_rows(folder)
    rows_there = Rows(rows.partitions, 3, rows.scaler, client)
    opts = {"size": 300, "max_distinct": 10, "seed": 5, "scaler": rows.scaler}
    assert_same_summary(summarize_rows(rows_there.partitions, 3, client=client, **opts),
                        summarize_rows(rows.partitions, 3, **opts), exact_y=True)
    here, r1 = fit_grief_ii(rows, None, max_iter=2, **FAST)
    there, r2 = fit_grief_ii(rows_there, None, max_iter=2, **FAST)
    assert r1.n_evals == r2.n_evals
    np.testing.assert_allclose(r2.objective, r1.objective, rtol=1e-10)
    for a, b in zip(there.predict(torch.as_tensor(X[:40])),
                    here.predict(torch.as_tensor(X[:40]))):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    post_here, _ = fit_grief_i(rows, None, n_iter=30, burn=10, thin=5, **FAST)
    post_there, _ = fit_grief_i(rows_there, None, n_iter=30, burn=10, thin=5, **FAST)
    torch.testing.assert_close(post_there.w, post_here.w, rtol=1e-8, atol=0)


def test_dask_frame_partitions_are_summarised_on_the_cluster(client):
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    X, y = make_data(400, seed=6)
    frame = dd.from_pandas(pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y}),
                           npartitions=3)
    parts = open_source(frame, target="y").partitions()
    opts = {"size": 50, "max_distinct": 10, "seed": 2}
    there = summarize_rows(parts, 3, client=client, **opts)
    here = summarize_rows(split(X, y, []), 3, **opts)
    assert_same_summary(there, here)
