"""Issue 48: the streamed moments carry y's third and fourth central moments (merged by
Pébay's pairwise update), and the data-quality pass reports a heavy-tailed target
before any fit, for every method, in the summary and ``gpscale info``."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parquet_data import write_parquet

import gpscale
from gpscale.io import open_source
from gpscale.io.scaling import source_scaler
from gpscale.preprocessing import Moments, Standardizer, chunk_moments
from gpscale.quality import (
    HEAVY_TAILS,
    DataQuality,
    DataQualityWarning,
    quality_from_state,
    quality_state,
)

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _chunked(A, cuts):
    edges = [0, *sorted(set(c % (len(A) + 1) for c in cuts)), len(A)]
    return [Moments.of(A[a:b]) for a, b in zip(edges[:-1], edges[1:]) if b > a]


@FUZZ
@given(n=st.integers(4, 300), k=st.integers(1, 3), seed=st.integers(0, 10_000),
       cuts=st.lists(st.integers(0, 300), max_size=6),
       tail=st.sampled_from(["normal", "t3", "lognormal", "shifted"]),
       order=st.randoms(use_true_random=False))
def test_merged_moments_equal_dense_scipy_on_any_chunking(n, k, seed, cuts, tail, order):
    rng = np.random.default_rng(seed)
    A = {"normal": lambda: rng.standard_normal((n, k)),
         "t3": lambda: rng.standard_t(3, (n, k)),
         "lognormal": lambda: rng.lognormal(0, 1.5, (n, k)),
         "shifted": lambda: 1e4 + rng.exponential(size=(n, k))}[tail]()
    parts = _chunked(A, cuts)
    order.shuffle(parts)
    m = Moments.combine(parts)
    assert m.n == n
    np.testing.assert_allclose(m.means, A.mean(0), rtol=1e-12, atol=1e-12 * np.abs(A).max())
    np.testing.assert_allclose(m.stds, A.std(0), rtol=1e-10)
    np.testing.assert_allclose(m.skewness, scipy.stats.skew(A), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(m.excess_kurtosis, scipy.stats.kurtosis(A), rtol=1e-7,
                               atol=1e-9)
    one = Moments.of(A)  # the same rows in one block: the split does not matter
    np.testing.assert_allclose(m.excess_kurtosis, one.excess_kurtosis, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-200, 1e-3, 1e250])
def test_skewness_and_kurtosis_do_not_under_or_overflow(scale):
    """Sums of fourth powers of 1e250 (or 1e-200) overflow (underflow) float64; the
    power-of-two scaling of :class:`Moments` keeps them finite and exact up to rounding."""
    rng = np.random.default_rng(4)
    a = rng.standard_t(4, 500)
    parts = [Moments.of(a[:123] * scale), Moments.of(a[123:] * scale)]
    m = parts[1].merge(parts[0])
    assert m.skewness[0] == pytest.approx(scipy.stats.skew(a), rel=1e-9)
    assert m.excess_kurtosis[0] == pytest.approx(scipy.stats.kurtosis(a), rel=1e-9)


def test_no_spread_gives_nan_not_an_error():
    m = Moments.of(np.full((5, 1), 3.0))
    assert np.isnan(m.skewness[0]) and np.isnan(m.excess_kurtosis[0])
    assert np.isnan(Moments.empty(2).excess_kurtosis).all()


def _rows(n, seed=0, heavy=True):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    noise = rng.standard_cauchy(n) if heavy else rng.standard_normal(n)
    return X, np.sin(2 * X[:, 0]) + 0.1 * noise


def _tail_warnings(got):
    return [str(w.message) for w in got if issubclass(w.category, DataQualityWarning)
            and "heavy-tailed target" in str(w.message)]


def test_a_heavy_tailed_target_warns_before_the_fit_with_what_to_do():
    X, y = _rows(400)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        s = Standardizer.fit(X, y)  # the moments pass, before any method runs
    said = _tail_warnings(got)
    assert len(said) == 1 and "outliers" in said[0] and "transform of y" in said[0]
    kurt = scipy.stats.kurtosis(y)
    assert kurt > HEAVY_TAILS
    assert s.quality.y_excess_kurtosis == pytest.approx(kurt, rel=1e-9)
    assert s.quality.y_skewness == pytest.approx(scipy.stats.skew(y), rel=1e-9)
    assert quality_from_state(quality_state(s.quality)) == s.quality


def test_a_positive_right_skewed_target_is_told_log_y():
    rng = np.random.default_rng(2)
    X, y = rng.uniform(size=(500, 2)), rng.lognormal(0, 1.5, 500)
    with pytest.warns(DataQualityWarning, match=r"heavy-tailed.*log y"):
        Standardizer.fit(X, y)


def test_a_gaussian_target_and_a_small_table_are_not_heavy_tailed():
    X, y = _rows(2000, heavy=False)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert not Standardizer.fit(X, y).quality.heavy_tailed
        X, y = _rows(60)  # too few rows to tell tails from chance
        assert not Standardizer.fit(X, y).quality.heavy_tailed
    assert not _tail_warnings(got)


def test_reports_saved_before_the_target_moments_load_without_them():
    state = quality_state(DataQuality(10, (), (), 0, True, (0.0,), (1.0,)))
    for key in ("y_skewness", "y_excess_kurtosis", "y_min"):
        del state[key]
    q = quality_from_state(state)
    assert q.y_excess_kurtosis is None and not q.heavy_tailed and q.lines() == []


@pytest.mark.parametrize("method", ["exact", "sgpr", "rff"])
def test_every_method_warns_and_its_summary_says_so(method):
    X, y = _rows(300, seed=3)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pred = gpscale.fit(X, y, method=method, kernel="rbf-ard", max_iter=5)
    assert len(_tail_warnings(got)) == 1
    assert "data quality: heavy-tailed target: y's excess kurtosis" in pred.summary()


def test_streamed_files_warn_and_info_shows_it(tmp_path, capsys):
    from gpscale import cli

    X, y = _rows(400, seed=5)
    folder = write_parquet(tmp_path / "p", np.c_[X, X[:, :1]], y, parts=3, row_group=50)
    out = tmp_path / "m.pt"
    assert cli.main(["fit", "-q", "--data", str(folder), "--target", "y", "--method",
                     "rff", "--option", "max_iter=5", "--out", str(out)]) == 0
    assert "gpscale: warning: heavy-tailed target" in capsys.readouterr().err
    assert cli.main(["info", str(out)]) == 0
    assert "heavy-tailed target" in capsys.readouterr().out


def test_streamed_moments_equal_in_memory_ones(tmp_path):
    X, y = _rows(500, seed=6)
    folder = write_parquet(tmp_path / "p", np.c_[X, X[:, :1]], y, parts=4, row_group=33)
    parts = open_source(str(folder), target="y").partitions()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        streamed = source_scaler(parts, rows=17).quality
        held = Standardizer.fit(np.c_[X, X[:, :1]], y).quality
    assert streamed.y_excess_kurtosis == pytest.approx(held.y_excess_kurtosis, rel=1e-12)
    assert streamed.y_skewness == pytest.approx(held.y_skewness, rel=1e-12)


def test_moments_on_a_local_cluster_equal_in_process(tmp_path):
    """The moments pass as tasks on a real LocalCluster (2 worker processes) merges the
    partitions' moments in partition order: the same numbers as in process, bit for bit."""
    distributed = pytest.importorskip("distributed")
    X, y = _rows(600, seed=7)
    folder = write_parquet(tmp_path / "p", np.c_[X, X[:, :1]], y, parts=5, row_group=40)
    parts = open_source(str(folder), target="y").partitions()
    src = Path(gpscale.__file__).resolve().parents[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        here = source_scaler(parts).quality
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None,
                                      env={"PYTHONPATH": os.fspath(src)}) as local, \
                distributed.Client(local) as client:
            there = source_scaler(parts, client).quality
    assert there == here and there.heavy_tailed
    mx, my = chunk_moments([(np.c_[X, X[:, :1]], y)])
    assert there.y_excess_kurtosis == pytest.approx(float(my.excess_kurtosis[0]), rel=1e-12)


def test_the_skill_check_uses_the_same_threshold():
    """One definition: the skill check's heavy-tail remark is quality.heavy_tails."""
    from gpscale.models import skill

    base = {"loo_r2": 0.0, "loo_rows": 200, "y_rows": 200}
    said = "y has heavy tails (excess kurtosis"
    assert said in skill.skill_problem({**base, "y_excess_kurtosis": HEAVY_TAILS + 1})
    assert said not in skill.skill_problem({**base, "y_excess_kurtosis": HEAVY_TAILS})
    assert not hasattr(skill, "HEAVY_TAILS")
