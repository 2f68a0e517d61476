"""The one-slot input memo and the discrete kernels' caching built on it."""

import copy
import gc
import pickle

import torch

from gpscale.kernels import Hamming, Scale, Tanimoto
from gpscale.kernels.memo import InputMemo
from gpscale.models import SparseGP


def _counts(n, F, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randint(0, 4, (n, F), generator=g).double()
    return X * (torch.rand(n, F, generator=g, dtype=torch.float64) < 0.3)


def test_memo_hits_only_for_the_same_unmodified_tensors():
    memo, calls = InputMemo(), []
    a, b = torch.ones(3), torch.zeros(2)

    def compute():
        calls.append(1)
        return a.sum() + b.sum()

    assert memo.get((a, b), compute) == 3 and memo.get((a, b), compute) == 3
    assert len(calls) == 1 and (memo.hits, memo.misses) == (1, 1)
    assert memo.get((a.clone(), b), compute) == 3 and len(calls) == 2  # equal, not same
    memo.get((a, b), compute)
    a.add_(1.0)  # in place: the version counter moves
    assert memo.get((a, b), compute) == 6 and len(calls) == 4
    memo.clear()
    memo.get((a, b), compute)
    assert len(calls) == 5


def test_memo_skips_grad_inputs_and_large_values_and_holds_no_inputs():
    memo = InputMemo(max_numel=4)
    w = torch.ones(2, requires_grad=True)
    memo.get((w,), lambda: w * 2)
    memo.get((w,), lambda: w * 2)
    assert memo.hits == 0
    x = torch.ones(5)
    memo.get((x,), lambda: x.clone())  # 5 entries > max_numel: not kept
    memo.get((x,), lambda: x.clone())
    assert memo.hits == 0
    y = torch.ones(3)
    memo.get((y,), lambda: 3.0)  # the value must not refer to y either
    ref = memo._refs[0]
    del y
    gc.collect()
    assert ref() is None  # the memo did not keep its input alive


def test_memo_copies_start_empty():
    memo = InputMemo(max_numel=7)
    x = torch.ones(2)
    memo.get((x,), lambda: x.sum())
    for other in (copy.deepcopy(memo), pickle.loads(pickle.dumps(memo))):
        assert other.max_numel == 7 and other._refs == () and other._value is None


def test_tanimoto_cache_follows_in_place_changes_and_is_not_shared():
    X, Z = _counts(30, 12, 0), _counts(5, 12, 1)
    k = Scale(Tanimoto(), 2.0)
    with torch.no_grad():
        K1 = k(X, Z)
        K1.mul_(0.0)  # the caller owns its result: the cache must not see this
        K2 = k(X, Z)  # served from the cache (Scale scales it in place under no_grad)
        K3 = k(X, Z)
    assert k.base._pair_memo.hits == 2
    fresh = 2.0 * Tanimoto()._k(X, Z)
    torch.testing.assert_close(K2, fresh, rtol=0, atol=0)
    torch.testing.assert_close(K3, fresh, rtol=0, atol=0)
    X[3] += 1.0  # in place: the next call recomputes
    torch.testing.assert_close(k(X, Z).detach(), 2.0 * Tanimoto()._k(X, Z), rtol=0, atol=0)
    # a kernel column from the cached per-input reductions equals a fresh one
    col = k.base(X, X[7:8])
    torch.testing.assert_close(col, Tanimoto()._k(X, X[7:8]), rtol=0, atol=0)


def test_hamming_cache_keeps_the_lengthscale_live():
    g = torch.Generator().manual_seed(2)
    A = torch.randint(0, 4, (9, 6), generator=g).double()
    k = Hamming(1.5)
    K1 = k(A)
    with torch.no_grad():
        k.lengthscale = torch.tensor([3.0])
    K2 = k(A)  # cached distances, new lengthscale
    assert k._pair_memo.hits == 1
    H = -1.5 * torch.log(K1.detach())
    torch.testing.assert_close(K2.detach(), torch.exp(-H / 3.0), rtol=1e-12, atol=0)
    K2.sum().backward()
    assert k.raw_lengthscale.grad is not None and k.raw_lengthscale.grad.abs() > 0


def test_sparse_gp_reuses_its_inducing_inputs_until_they_change():
    X, y = _counts(40, 10, 3), torch.randn(40, dtype=torch.float64)
    model = SparseGP(Scale(Tanimoto()), X, y, [0, 5, 9])
    assert model.Z is model.Z
    before = model.objective()
    model.objective()
    assert model.kernel.base._pair_memo.hits >= 1
    model.set_inducing([1, 5, 9])
    torch.testing.assert_close(model.Z, X[[1, 5, 9]], rtol=0, atol=0)
    fresh = SparseGP(Scale(Tanimoto()), X, y, [1, 5, 9]).objective()
    torch.testing.assert_close(model.objective(), fresh, rtol=0, atol=0)
    assert not torch.equal(before, fresh)


def test_large_inputs_are_not_held_twice(monkeypatch):
    from gpscale.kernels import discrete

    X = _counts(30, 12, 5)
    monkeypatch.setattr(discrete, "MAX_TRANSPOSED", X.numel() - 1)
    k = Tanimoto()
    col = k(X, X[4:5])
    assert k._input_memo._value.Xt is None  # statistics cached, no column-major copy
    torch.testing.assert_close(col, Tanimoto()._k(X, X[4:5]), rtol=0, atol=0)
    monkeypatch.setattr(discrete, "MAX_TRANSPOSED", X.numel())
    k2 = Tanimoto()
    k2(X, X[4:5])
    assert k2._input_memo._value.Xt is not None


def test_clear_cache_reaches_kernels_inside_sums_and_scales():
    X = _counts(20, 8, 6)
    k = Scale(Tanimoto()) + Scale(Hamming(2.0))
    codes = X.clone()
    with torch.no_grad():
        k(codes, codes[:3])
    memos = [m._pair_memo for m in k.modules() if hasattr(m, "_pair_memo")]
    assert len(memos) == 2 and all(m._value is not None for m in memos)
    k.clear_cache()
    assert all(m._value is None and m._refs == () for m in memos)
