"""Discrete kernels against naive per-pair formulas, PSD checks, chunking, config."""

from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.kernels import (
    KERNELS,
    Hamming,
    Intersection,
    Scale,
    Spectrum,
    Sum,
    Tanimoto,
    TanimotoDot,
    discrete,
    from_config,
    make_kernel,
    scaled_sum,
)
from gpscale.kernels.discrete import Counts, min_sum


def _counts(n, F, seed, top=5, p0=0.6):
    g = np.random.default_rng(seed)
    X = g.integers(0, top + 1, size=(n, F)).astype(float)
    X[g.random((n, F)) < p0] = 0.0
    return X


def naive(kind, A, B, ls=1.0):
    K = np.zeros((len(A), len(B)))
    for i, a in enumerate(A):
        for j, b in enumerate(B):
            if kind == "tanimoto":
                mx = np.maximum(a, b).sum()
                K[i, j] = np.minimum(a, b).sum() / mx if mx > 0 else 1.0
            elif kind == "dot":
                den = a @ a + b @ b - a @ b
                K[i, j] = a @ b / den if den > 0 else 1.0
            elif kind == "intersection":
                K[i, j] = np.minimum(a, b).sum()
            elif kind == "hamming":
                K[i, j] = np.exp(-np.sum(a != b) / ls)
            elif kind == "spectrum":
                na, nb = np.linalg.norm(a), np.linalg.norm(b)
                K[i, j] = a @ b / (na * nb) if na > 0 and nb > 0 else 0.0
    return K


CASES = {
    "tanimoto": lambda: Tanimoto(),
    "dot": lambda: TanimotoDot(),
    "intersection": lambda: Intersection(),
    "hamming": lambda: Hamming(2.5),
    "spectrum": lambda: Spectrum(),
}


def _inputs(kind, n1, n2, seed):
    if kind == "hamming":
        g = np.random.default_rng(seed)
        return g.integers(0, 4, (n1, 7)).astype(float), g.integers(0, 4, (n2, 7)).astype(float)
    A, B = _counts(n1, 9, seed), _counts(n2, 9, seed + 1)
    A[0] = 0.0  # an empty row exercises the 0/0 conventions
    return A, B


@pytest.mark.parametrize("kind", sorted(CASES))
def test_against_naive(kind, device):
    A, B = _inputs(kind, 6, 5, 0)
    k = CASES[kind]().to(device)
    tA, tB = (torch.tensor(v, device=device) for v in (A, B))
    ref = naive(kind, A, B, ls=2.5)
    np.testing.assert_allclose(k(tA, tB).detach().cpu().numpy(), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k.diag(tA).detach().cpu().numpy(), np.diag(naive(kind, A, A, 2.5)),
                               rtol=1e-12, atol=1e-14)


def test_binary_tanimoto_forms_agree():
    A = (np.random.default_rng(3).random((8, 20)) < 0.3).astype(float)
    t = torch.tensor(A)
    torch.testing.assert_close(Tanimoto()(t), TanimotoDot()(t), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_psd(kind):
    A, _ = _inputs(kind, 40, 1, 5)
    K = CASES[kind]()(torch.tensor(A)).detach()
    assert torch.allclose(K, K.mT, atol=1e-14)
    assert torch.linalg.eigvalsh(K).min() >= -1e-10


@settings(max_examples=40, deadline=None)
@given(n1=st.integers(1, 12), n2=st.integers(1, 12), F=st.integers(1, 30),
       seed=st.integers(0, 10_000), frac=st.booleans(), p0=st.sampled_from([0.6, 0.95]))
def test_min_sum_paths_and_chunking(n1, n2, F, seed, frac, p0):
    # p0 = 0.95: sparse rows, so the joint support of the two inputs is a strict (often
    # empty) subset of the columns, as for fingerprints
    A, B = _counts(n1, F, seed, p0=p0), _counts(n2, F, seed + 7, p0=p0)
    if frac:  # non-integer: broadcast path
        A, B = A * 0.37, B * 1.3
    ref = np.minimum(A[:, None, :], B[None]).sum(-1)
    tA, tB = torch.tensor(A), torch.tensor(B)
    for small in (0, discrete.MAX_SMALL_BROADCAST):  # 0: integers take the threshold path
        with mock.patch.object(discrete, "MAX_SMALL_BROADCAST", small):
            for budget in (1, 64, 2**26):  # 1 byte: one row per block
                np.testing.assert_allclose(min_sum(tA, tB, budget).numpy(), ref,
                                           rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(Tanimoto(budget=1)(tA, tB).numpy(),
                               Tanimoto()(tA, tB).numpy(), rtol=1e-14, atol=0)


def test_min_sum_on_disjoint_and_partial_supports():
    A = torch.tensor([[1.0, 2.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]])
    B = torch.tensor([[0.0, 0.0, 4.0, 1.0]])  # no column in common with A
    assert torch.equal(min_sum(A, B), torch.zeros(2, 1, dtype=A.dtype))
    torch.testing.assert_close(Tanimoto()(A, B), torch.zeros(2, 1, dtype=A.dtype))
    C = torch.tensor([[5.0, 1.0, 0.0, 7.0]])  # shares columns 0 and 1 with A only
    torch.testing.assert_close(min_sum(A, C), torch.tensor([[2.0], [1.0]], dtype=A.dtype))
    # precomputed reductions (with a column-major copy) give the same answer
    pre = Counts.of(A, "test", transposed=True), Counts.of(C, "test")
    torch.testing.assert_close(min_sum(*pre), min_sum(A, C))


def test_integer_path_equals_broadcast_on_large_counts():
    A = _counts(30, 50, 1, top=40, p0=0.8)
    tA = torch.tensor(A)
    with mock.patch.object(discrete, "MAX_SMALL_BROADCAST", 0):  # 30·30·50 is "small"
        fast = min_sum(tA, tA)
    slow = min_sum(tA + 0.5, tA + 0.5) - 0.5 * 50  # shifted: forces the broadcast path
    torch.testing.assert_close(fast, slow, rtol=1e-13, atol=1e-10)


def test_hamming_chunked_and_gradient():
    A, B = _inputs("hamming", 9, 4, 2)
    k1, k2 = Hamming(1.7, budget=1), Hamming(1.7)
    tA, tB = torch.tensor(A), torch.tensor(B)
    torch.testing.assert_close(k1(tA, tB).detach(), k2(tA, tB).detach(), rtol=1e-14, atol=0)
    # analytic: d/dl Σ exp(−H/l) = Σ H/l² exp(−H/l), chained through the softplus
    H = torch.tensor(-np.log(naive("hamming", A, B, 1.0)))
    ls = k2.lengthscale.detach()
    expect = (H / ls**2 * torch.exp(-H / ls)).sum() * torch.sigmoid(k2.raw_lengthscale.detach())
    k2(tA, tB).sum().backward()
    torch.testing.assert_close(k2.raw_lengthscale.grad, expect.reshape(1), rtol=1e-12, atol=0)


def test_errors():
    with pytest.raises(ValueError, match="non-negative"):
        Tanimoto()(torch.tensor([[1.0, -1.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        Intersection()(torch.tensor([[1.0, -1.0]]))
    with pytest.raises(ValueError, match="integer"):
        Hamming()(torch.tensor([[1.0, 0.5]]))
    with pytest.raises(ValueError, match="equal length"):
        Hamming()(torch.zeros(2, 3), torch.zeros(2, 4))
    ok = torch.ones(2, 2)
    for bad in (float("nan"), float("inf"), -float("inf")):
        for k in (Tanimoto(), Intersection(), TanimotoDot()):
            with pytest.raises(ValueError, match="NaN or inf"):
                k(torch.tensor([[1.0, bad]]), ok)
            with pytest.raises(ValueError, match="NaN or inf"):
                k(ok, torch.tensor([[bad, 0.0]]))
    with pytest.raises(ValueError, match="budget"):
        Tanimoto(budget=0)
    with pytest.raises(ValueError, match="variances"):
        scaled_sum(Tanimoto(), Spectrum(), variances=[1.0])


@pytest.mark.parametrize("name", ["tanimoto", "tanimoto-dot", "intersection", "hamming",
                                  "spectrum"])
def test_names_and_config_round_trip(name):
    assert name in KERNELS
    k = make_kernel(name, 7)
    A, _ = _inputs("hamming" if name == "hamming" else "tanimoto", 5, 1, 4)
    with torch.no_grad():
        for p in k.parameters():
            p.add_(0.3)
    k2 = from_config(k.config())
    k2.load_state_dict(k.state_dict())
    torch.testing.assert_close(k(torch.tensor(A)), k2(torch.tensor(A)), rtol=0, atol=0)


def test_compound_sum_one_variance_per_component():
    A = _counts(7, 12, 9)
    k = scaled_sum(Tanimoto(active_dims=list(range(6))),
                   Intersection(active_dims=list(range(6, 12))), variances=[0.5, 2.0])
    assert isinstance(k, Sum) and all(isinstance(c, Scale) for c in k.kernels)
    ref = 0.5 * naive("tanimoto", A[:, :6], A[:, :6]) + 2.0 * naive("intersection", A[:, 6:],
                                                                     A[:, 6:])
    t = torch.tensor(A)
    np.testing.assert_allclose(k(t).detach().numpy(), ref, rtol=1e-13)
    np.testing.assert_allclose(k.diag(t).detach().numpy(), np.diag(ref), rtol=1e-13)
    assert len([p for p in k.parameters()]) == 2
    k2 = from_config(k.config())
    k2.load_state_dict(k.state_dict())
    torch.testing.assert_close(k2(t), k(t))
    # gradient flows to both variances
    k(t).sum().backward()
    assert all(p.grad is not None and p.grad.abs() > 0 for p in k.parameters())


def test_broadcast_blocks_respect_budget(monkeypatch):
    """The non-integer path never materialises more than ``budget`` bytes per block."""
    seen = []
    real = torch.minimum

    def spy(a, b):
        out = real(a, b)
        if out.dim() == 3:  # a block of the n1 x n2 x F broadcast
            seen.append(out.numel() * out.element_size())
        return out

    monkeypatch.setattr(torch, "minimum", spy)
    A = torch.tensor(_counts(50, 40, 2)) * 0.5 + 0.25
    budget = 40 * 50 * 8 * 3  # three rows of the 50 x 40 slab
    K = Tanimoto(budget=budget)(A)
    assert max(seen) <= budget and len(seen) == 17  # ceil(50 / 3) blocks
    monkeypatch.setattr(torch, "minimum", real)
    ref = np.minimum(A.numpy()[:, None], A.numpy()[None]).sum(-1)
    mx = A.numpy().sum(1)[:, None] + A.numpy().sum(1)[None] - ref
    np.testing.assert_allclose(K.numpy(), ref / mx, rtol=1e-13)


@pytest.mark.parametrize("name", ["tanimoto", "tanimoto-dot", "intersection", "hamming",
                                  "spectrum"])
def test_vjp_matches_autograd_on_valid_inputs(name, device):
    """Kernel.vjp (used by the exact GP and kernel_matmul) on inputs each kernel accepts
    (integer codes for Hamming)."""
    kind = "hamming" if name == "hamming" else "tanimoto"
    A, B = (torch.tensor(v, device=device) for v in _inputs(kind, 6, 5, 8))
    k = make_kernel(name, A.shape[1]).to(device)
    with torch.no_grad():
        for p in k.parameters():
            p.add_(0.4)
    G = torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    G = G.to(device)
    grads, inner = k.vjp(A, B, G)
    K = k(A, B)
    params = [p for p in k.parameters() if p.requires_grad]
    ref = torch.autograd.grad((G * K).sum(), params)
    torch.testing.assert_close(inner, (G * K).sum().detach(), rtol=1e-12, atol=1e-12)
    for p, r in zip(params, ref):
        torch.testing.assert_close(grads[p], r, rtol=1e-10, atol=1e-12)
