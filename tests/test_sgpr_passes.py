"""SGPR from passes over row partitions (models.sgpr_passes) against today's in-memory
SGPR and the dense Cholesky formulas: the bound, its gradient in θ, Z and σ², and the
posterior, in this process (any partition and chunk sizes) and on a real dask
LocalCluster."""

import copy
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sgpr import dense_vfe

import gpscale
from gpscale.io.rows import Rows, TensorPartition
from gpscale.kernels import RBF, Linear, Matern, Scale
from gpscale.models import SGPR, StreamedSGPR

SRC = Path(gpscale.__file__).resolve().parents[1]


def _data(n=57, d=3, m=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.sin(X @ torch.tensor([1.0, -0.5, 0.3][:d], dtype=torch.float64)) \
        + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    Z = X[:m] + 0.1 * torch.randn(m, d, generator=g, dtype=torch.float64)
    return X, y, Z


def _kernel(d=3):
    return Scale(Matern(2.5, lengthscale=[0.8, 1.3, 1.1][:d], ard_dims=d), 1.4)


def _rows(X, y, sizes, chunk=None, client=None):
    parts, s = [], 0
    for k in sizes:
        parts.append(TensorPartition(X[s : s + k], y[s : s + k]))
        s += k
    assert s == X.shape[0]
    return Rows(tuple(parts), X.shape[1], client=client, rows=chunk)


def _pair(X, y, Z, sizes=(20, 30, 7), chunk=8, client=None, noise=0.07):
    """(today's SGPR, the streamed one) at the same θ, Z and σ², separate parameters."""
    held = SGPR(_kernel(X.shape[1]), X, y, Z, noise=noise)
    streamed = StreamedSGPR(_kernel(X.shape[1]), Z, rows=_rows(X, y, sizes, chunk, client),
                            noise=noise)
    return held, streamed


def _grads(model):
    model.zero_grad()
    F = model.objective()
    F.backward()
    named = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return F.detach(), named


def _assert_same(held, streamed, rtol=1e-10):
    F1, g1 = _grads(held)
    F2, g2 = _grads(streamed)
    torch.testing.assert_close(F2, F1, rtol=rtol, atol=0)
    assert sorted(g1) == sorted(g2) and "Z" in g1 and "raw_noise" in g1
    for name in g1:  # θ (lengthscales, signal variance), Z and σ²
        torch.testing.assert_close(g2[name], g1[name], rtol=rtol, atol=rtol * g1[name].abs().max())


def test_bound_and_gradient_equal_in_memory_sgpr_and_the_dense_formula():
    X, y, Z = _data()
    held, streamed = _pair(X, y, Z)
    _assert_same(held, streamed)
    k = _kernel()
    with torch.no_grad():
        dense = dense_vfe(k(X), k(X, Z), k(Z), y, torch.tensor(0.07, dtype=torch.float64))
        torch.testing.assert_close(streamed.objective(), dense, rtol=1e-10, atol=0)
    assert streamed.n == 57 and streamed.m == 6


def test_posterior_equals_in_memory_sgpr_before_and_after_freeze():
    X, y, Z = _data(seed=1)
    held, streamed = _pair(X, y, Z)
    Xs = torch.randn(23, 3, dtype=torch.float64)
    for include_noise in (False, True):
        for a, b in zip(streamed.predict(Xs, include_noise=include_noise),
                        held.predict(Xs, include_noise=include_noise)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    streamed.freeze()
    assert streamed.rows is None and not streamed.Z.requires_grad
    for a, b in zip(streamed.predict(Xs), held.predict(Xs)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    with torch.no_grad():
        torch.testing.assert_close(streamed.objective(), held.objective(), rtol=1e-10, atol=0)
    again = StreamedSGPR.from_config(streamed.to_config(), streamed.saved_state(), _kernel())
    again.load_state_dict(streamed.saved_state())
    for a, b in zip(again.predict(Xs), held.predict(Xs)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(1, 30), min_size=1, max_size=5), chunk=st.integers(1, 40),
       n=st.integers(8, 45))
def test_any_partition_and_chunk_sizes_give_the_in_memory_bound(cuts, chunk, n):
    X, y, Z = _data(n=n, m=4, seed=n)
    sizes, left = [], n
    for c in cuts:
        if left == 0:
            break
        sizes.append(min(c, left))
        left -= sizes[-1]
    if left:
        sizes.append(left)
    held, streamed = _pair(X, y, Z, sizes=tuple(sizes), chunk=chunk)
    _assert_same(held, streamed, rtol=1e-10)


def test_a_kernel_without_a_constant_diagonal_is_refused_before_any_pass():
    X, y, Z = _data()
    with pytest.raises(ValueError, match="needs a stationary kernel.*Linear"):
        StreamedSGPR(Linear(), Z, rows=_rows(X, y, (57,)))
    StreamedSGPR(RBF(1.0), Z, rows=_rows(X, y, (57,)))  # stationary without Scale: fine


def test_learn_z_false_and_frozen_models_have_no_z_gradient():
    X, y, Z = _data()
    model = StreamedSGPR(_kernel(), Z, rows=_rows(X, y, (30, 27)), learn_z=False)
    _, grads = _grads(model)
    assert "Z" not in grads and "raw_noise" in grads


def test_on_a_local_cluster_equals_the_in_process_loop():
    distributed = pytest.importorskip("distributed")
    X, y, Z = _data(n=90, seed=4)
    env = {"PYTHONPATH": str(SRC)}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, env=env) as cluster, \
            distributed.Client(cluster) as client:
        _, here = _pair(X, y, Z, sizes=(40, 35, 15), chunk=16)
        _, there = _pair(X, y, Z, sizes=(40, 35, 15), chunk=16, client=client)
        F1, g1 = _grads(here)
        F2, g2 = _grads(there)
        torch.testing.assert_close(F2, F1, rtol=1e-12, atol=0)
        for name in g1:
            torch.testing.assert_close(g2[name], g1[name], rtol=1e-12, atol=1e-14)
        Xs = torch.randn(9, 3, dtype=torch.float64)
        for a, b in zip(copy.deepcopy(there.freeze()).predict(Xs), here.predict(Xs)):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_whitened_sums_keep_the_bound_where_unwhitened_ones_lose_its_accuracy():
    """30 000 rows, 64 inducing inputs with K_ZZ's condition number about 1e10 and a small
    noise. Sums of whitened features φ = Luu⁻¹k(Z, x) give the in-memory SGPR's bound
    without jitter, and I + W/σ² keeps every eigenvalue ≥ 1, as its form guarantees.
    Whitening the sum G = K_ZX K_XZ afterwards (what needed jitter, and derailed the fit,
    at 10⁶ rows) amplifies G's rounding by ‖Luu⁻¹‖² ≈ κ(K_ZZ): its error in W is orders
    of magnitude above the whitened route's. Whether that error tips I + W/σ² indefinite
    depends on the processor's rounding, so only the size of the error is asserted."""
    import warnings

    from gpscale.models.sgpr_stats import whiten

    g = torch.Generator().manual_seed(0)
    n, m, noise = 30_000, 64, 1e-4
    X = torch.rand(n, 2, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1]) \
        + 0.01 * torch.randn(n, generator=g, dtype=torch.float64)
    Z = torch.rand(m, 2, generator=g, dtype=torch.float64) * 4 - 2

    def kernel():
        return Scale(RBF(lengthscale=[1.0, 1.0], ard_dims=2), 1.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no jitter anywhere
        streamed = StreamedSGPR(kernel(), Z, rows=Rows((TensorPartition(X, y),), 2, rows=4096),
                                noise=noise)
        held = SGPR(kernel(), X, y, Z, noise=noise)
        with torch.no_grad():
            torch.testing.assert_close(streamed.objective(), held.objective(), rtol=1e-9, atol=0)
            W_streamed = streamed.statistics()[0]
    with torch.no_grad():
        k = kernel()
        Kzz, Kzx = k(Z), k(Z, X)
        assert torch.linalg.cond(Kzz) > 1e8  # the ill-conditioning the case is about
        V = torch.linalg.solve_triangular(torch.linalg.cholesky(Kzz), Kzx, upper=False)
        W_whitened = V @ V.mT  # in memory, one product: the reference for both routes
        W_unwhitened, _ = whiten(Kzx @ Kzx.mT, Kzx @ y, Kzz)
    eye = torch.eye(m, dtype=torch.float64)
    assert torch.linalg.eigvalsh(eye + W_streamed / noise).min() > 1 - 1e-6
    scale = torch.linalg.matrix_norm(W_whitened, ord=2)
    err_whitened = torch.linalg.matrix_norm(W_streamed - W_whitened, ord=2) / scale
    err_unwhitened = torch.linalg.matrix_norm(W_unwhitened - W_whitened, ord=2) / scale
    assert err_whitened < 1e-9  # chunked sums against one product: rounding only
    # measured: 1e-12 against 1e-7 (one and two threads, any ATen capability)
    assert err_unwhitened > 100 * max(err_whitened.item(), 1e-15), (err_unwhitened, err_whitened)


def test_a_file_written_with_unwhitened_sums_loads_to_the_same_predictions(tmp_path):
    """Model files of the first streamed SGPR hold G = K_ZX K_XZ and b = K_ZX y and no
    'statistics' entry in their options: loading whitens them."""
    X, y, Z = _data(seed=2)
    _, streamed = _pair(X, y, Z)
    with torch.no_grad():  # trained θ, unlike the kernel from_config is given
        for p in streamed.kernel.parameters():
            p.add_(0.3)
    streamed.freeze()
    state, config = streamed.saved_state(), streamed.to_config()
    with torch.no_grad():
        Kzx = streamed.kernel(Z, X)
        old = {**state, "stat_gram": Kzx @ Kzx.mT, "stat_proj": Kzx @ y}
    del config["statistics"]
    again = StreamedSGPR.from_config(config, old, _kernel())
    again.load_state_dict(old)
    Xs = torch.randn(11, 3, dtype=torch.float64)
    for a, b in zip(again.predict(Xs), streamed.predict(Xs)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
