"""Partial pivoted Cholesky, augmented QR and the O(mn) factor up/down-dates of CholQR
(Cao et al. 2013, §3.1–3.2) against fresh factorisations, in float64."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.kernels import RBF, Scale
from gpscale.linalg import CholQRFactors, augmented_qr, partial_cholesky

TOL = 1e-10


def _data(n, d, seed, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 8  # spread: K[I, I] well posed
    y = torch.randn(n, generator=g, dtype=torch.float64)
    kern = Scale(RBF(0.8, ard_dims=d), 1.3).to(device)
    return kern, X.to(device), y.to(device)


def _assert_same(f: CholQRFactors, g: CholQRFactors, tol=TOL):
    assert f.pivots == g.pivots
    for a, b in [(f.L, g.L), (f.Q, g.Q), (f.R, g.R), (f.qy, g.qy),
                 (f.resid_diag, g.resid_diag)]:
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=tol, rtol=0), float((a - b).abs().max())


class CountingKernel(torch.nn.Module):
    """Records the shapes of the kernel blocks asked for."""

    def __init__(self, base):
        super().__init__()
        self.base, self.calls = base, []

    def forward(self, X1, X2=None):
        X2 = X1 if X2 is None else X2
        self.calls.append((X1.shape[0], X2.shape[0]))
        return self.base(X1, X2)

    def diag(self, X):
        return self.base.diag(X)


def test_pivoted_cholesky_is_nystrom_and_trapezoidal(device):
    kern, X, _ = _data(40, 2, 0, device)
    piv = [7, 3, 21, 0, 39, 12]
    counting = CountingKernel(kern)
    L = partial_cholesky(counting, X, piv)
    assert all(c[1] <= len(piv) for c in counting.calls)  # never K(X, X)
    K = kern(X, X)
    idx = torch.tensor(piv, device=device)
    Khat = K[:, idx] @ torch.linalg.solve(K[idx][:, idx], K[idx, :])
    assert torch.allclose(L @ L.mT, Khat, atol=1e-10)
    for p, i in enumerate(piv):
        assert L[i, p] > 0
        assert torch.all(L[piv[:p], p] == 0) or torch.allclose(
            L[piv[:p], p], torch.zeros(p, dtype=L.dtype, device=device), atol=1e-12)
    # columnwise definition (eq. 13): ℓ_p = (K − K̂_{p−1})[:, i_p] / √(⋯)[i_p, i_p]
    for p, i in enumerate(piv):
        c = K[:, i] - L[:, :p] @ L[i, :p]
        assert torch.allclose(L[:, p], c / c[i].sqrt(), atol=1e-10)


def test_augmented_qr(device):
    kern, X, _ = _data(30, 3, 1, device)
    L = partial_cholesky(kern, X, [1, 5, 9, 2])
    sigma = torch.tensor(0.3, dtype=torch.float64, device=device)
    Q, R = augmented_qr(L, sigma)
    Lt = torch.cat([L, sigma * torch.eye(4, dtype=L.dtype, device=device)])
    assert torch.allclose(Q @ R, Lt, atol=1e-12)
    assert torch.allclose(Q.mT @ Q, torch.eye(4, dtype=L.dtype, device=device), atol=1e-12)
    assert torch.all(torch.diagonal(R) > 0) and torch.all(torch.tril(R, -1) == 0)


def test_factors_match_qr_of_augmented(device):
    kern, X, y = _data(35, 2, 2, device)
    f = CholQRFactors(kern, X, y, [4, 8, 15, 16, 23], 0.05)
    L = torch.cat([f.L, f.sigma * torch.eye(5, dtype=X.dtype, device=device)])
    assert torch.allclose(f.Q @ f.R, L, atol=1e-12)
    assert torch.allclose(f.qy, f.Q[:35].mT @ y, atol=1e-12)


@pytest.mark.parametrize("p", [0, 2, 5])
def test_swap_adjacent_equals_fresh(p, device):
    kern, X, y = _data(50, 2, 3, device)
    piv = [10, 3, 44, 27, 8, 31, 19]
    f = CholQRFactors(kern, X, y, piv, 0.1)
    f.swap_adjacent(p)
    new = piv.copy()
    new[p], new[p + 1] = new[p + 1], new[p]
    _assert_same(f, CholQRFactors(kern, X, y, new, 0.1))


@pytest.mark.parametrize("p", [0, 3, 6])
def test_remove_equals_fresh(p, device):
    kern, X, y = _data(50, 2, 4, device)
    piv = [10, 3, 44, 27, 8, 31, 19]
    f = CholQRFactors(kern, X, y, piv, 0.1)
    j, ell = f.remove(p)
    assert j == piv[p]
    assert f.Q.shape == (50 + 6, 6)
    _assert_same(f, CholQRFactors(kern, X, y, piv[:p] + piv[p + 1:], 0.1))
    f.add(j, ell)  # re-adding the returned column restores the set (now last)
    _assert_same(f, CholQRFactors(kern, X, y, piv[:p] + piv[p + 1:] + [j], 0.1))


def test_restore_last_undoes_remove_bit_for_bit(device):
    kern, X, y = _data(50, 2, 4, device)
    f = CholQRFactors(kern, X, y, [10, 3, 44, 27, 8], 0.1, capacity=6)
    before = (f.L.clone(), f.Q.clone(), f.R.clone(), f.qy.clone(), f.resid_diag.clone(),
              list(f.pivots))
    kept = f.keep_last()
    f.remove(f.k - 1)
    f.restore_last(kept)
    after = (f.L, f.Q, f.R, f.qy, f.resid_diag, f.pivots)
    for a, b in zip(before[:5], after[:5]):
        assert torch.equal(a, b)
    assert after[5] == before[5] and f.k == 5


def test_add_equals_fresh(device):
    kern, X, y = _data(45, 3, 5, device)
    f = CholQRFactors(kern, X, y, [2, 11], 0.2, capacity=6)
    for j in [40, 0, 17, 33]:
        f.add(j)
    _assert_same(f, CholQRFactors(kern, X, y, [2, 11, 40, 0, 17, 33], 0.2))
    with pytest.raises(ValueError, match="capacity"):
        f.add(5)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(12, 60), m=st.integers(1, 10), d=st.integers(1, 4),
       seed=st.integers(0, 10_000), swaps=st.integers(1, 6))
def test_random_swaps_equal_fresh(n, m, d, seed, swaps):
    m = min(m, n - 1)
    kern, X, y = _data(n, d, seed)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(n, generator=g).tolist()
    # pivots whose residual variance is >= 5% of their prior variance keep K[I, I]
    # well conditioned: near-duplicate inputs would make any two factorisations
    # differ by ~cond(K[I, I]) * eps, however computed
    f = CholQRFactors(kern, X, y, perm[:1], 0.07, capacity=m)
    for j in perm[1:]:
        if f.k < m and f.new_column(j, rtol=0.05) is not None:
            f.add(j)
    m = f.k
    for _ in range(swaps):
        p = int(torch.randint(m, (1,), generator=g))
        removed, ell = f.remove(p)
        _assert_same(f, CholQRFactors(kern, X, y, f.pivots, 0.07))
        good = [i for i in range(n)
                if i not in f.pivots and f.new_column(i, rtol=0.05) is not None]
        if not good:
            f.add(removed, ell)
            continue
        f.add(good[int(torch.randint(len(good), (1,), generator=g))])
        _assert_same(f, CholQRFactors(kern, X, y, f.pivots, 0.07))
    assert f.k == m


def test_bad_pivots():
    kern, X, y = _data(10, 1, 6)
    with pytest.raises(ValueError, match="duplicate"):
        CholQRFactors(kern, X, y, [1, 2, 1], 0.1)
    with pytest.raises(ValueError, match="outside"):
        partial_cholesky(kern, X, [0, 10])
    with pytest.raises(ValueError, match="empty"):
        partial_cholesky(kern, X, [])
    with pytest.raises(ValueError, match="integer"):
        partial_cholesky(kern, X, torch.tensor([0.0, 1.0]))
    f = CholQRFactors(kern, X, y, [1, 2], 0.1, capacity=3)
    with pytest.raises(ValueError, match="already"):
        f.add(2)
    with pytest.raises(ValueError, match="position"):
        f.remove(5)


@pytest.mark.parametrize("p", [0, 1, 4, 7])
def test_move_to_last_equals_adjacent_swaps(p, device):
    kern, X, y = _data(70, 3, 7, device)
    piv = [5, 60, 12, 33, 47, 2, 19, 58, 41]
    f = CholQRFactors(kern, X, y, piv, 0.1)
    g = CholQRFactors(kern, X, y, piv, 0.1)
    f.move_to_last(p)
    for q in range(p, len(piv) - 1):
        g.swap_adjacent(q)
    _assert_same(f, g, tol=1e-12)
    _assert_same(f, CholQRFactors(kern, X, y, piv[:p] + piv[p + 1:] + [piv[p]], 0.1))


@pytest.mark.parametrize("block", [1, 3, 16])
@pytest.mark.parametrize("p", [0, 5, 31, 38])
def test_move_to_last_blocked_equals_fresh_factors(p, block, device, monkeypatch):
    """Many pivots (40 > 2 blocks): the blocked carry products across block
    boundaries give the factors of a fresh factorisation in the new order."""
    from gpscale.linalg import qr_update

    monkeypatch.setattr(qr_update, "BLOCK", block)
    kern, X, y = _data(150, 2, 11, device)
    piv = torch.randperm(150, generator=torch.Generator().manual_seed(3))[:40].tolist()
    f = CholQRFactors(kern, X, y, piv, 0.1)
    f.move_to_last(p)
    _assert_same(f, CholQRFactors(kern, X, y, piv[:p] + piv[p + 1:] + [piv[p]], 0.1))
