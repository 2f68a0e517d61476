"""A table's missing numbers modelled, not imputed (gpscale.kernels.gaps, issue 59 item 1):
the variance a row's unknown value adds to f is a white term of its own, learned, so
the noise stays the noise and a gapped row's interval is as wide as its gap makes it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gapped_tables import gapped_table
from hypothesis import given, settings
from hypothesis import strategies as st

import gpscale
from gpscale.kernels import GapVariance, from_config, gap_rows, make_kernel, with_gaps
from gpscale.methods.kernel_choice import modelled_gaps
from gpscale.methods.registry import get_method
from gpscale.models.copies import merge_copies
from gpscale.models.exact import ExactGP


def _gapped(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g, dtype=torch.float64)
    marks = (torch.rand(n, 2, generator=g) < 0.3).double()
    return torch.cat([torch.where(marks > 0, 0.0, x), marks], dim=1)


def test_the_term_is_white_on_the_same_rows_and_zero_between_others():
    X = _gapped()
    k = GapVariance([2, 3], [0.5, 2.0])
    expected = torch.diag(0.5 * X[:, 2] + 2.0 * X[:, 3])  # the values through softplus
    torch.testing.assert_close(k(X), expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(k(X, X), expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(k(X[5:20], X[5:20]), expected[5:20, 5:20], rtol=1e-12, atol=0)
    assert not k(X, X.clone()).any()  # other rows with equal values: not the same rows
    assert not k(X[:10], X[10:20]).any()
    # blocks of one tensor's rows, of other sizes and overlapping: the rows they share
    torch.testing.assert_close(k(X[5:20], X[10:40]), expected[5:20, 10:40], rtol=1e-12, atol=0)
    torch.testing.assert_close(k(X[10:40], X), expected[10:40], rtol=1e-12, atol=0)
    torch.testing.assert_close(k.diag(X), torch.diagonal(expected), rtol=1e-12, atol=0)


def test_its_gradient_contraction_is_autograd_s():
    X = _gapped()
    k = GapVariance([2, 3], [0.5, 2.0])
    G = torch.randn(40, 40, dtype=torch.float64)
    grads, value = k.vjp(X, X, G)
    K = k(X)
    (auto,) = torch.autograd.grad((G * K).sum(), [k.raw_variance])
    torch.testing.assert_close(grads[k.raw_variance], auto, rtol=1e-12, atol=1e-14)
    assert float(value) == pytest.approx(float((G * K.detach()).sum()), rel=1e-12)
    grads, value = k.vjp(X, X.clone(), G)
    assert float(value) == 0 and not grads[k.raw_variance].any()
    # a block against the whole: the contraction of that block of K
    grads, value = k.vjp(X[5:25], X, G[5:25])
    (auto,) = torch.autograd.grad((G[5:25] * k(X)[5:25]).sum(), [k.raw_variance])
    torch.testing.assert_close(grads[k.raw_variance], auto, rtol=1e-12, atol=1e-14)


def test_a_blocked_product_is_the_dense_one():
    from gpscale.kernels import kernel_matmul

    X = _gapped(50)
    k = with_gaps(make_kernel("rbf-ard", 4), [2, 3])
    V = torch.randn(50, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(kernel_matmul(k, X, X, V, block=7), k(X) @ V,
                               rtol=1e-12, atol=1e-12)


def test_the_exact_nlml_is_the_dense_gaussian_s_with_the_gap_variance_on_the_diagonal():
    X = _gapped(60)
    y = torch.sin(X[:, 0]) + 0.3 * torch.randn(60, generator=torch.Generator().manual_seed(1),
                                                 dtype=torch.float64)
    kernel = with_gaps(make_kernel("rbf-ard", 4), [2, 3])
    model = ExactGP(kernel, X, y, noise=0.05)
    with torch.no_grad():
        kernel.kernels[1].variance = torch.tensor([0.4, 0.9])
    value = model.nlml()
    value.backward()
    params = [p for p in model.parameters() if p.requires_grad]
    got = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    K = kernel.kernels[0](X) + torch.diag(X[:, 2:] @ kernel.kernels[1].variance)
    C = K + model.noise * torch.eye(60, dtype=torch.float64)
    dense = -torch.distributions.MultivariateNormal(torch.zeros(60, dtype=torch.float64),
                                                    covariance_matrix=C).log_prob(y)
    assert float(value.detach()) == pytest.approx(float(dense.detach()), rel=1e-10)
    want = torch.autograd.grad(dense, params)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


def test_it_saves_and_loads_as_a_kernel():
    k = with_gaps(make_kernel("matern52-ard", 4), [3])
    with torch.no_grad():
        k.kernels[1].variance = torch.tensor([0.7])
    again = from_config(k.config())
    again.load_state_dict(k.state_dict())
    X = _gapped()
    torch.testing.assert_close(again(X), k(X), rtol=0, atol=0)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 2**16), share=st.floats(0.0, 1.0))
def test_rows_with_a_gap_are_never_merged_as_copies(n, seed, share):
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(rng.integers(0, 2, (n, 2)), dtype=torch.float64)  # many copies
    X[:, 1] = torch.as_tensor(rng.random(n) < share, dtype=torch.float64)  # the gap mark
    y = torch.as_tensor(rng.normal(size=n))
    apart = gap_rows(with_gaps(make_kernel("rbf", 2), [1]), X)
    Xm, ym, copies = merge_copies(X, y, apart=apart)
    counts = torch.ones(len(ym), dtype=torch.float64) if copies is None else copies.counts
    assert float(counts.sum()) == n  # every row accounted for
    assert float((counts * ym).sum()) == pytest.approx(float(y.sum()), abs=1e-9)
    gapped = Xm[:, 1] != 0
    assert int(gapped.sum()) == int(apart.sum()) and (counts[gapped] == 1).all()
    rest = Xm[~gapped]
    assert torch.unique(rest, dim=0).shape[0] == rest.shape[0]  # the others merged


def test_only_the_exact_gp_by_cholesky_models_the_gaps():
    X = _gapped()
    exact = get_method("exact")
    assert modelled_gaps(exact, {}, X, [2, 3]) == (2, 3)
    assert modelled_gaps(exact, {"solver": "cg"}, X, [2, 3]) == ()
    assert modelled_gaps(get_method("sgpr"), {}, X, [2, 3]) == ()
    assert modelled_gaps(exact, {}, X, []) == ()


# -- a table with a known truth: y = x + effect[level] + noise, 10 % of x missing -------------
NOISE = 0.1


def _table(rng, n, missing=0.1):
    return gapped_table(rng, n, missing, levels=6, spread=2.0, noise=NOISE)


@pytest.fixture(scope="module")
def gapped_fit():
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = gpscale.fit(_table(rng, 1000), target="y", method="exact", seed=0)
    return p, rng


def test_the_noise_is_the_noise_when_a_tenth_of_a_number_is_missing(gapped_fit):
    p, _ = gapped_fit
    assert any(isinstance(k, GapVariance) for k in p.kernel.modules())
    noise_std = float(p.model.noise.detach()) ** 0.5 * p.scaler.y_scale
    assert noise_std == pytest.approx(NOISE, rel=0.2)


def test_complete_and_gapped_rows_both_keep_calibrated_intervals(gapped_fit):
    p, rng = gapped_fit
    test = _table(rng, 2000, missing=0.5)
    m, s = p.predict(test.drop(columns="y"), return_std=True)
    inside = np.abs(test["y"].to_numpy() - m) < 1.96 * s
    gap = test["x"].isna().to_numpy()
    assert 0.92 <= inside[~gap].mean() <= 0.98
    assert 0.92 <= inside[gap].mean() <= 0.98
    assert np.median(s[gap]) > 5 * np.median(s[~gap])  # x's spread, not the noise's


def test_a_named_kernel_models_the_gaps_too_and_sgpr_keeps_the_indicator(gapped_fit):
    _, rng = gapped_fit
    df = _table(rng, 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        named = gpscale.fit(df, target="y", method="exact", kernel="rbf-ard", max_iter=30)
        sparse = gpscale.fit(df, target="y", method="sgpr", m=16, max_iter=20)
    assert any(isinstance(k, GapVariance) for k in named.kernel.modules())
    assert not any(isinstance(k, GapVariance) for k in sparse.kernel.modules())


def test_a_model_with_gap_variance_saves_and_loads(gapped_fit, tmp_path):
    p, rng = gapped_fit
    test = _table(rng, 50, missing=0.5)
    q = gpscale.load(p.save(tmp_path / "m.pt"))
    for a, b in zip(p.predict(test, return_std=True), q.predict(test, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gapped_rows_count_one_each_in_the_solver_decision(monkeypatch):
    """Rows with a gap are never merged, so a fit whose merged rows would fit a Cholesky
    can need CG once they are counted one each: the gaps are then not modelled."""
    import gpscale.methods.exact as exact

    seen = []
    monkeypatch.setattr(exact, "too_large", lambda n, *a, **k: seen.append(n) or n > 100)
    X = torch.zeros(2000, 2, dtype=torch.float64)  # one input, many copies
    X[:1000, 1] = 1.0  # half of them with a gap
    assert modelled_gaps(get_method("exact"), {}, X, [1]) == ()
    assert seen[-1] == 1 + 1000  # the copies merged, the gapped rows one each
    X[:, 1] = 0.0
    assert modelled_gaps(get_method("exact"), {}, X, [1]) == (1,)  # 2000 copies of one row
