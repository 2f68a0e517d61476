"""Rows with a gap training had, widened by leave-one-out (gpscale.io.gaps, issue 59): after
an exact fit by Cholesky, α_c is the mean squared standardised LOO residual of the
training rows with gap c, and a new row with that gap gets its variance of y times
max(1, α_c)."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from gapped_tables import gapped_table

import gpscale
from gpscale.api import _gap_loo
from gpscale.checksum import CHECKSUM_KEY, content_digest
from gpscale.io.gaps import LOO_MIN_ROWS, factors, loo_scales, widening
from gpscale.kernels import make_kernel, with_gaps
from gpscale.methods.auto import choose_method
from gpscale.methods.cost import EXACT_EVALS, exact_seconds
from gpscale.models.exact import ExactGP


def test_alpha_is_the_mean_of_explicit_leave_one_out_refits():
    """The library's α against a dense reference: for every row, a new GP on the other
    rows at the same θ predicts it; α_c averages (y_i − μ₋ᵢ)² / σ²₋ᵢ over the rows with
    gap c."""
    g = torch.Generator().manual_seed(3)
    n = 50
    x = torch.randn(n, 2, generator=g, dtype=torch.float64)
    marks = (torch.rand(n, 2, generator=g) < 0.4).double()
    X = torch.cat([torch.where(marks > 0, 0.0, x), marks], dim=1)
    y = torch.sin(2 * x[:, 0]) + x[:, 1] + 0.2 * torch.randn(n, generator=g,
                                                              dtype=torch.float64)
    kernel = with_gaps(make_kernel("rbf-ard", 4), [2, 3])
    with torch.no_grad():
        kernel.kernels[1].variance = torch.tensor([0.05, 0.3])  # too small for x's spread
    model = ExactGP(kernel, X, y, noise=0.04, mean="constant", mean_constant=0.1)
    z2 = []
    for i in range(n):
        rest = torch.cat([torch.arange(i), torch.arange(i + 1, n)])
        other = ExactGP(copy.deepcopy(kernel), X[rest].clone(), y[rest].clone(), noise=0.04,
                        mean="constant", mean_constant=0.1)
        with torch.no_grad():
            pred = other.predict(X[i:i + 1].clone(), include_noise=True)
        z2.append(float((y[i] - pred.mean[0]) ** 2 / pred.var[0]))
    z2 = np.array(z2)
    got = _gap_loo(model)
    for c in (2, 3):
        rows = X[:, c].numpy() == 1
        assert got[1, c] == rows.sum()
        assert got[0, c] == pytest.approx(z2[rows].mean(), rel=1e-9)
    np.testing.assert_array_equal(got[:, :2], [[1, 1], [0, 0]])  # not gap columns
    assert got[0, 3] > 1.5  # the gap's variance set too small: leave-one-out sees it


def test_no_alpha_without_a_gap_term_or_off_the_cholesky_path():
    X = torch.randn(30, 3, dtype=torch.float64)
    X[:, 2] = (X[:, 2] > 0).double()
    y = X[:, 0].clone()
    assert _gap_loo(ExactGP(make_kernel("rbf-ard", 3), X, y)) is None
    assert _gap_loo(ExactGP(with_gaps(make_kernel("rbf-ard", 3), [2]), X, y,
                            solver="cg")) is None
    assert _gap_loo(ExactGP(with_gaps(make_kernel("rbf-ard", 3), [2]), X, y)) is not None


def test_loo_scales_and_widening_against_a_loop():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    X[:, 2:] = rng.random((200, 3)) < [0.3, 0.3, 0.05]
    z2 = rng.exponential(size=200) * np.where(X[:, 2] == 1, 2.0, 1.0)
    scales = loo_scales(z2, X, [2, 3, 4])
    for c in (2, 3, 4):
        rows = X[:, c] == 1
        assert scales[1, c] == rows.sum() and scales[0, c] == pytest.approx(z2[rows].mean())
    scales[0, 3] = 0.7  # below 1: never narrows
    assert scales[1, 4] < LOO_MIN_ROWS  # too few rows: not used
    scales[0, 4] = 5.0
    per = factors(scales)
    np.testing.assert_array_equal(per, [1, 1, max(1, scales[0, 2]), 1, 1])
    got = widening(X, scales)
    for i in range(200):
        assert got[i] == (per[2] if X[i, 2] == 1 else 1.0)


# -- a fitted table: y = x + level effect + noise, a fifth of x missing ------------------------
def _table(rng, n, missing=0.2):
    return gapped_table(rng, n, missing, levels=4, spread=1.5)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    train = _table(rng, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = gpscale.fit(train, target="y", method="exact", kernel="rbf-ard", max_iter=30,
                        seed=0)
    return p, _table(rng, 60, missing=0.5), int(train["x"].isna().sum())


def _with_alpha(p, alpha):
    """``p`` with its gap column's α set (as if leave-one-out had measured it)."""
    q = copy.copy(p)
    q.gap_loo = p.gap_loo.copy()
    q.gap_loo[0, p.inputs.gap_columns()[0]] = alpha
    return q


def test_a_table_fit_by_cholesky_keeps_alpha_for_its_gap_column(fitted):
    p, _, gapped = fitted
    (c,) = p.inputs.gap_columns()
    assert p.gap_loo.shape == (2, p.n_features)
    assert p.gap_loo[1, c] == gapped  # every training row with the gap, one each
    assert p.gap_loo[0, c] > 0 and np.isfinite(p.gap_loo).all()
    assert "leave-one-out alpha" in p.summary()


def test_sgpr_keeps_no_alpha(fitted):
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sparse = gpscale.fit(_table(rng, 100), target="y", method="sgpr", m=8, max_iter=5)
    assert sparse.gap_loo is None


def test_alpha_widens_only_rows_with_that_gap(fitted):
    p, test, _ = fitted
    X = test.drop(columns="y")
    gap = X["x"].isna().to_numpy()
    assert 0 < gap.sum() < len(gap)
    plain = copy.copy(p)
    plain.gap_loo = None
    _, s0 = plain.predict(X, return_std=True)
    _, f0 = plain.predict(X, return_std=True, include_noise=False)
    wide = _with_alpha(p, 2.25)
    m1, s1 = wide.predict(X, return_std=True)
    _, f1 = wide.predict(X, return_std=True, include_noise=False)
    np.testing.assert_allclose(m1, plain.predict(X), rtol=1e-12)  # the mean never moves
    np.testing.assert_allclose(s1[gap], 1.5 * s0[gap], rtol=1e-10)
    np.testing.assert_array_equal(s1[~gap], s0[~gap])
    # f's variance gains what y's does: (α − 1) times y's
    np.testing.assert_allclose(f1[gap] ** 2, f0[gap] ** 2 + 1.25 * s0[gap] ** 2, rtol=1e-10)
    np.testing.assert_array_equal(f1[~gap], f0[~gap])
    for narrower in (0.5, 1.0):  # α at or below 1 leaves every row as it was
        np.testing.assert_array_equal(_with_alpha(p, narrower).predict(X, return_std=True)[1],
                                      s0)
    few = _with_alpha(p, 2.25)
    few.gap_loo[1] = np.minimum(few.gap_loo[1], LOO_MIN_ROWS - 1)
    np.testing.assert_array_equal(few.predict(X, return_std=True)[1], s0)


def test_alpha_saves_and_loads(fitted, tmp_path):
    p, test, _ = fitted
    wide = _with_alpha(p, 1.7)
    q = gpscale.load(wide.save(tmp_path / "m.pt"))
    np.testing.assert_array_equal(q.gap_loo, wide.gap_loo)
    for a, b in zip(wide.predict(test, return_std=True), q.predict(test, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _rewritten(p, path, **change):
    """``p``'s file with entries changed (None: removed), its checksum made again."""
    saved = p.to_dict()
    saved.pop(CHECKSUM_KEY)
    for key, value in change.items():
        if value is None:
            saved.pop(key, None)
        else:
            saved[key] = value
    torch.save({**saved, CHECKSUM_KEY: content_digest(saved)}, path)
    return path


def test_a_file_without_alpha_predicts_as_before(fitted, tmp_path):
    p, test, _ = fitted
    wide = _with_alpha(p, 1.7)
    old = gpscale.load(_rewritten(wide, tmp_path / "old.pt", gap_loo=None))
    assert old.gap_loo is None
    plain = copy.copy(p)
    plain.gap_loo = None
    for a, b in zip(old.predict(test, return_std=True), plain.predict(test, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_damaged_alpha_is_refused(fitted, tmp_path):
    p, _, _ = fitted
    bad = torch.as_tensor(p.gap_loo).clone()
    bad[0, 0] = -1.0
    with pytest.raises(ValueError, match="gap_loo"):
        gpscale.load(_rewritten(p, tmp_path / "bad.pt", gap_loo=bad))
    with pytest.raises(ValueError, match="gap_loo"):
        gpscale.load(_rewritten(p, tmp_path / "short.pt", gap_loo=bad[:, :-1].abs()))


def test_the_estimate_counts_the_leave_one_out_pass():
    kernel = make_kernel("rbf-ard", 4)
    plain = choose_method(3000, 4, kernel)
    gapped = choose_method(3000, 4, kernel, gaps=True)
    assert plain.method == gapped.method == "exact"
    assert gapped.seconds - plain.seconds == pytest.approx(exact_seconds(3000, 1))
    assert gapped.seconds == pytest.approx(exact_seconds(3000, EXACT_EVALS + 1))


def test_the_fit_leaves_time_for_the_pass_in_its_allowance(monkeypatch):
    """The fit's search ends the pass's estimated time before the allowance: with that
    estimate made enormous, a table with gaps stops at once, one without runs on."""
    import gpscale.api as api

    monkeypatch.setattr(api, "exact_seconds", lambda n, evals=EXACT_EVALS: 1e9)
    rng = np.random.default_rng(2)
    train = _table(rng, 120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gapped = gpscale.fit(train, target="y", method="auto", kernel="rbf-ard")
        whole = gpscale.fit(train.fillna(0.0), target="y", method="auto", kernel="rbf-ard")
    assert gapped.result.reason == "time allowance" and gapped.gap_loo is not None
    assert whole.result.reason != "time allowance"
