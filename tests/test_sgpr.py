"""SGPR (Titsias VFE with free inducing inputs) against dense formulas."""

import math

import pytest
import torch

from gpscale.kernels import RBF, Scale
from gpscale.models.exact import ExactGP
from gpscale.models.sgpr import SGPR
from gpscale.train.sgpr import fit_sgpr, kmeans


def _data(n=30, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, generator=g,
                                                                     dtype=torch.float64)
    return X.to(device), y.to(device)


def dense_vfe(K, Kxz, Kzz, y, s2):
    n = K.shape[0]
    Q = Kxz @ torch.linalg.solve(Kzz, Kxz.mT)
    C = Q + s2 * torch.eye(n, dtype=K.dtype, device=K.device)
    nll = 0.5 * (y @ torch.linalg.solve(C, y) + torch.logdet(C) + n * math.log(2 * math.pi))
    return nll + torch.trace(K - Q) / (2 * s2)


def test_bound_equals_dense(device):
    X, y = _data(device=device)
    Z = X[:7] + 0.05
    k = Scale(RBF(0.9, ard_dims=2), 1.2)
    model = SGPR(k, X, y, Z, noise=0.03, device=device)
    with torch.no_grad():
        ref = dense_vfe(k(X), k(X, Z), k(Z), y, 0.03)
        got = model.objective()
    assert float(got) == pytest.approx(float(ref), rel=1e-10)
    assert float(model.elbo().detach()) == pytest.approx(-float(ref), rel=1e-10)


def test_z_equal_x_is_exact_gp_and_predictions_match():
    X, y = _data(12, seed=3)
    k = Scale(RBF(0.7), 1.0)
    model = SGPR(k, X, y, X, noise=0.1)
    exact = ExactGP(k, X, y, noise=0.1)
    with torch.no_grad():
        assert float(model.objective().detach()) == pytest.approx(float(exact.nlml()), rel=1e-9)
    Xs = torch.rand(5, 2, dtype=torch.float64) * 4
    mean, var = model.predict(Xs)
    em, ev = exact.predict(Xs)
    torch.testing.assert_close(mean, em, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(var, ev, rtol=1e-6, atol=1e-8)
    _, vy = model.predict(Xs, include_noise=True)
    torch.testing.assert_close(vy - var, torch.full_like(var, 0.1))


def test_predict_against_dense_formula():
    X, y = _data(20, seed=1)
    Z = X[:5] * 0.9
    k = Scale(RBF(0.8), 0.7)
    s2 = 0.05
    model = SGPR(k, X, y, Z, noise=s2)
    Xs = torch.rand(6, 2, dtype=torch.float64) * 4
    with torch.no_grad():
        Kzz, Kzx, Ksz = k(Z), k(Z, X), k(Xs, Z)
        Sigma = Kzz + Kzx @ Kzx.mT / s2
        mu = Ksz @ torch.linalg.solve(Sigma, Kzx @ y) / s2
        var = (k.diag(Xs) - (Ksz * torch.linalg.solve(Kzz, Ksz.mT).mT).sum(1)
               + (Ksz * torch.linalg.solve(Sigma, Ksz.mT).mT).sum(1))
    m, v = model.predict(Xs)
    torch.testing.assert_close(m, mu, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(v, var, rtol=1e-8, atol=1e-10)


def test_gradient_in_z_and_theta():
    X, y = _data(10, seed=2)
    k = Scale(RBF(0.8), 1.0)
    model = SGPR(k, X, y, X[:3] + 0.1, noise=0.1)
    params = [p for p in model.parameters() if p.requires_grad]
    assert any(p is model.Z for p in params)

    def f(*vals):
        with torch.no_grad():
            for p, v in zip(params, vals):
                p.copy_(v)
        return model.objective()

    # finite differences against autograd at the current point
    model.objective().backward()
    grads = [p.grad.clone() for p in params]
    base = [p.detach().clone() for p in params]
    h = 1e-6
    for p, g, b in zip(params, grads, base):
        flat = p.detach().view(-1)
        for i in range(min(3, flat.numel())):
            with torch.no_grad():
                flat[i] = b.view(-1)[i] + h
                fp = float(model.objective().detach())
                flat[i] = b.view(-1)[i] - h
                fm = float(model.objective().detach())
                flat[i] = b.view(-1)[i]
            assert (fp - fm) / (2 * h) == pytest.approx(float(g.view(-1)[i]), rel=1e-5,
                                                        abs=1e-7)


def test_fit_improves_and_inits():
    X, y = _data(40, seed=4)
    Z0 = X[:6].clone()
    with torch.no_grad():
        start = float(SGPR(Scale(RBF(1.0)), X, y, Z0, noise=0.1).objective())
    for init in ("random", "kmeans", Z0):
        model, res = fit_sgpr(X, y, Scale(RBF(1.0)), 6, init=init, max_iter=30)
        with torch.no_grad():
            final = float(model.objective().detach())
        assert res.objective == pytest.approx(final, rel=1e-12)
        assert model.Z.shape == (6, 2)
        if init is Z0:
            assert final < start - 1.0
            assert not torch.equal(model.Z.detach(), Z0)  # Z moved
    C = kmeans(X, 4, seed=0)
    assert C.shape == (4, 2) and torch.isfinite(C).all()
    lab = torch.cdist(X, C).argmin(1)
    for j in range(4):  # Lloyd fixed point: each centre is the mean of its cluster
        torch.testing.assert_close(C[j], X[lab == j].mean(0))


def test_errors():
    X, y = _data(8)
    with pytest.raises(ValueError, match="init"):
        fit_sgpr(X, y, RBF(1.0), 3, init="grid")
    with pytest.raises(ValueError, match="m must be"):
        fit_sgpr(X, y, RBF(1.0), 9)
    with pytest.raises(ValueError, match="columns"):
        SGPR(RBF(1.0), X, y, torch.zeros(2, 3, dtype=torch.float64))


def test_written_out_gradient_equals_autograd_of_dense_bound(device):
    """The hand gradient of VFEBound (kernel hyperparameters, noise and Z through the
    kernel's autograd) against autograd through the dense O(n³) formula."""
    X, y = _data(25, seed=4, device=device)
    k = Scale(RBF([0.8, 1.3], ard_dims=2), 1.4)
    model = SGPR(k, X, y, X[:6] + 0.1, noise=0.05, device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    got = torch.autograd.grad(model.objective(), params)
    s2 = model.noise
    ref = dense_vfe(k(X), k(X, model.Z), k(model.Z), y, s2)
    want = torch.autograd.grad(ref, params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-8, atol=1e-10)


def test_vfe_bound_gradcheck():
    from gpscale.models.vfe_bound import VFEBound

    g = torch.Generator().manual_seed(2)
    m, n = 4, 9
    X = torch.randn(n, 2, generator=g, dtype=torch.float64)
    Z = torch.randn(m, 2, generator=g, dtype=torch.float64)
    k = RBF(1.1, ard_dims=2)
    with torch.no_grad():
        P0, K0 = k(Z, X), k(Z)
    y = torch.randn(n, generator=g, dtype=torch.float64)

    def f(P, noise, t):
        return VFEBound.apply(P, K0, noise, t, y)

    P = P0.clone().requires_grad_()
    noise = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    t = torch.tensor(float(n), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (P, noise, t))

    def fk(S):  # K_ZZ moves symmetrically, as every kernel produces it
        return VFEBound.apply(P0, K0 + S + S.mT, torch.tensor(0.3, dtype=torch.float64),
                              torch.tensor(float(n), dtype=torch.float64), y)

    S = torch.zeros(m, m, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fk, (S,))


def test_warm_start_on_a_sample_reaches_the_full_fit_optimum():
    """warm_rows: the search starts on a row sample, then continues on all rows; it ends
    at (about) the same bound as the search on all rows from the start."""
    X, y = _data(400, seed=5)
    full, rf = fit_sgpr(X, y, Scale(RBF(1.0, ard_dims=2)), 8, seed=0, tol=1e-7, max_iter=300)
    warm, rw = fit_sgpr(X, y, Scale(RBF(1.0, ard_dims=2)), 8, seed=0, tol=1e-7, max_iter=300,
                        warm_rows=100)
    assert rw.objective == pytest.approx(float(warm.objective().detach()))
    assert abs(rw.objective - rf.objective) <= 2e-3 * abs(rf.objective)
    _, same = fit_sgpr(X, y, Scale(RBF(1.0, ard_dims=2)), 8, seed=0, tol=1e-7, max_iter=300,
                       warm_rows=400)  # not below n: no sample search
    assert same.objective == rf.objective and same.n_evals == rf.n_evals


def test_sgpr_method_second_start_keeps_the_lower_bound(monkeypatch):
    """A fit that ends calling most of y noise gets a second start from an exact GP's
    hyperparameters on a row sample; the lower bound wins and both runs are counted."""
    import copy

    from gpscale.methods import sgpr as method

    X, y = _data(200, seed=6)
    y = (y - y.mean()) / y.std()
    k = Scale(RBF(1.0, ard_dims=2))
    first, r1 = method.fit_sgpr_method(X, y, copy.deepcopy(k), m=10, init_rows=0)
    monkeypatch.setattr(method, "PLATEAU", -1.0)  # every fit counts as on the plateau
    best, r2 = method.fit_sgpr_method(X, y, copy.deepcopy(k), m=10, init_rows=100)
    assert r2.n_evals > r1.n_evals and r2.objective <= r1.objective + 1e-9
    assert r2.objective == pytest.approx(float(best.objective().detach()), rel=1e-12)


def test_predictions_reuse_the_training_side_until_a_parameter_changes(monkeypatch):
    """SGPR.predict factorises the O(n m²) training side once per parameter values: a
    second call reuses it, a changed Z or hyperparameter recomputes it."""
    import gpscale.models.sgpr as sgpr_module

    X, y = _data(40, seed=7)
    k = Scale(RBF([0.8, 1.1], ard_dims=2))
    model = SGPR(k, X, y, X[:6] + 0.05, noise=0.05)
    calls = []
    real = sgpr_module.factors
    monkeypatch.setattr(sgpr_module, "factors", lambda *a: calls.append(1) or real(*a))
    Xs = torch.rand(7, 2, dtype=torch.float64) * 4
    first = model.predict(Xs)
    again = model.predict(Xs)
    assert len(calls) == 1 and torch.equal(first.mean, again.mean)
    with torch.no_grad():
        model.Z.add_(0.3)
        k.base.raw_lengthscale.add_(0.1)
    moved = model.predict(Xs)
    assert len(calls) == 2
    fresh = SGPR(k, X, y, model.Z.detach().clone(), noise=0.05).predict(Xs)
    torch.testing.assert_close(moved.mean, fresh.mean, rtol=0, atol=0)
    torch.testing.assert_close(moved.var, fresh.var, rtol=0, atol=0)
    # Module.to keeps the parameters' ids and versions but replaces the buffers X and y:
    # the key sees that, and the new dtype is factorised afresh
    before = len(calls)  # the fresh model factorised too
    model.to(torch.float32)
    single = model.predict(Xs.float())
    assert len(calls) == before + 1 and single.mean.dtype == torch.float32
    torch.testing.assert_close(single.mean, fresh.mean.float(), rtol=1e-4, atol=1e-4)
