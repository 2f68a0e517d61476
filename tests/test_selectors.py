"""Inducing-set selectors against dense references."""

import math

import numpy as np
import pytest
import torch

from gpscale.kernels import RBF, Scale, Tanimoto
from gpscale.train.selectors import (
    IncrementalVFE,
    select_greedy,
    select_ivm,
    select_random,
    select_variance,
)


def _data(n=25, d=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X.to(device), y.to(device)


def dense_objective(K, y, idx, s2, vfe=True):
    """−log N(y | 0, Q + σ²I) (+ tr(K − Q)/(2σ²)), Q the Nyström approximation on idx."""
    n = K.shape[0]
    if len(idx):
        KI = K[:, idx]
        Q = KI @ torch.linalg.solve(K[np.ix_(idx, idx)], KI.mT)
    else:
        Q = torch.zeros_like(K)
    C = Q + s2 * torch.eye(n, dtype=K.dtype, device=K.device)
    f = 0.5 * (y @ torch.linalg.solve(C, y) + torch.logdet(C) + n * math.log(2 * math.pi))
    return float(f + (torch.trace(K - Q) / (2 * s2) if vfe else 0.0))


def naive_pivoted_cholesky(K, m):
    K = K.clone()
    piv = []
    for _ in range(m):
        d = torch.diagonal(K).clone()
        d[piv] = -math.inf
        i = int(d.argmax())
        piv.append(i)
        col = K[:, i] / math.sqrt(K[i, i])
        K = K - torch.outer(col, col)
    return piv


def test_random():
    a = select_random(50, 10, seed=3)
    assert a.dtype == torch.long and len(set(a.tolist())) == 10 and a.max() < 50
    assert torch.equal(a, select_random(50, 10, seed=3))
    assert not torch.equal(a, select_random(50, 10, seed=4))


def test_variance_equals_naive(device):
    X, _ = _data(30, device=device)
    k = Scale(RBF(0.8), 1.3).to(device)
    idx = select_variance(k, X, 12)
    with torch.no_grad():
        ref = naive_pivoted_cholesky(k(X).cpu(), 12)
    assert idx.tolist() == ref
    assert idx.device.type == device.type


def test_variance_rank_deficient_still_distinct():
    X = torch.tensor([[0.0], [0.0], [1.0], [1.0]], dtype=torch.float64)
    idx = select_variance(RBF(0.5), X, 4)
    assert sorted(idx.tolist()) == [0, 1, 2, 3]


@pytest.mark.parametrize("objective", ["vfe", "dtc"])
def test_greedy_incremental_objective_equals_dense(objective, device):
    X, y = _data(22, device=device)
    k = Scale(RBF(0.7), 1.1).to(device)
    s2 = 0.05
    idx, trace = select_greedy(k, X, y, s2, 8, candidates=5, seed=1, objective=objective,
                               return_objective=True)
    with torch.no_grad():
        K = k(X).cpu()
    for j in range(8):
        ref = dense_objective(K, y.cpu(), idx[: j + 1].tolist(), s2, objective == "vfe")
        assert trace[j] == pytest.approx(ref, rel=1e-10, abs=1e-9)
    st = IncrementalVFE(k, X, y, s2, 1, objective)
    assert st.value == pytest.approx(dense_objective(K, y.cpu(), [], s2, objective == "vfe"),
                                     rel=1e-12)


def test_greedy_with_all_candidates_is_dense_greedy():
    X, y = _data(15, seed=4)
    k = Scale(RBF(0.6), 1.0)
    s2 = 0.1
    idx = select_greedy(k, X, y, s2, 5, candidates=10_000)
    with torch.no_grad():
        K = k(X)
    chosen: list[int] = []
    for _ in range(5):
        rest = [i for i in range(15) if i not in chosen]
        vals = [dense_objective(K, y, chosen + [i], s2) for i in rest]
        chosen.append(rest[int(np.argmin(vals))])
    assert idx.tolist() == chosen


def test_greedy_discrete_kernel_distinct():
    g = np.random.default_rng(0)
    X = torch.tensor(g.integers(0, 3, (40, 16)).astype(float))
    y = torch.tensor(g.standard_normal(40))
    idx = select_greedy(Scale(Tanimoto()), X, y, 0.1, 20, candidates=16, seed=2)
    assert len(set(idx.tolist())) == 20 and idx.min() >= 0 and idx.max() < 40


def test_ivm_scores_against_naive(device):
    X, y = _data(26, seed=2, device=device)
    k = Scale(RBF(0.5), 0.9).to(device)
    s2 = 0.2
    idx, scores = select_ivm(k, X, y, s2, 9, return_scores=True)
    with torch.no_grad():
        K = k(X).cpu()
    chosen: list[int] = []
    for j in range(9):
        if chosen:
            KI = K[:, chosen]
            A = K[np.ix_(chosen, chosen)] + s2 * torch.eye(len(chosen), dtype=K.dtype)
            zeta = torch.diagonal(K) - (KI * torch.linalg.solve(A, KI.mT).mT).sum(1)
        else:
            zeta = torch.diagonal(K).clone()
        delta = 0.5 * torch.log1p(zeta / s2)
        delta[chosen] = -math.inf
        best = int(delta.argmax())
        assert idx[j].item() == best
        assert scores[j] == pytest.approx(float(delta[best]), rel=1e-10)
        chosen.append(best)
    assert len(set(idx.tolist())) == 9


@pytest.mark.parametrize("fn", ["random", "variance", "greedy", "ivm"])
def test_errors(fn):
    X, y = _data(6)
    k = RBF(1.0)
    call = {"random": lambda m: select_random(6, m),
            "variance": lambda m: select_variance(k, X, m),
            "greedy": lambda m: select_greedy(k, X, y, 0.1, m),
            "ivm": lambda m: select_ivm(k, X, y, 0.1, m)}[fn]
    with pytest.raises(ValueError, match="m must be"):
        call(7)
    with pytest.raises(ValueError, match="m must be"):
        call(0)
    idx = call(6)
    assert sorted(idx.tolist()) == list(range(6))


def test_bad_noise_and_candidates():
    X, y = _data(6)
    with pytest.raises(ValueError, match="noise"):
        select_greedy(RBF(1.0), X, y, -1.0, 2)
    with pytest.raises(ValueError, match="candidates"):
        select_greedy(RBF(1.0), X, y, 0.1, 2, candidates=0)
    with pytest.raises(ValueError, match="objective"):
        select_greedy(RBF(1.0), X, y, 0.1, 2, objective="elbo")


@pytest.mark.parametrize("objective", ["vfe", "dtc"])
def test_candidate_gains_equal_dense(objective):
    """Eqs. 14–16: the predicted objective of every candidate vs a dense refit."""
    X, y = _data(18, seed=5)
    k = Scale(RBF(0.9), 0.8)
    s2 = 0.07
    st = IncrementalVFE(k, X, y, s2, 5, objective)
    chosen = [3, 11, 0]
    for i in chosen:
        ell = st.columns(torch.tensor([i]))
        _, r, rho, c = st.gains(ell)
        st.add(ell[:, 0], r[:, 0], rho[0], c[0])
    rest = torch.tensor([i for i in range(18) if i not in chosen])
    vals, *_ = st.gains(st.columns(rest))
    with torch.no_grad():
        K = k(X)
    ref = [dense_objective(K, y, chosen + [int(i)], s2, objective == "vfe") for i in rest]
    np.testing.assert_allclose(vals.numpy(), ref, rtol=1e-10)


def test_greedy_trace_matches_sparsegp_objective():
    sparse = pytest.importorskip("gpscale.models.sparse", reason="SparseGP not available")
    X, y = _data(20, seed=6)
    k = Scale(RBF(0.8), 1.0)
    for objective in ("vfe", "dtc"):
        idx, trace = select_greedy(k, X, y, 0.1, 6, candidates=4, objective=objective,
                                   return_objective=True)
        model = sparse.SparseGP(k, X, y, idx, noise=0.1, objective=objective)
        with torch.no_grad():
            assert float(model.objective().detach()) == pytest.approx(trace[-1], rel=1e-10)


def test_fit_selected_alternates_and_improves():
    pytest.importorskip("gpscale.train.cholqr", reason="CholQR trainer not available yet")
    from gpscale.train.baselines import fit_selected

    X, y = _data(60, seed=7)
    for name in ("random", "ivm", "greedy", "variance"):
        model, res = fit_selected(name, X, y, Scale(RBF(1.0)), 8, noise=0.2, epochs=3,
                                  seed=1)
        assert model.m == 8 and len(set(model.inducing.tolist())) == 8
        with torch.no_grad():
            assert float(model.objective().detach()) == pytest.approx(res.objective, rel=1e-9)
        assert res.objective == min(h["objective"] for h in res.history)
        assert 1 <= len(res.history) <= 3 and res.n_evals > 0
    with pytest.raises(ValueError, match="unknown selector"):
        fit_selected("best", X, y, RBF(1.0), 4)
