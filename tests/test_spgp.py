"""SPGP / FITC (Snelson & Ghahramani 2006) against dense O(n³) formulas."""

import math

import pytest
import torch

import gpscale
from gpscale.kernels import RBF, Scale
from gpscale.models import FITC, ExactGP
from gpscale.models.fitc import fitc_nlml
from gpscale.train.spgp import fit_spgp, initial_pseudo_inputs, snelson_start


def _data(n=30, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, generator=g,
                                                                     dtype=torch.float64)
    return X.to(device), y.to(device)


def dense_fitc_cov(k, X, Z, s2):
    """Q + diag(K − Q) + σ²I as an n × n matrix."""
    K, Kxz = k(X), k(X, Z)
    Q = Kxz @ torch.linalg.solve(k(Z), Kxz.mT)
    return Q + torch.diag(torch.diagonal(K - Q)) + s2 * torch.eye(
        X.shape[0], dtype=X.dtype, device=X.device), Q


def dense_nll(C, y):
    n = y.shape[0]
    return 0.5 * (y @ torch.linalg.solve(C, y) + torch.logdet(C) + n * math.log(2 * math.pi))


def test_nlml_equals_dense_gaussian_nll(device):
    X, y = _data(device=device)
    Z = X[:7] + 0.05
    k = Scale(RBF(0.9, ard_dims=2), 1.2)
    model = FITC(k, X, y, Z, noise=0.03, device=device)
    with torch.no_grad():
        C, _ = dense_fitc_cov(k, X, Z, 0.03)
        ref = dense_nll(C, y)
        got = model.objective()
    assert abs(float(got) - float(ref)) <= 1e-10 * max(1.0, abs(float(ref)))
    assert float(model.nlml().detach()) == float(got)


def test_z_equal_x_is_the_exact_gp():
    X, y = _data(12, seed=3)
    k = Scale(RBF(0.7), 1.0)
    model = FITC(k, X, y, X, noise=0.1)
    exact = ExactGP(k, X, y, noise=0.1)
    with torch.no_grad():
        assert float(model.objective()) == pytest.approx(float(exact.nlml()), rel=1e-9)
    Xs = torch.rand(5, 2, dtype=torch.float64) * 4
    mean, var = model.predict(Xs)
    em, ev = exact.predict(Xs)
    torch.testing.assert_close(mean, em, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(var, ev, rtol=1e-6, atol=1e-8)


def test_predictions_equal_dense_fitc_formulas(device):
    """μ* = Q_*X (Q + Λ)⁻¹y and σ*² = k_** − Q_*X (Q + Λ)⁻¹ Q_X* (+ σ² for y): the FITC
    prior's test–train covariance is Q_*X, its test variance k_**."""
    X, y = _data(20, seed=1, device=device)
    Z = X[:5] * 0.9
    k = Scale(RBF(0.8), 0.7)
    s2 = 0.05
    model = FITC(k, X, y, Z, noise=s2, device=device)
    Xs = torch.rand(6, 2, dtype=torch.float64).to(device) * 4
    with torch.no_grad():
        C, _ = dense_fitc_cov(k, X, Z, s2)
        Qsx = k(Xs, Z) @ torch.linalg.solve(k(Z), k(Z, X))
        mu = Qsx @ torch.linalg.solve(C, y)
        var = k.diag(Xs) - (Qsx * torch.linalg.solve(C, Qsx.mT).mT).sum(1)
    mean, v = model.predict(Xs)
    torch.testing.assert_close(mean, mu, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(v, var, rtol=1e-8, atol=1e-10)
    _, vy = model.predict(Xs, include_noise=True)
    torch.testing.assert_close(vy - v, torch.full_like(v, s2))


def test_gradcheck_in_z_hyperparameters_and_noise():
    X, y = _data(10, seed=2)
    Z0 = X[:3] + 0.1

    def f(Z, raw_ls, raw_os, raw_noise):
        sp = torch.nn.functional.softplus
        ls, os, s2 = sp(raw_ls) + 0.1, sp(raw_os) + 0.1, sp(raw_noise) + 0.01
        kern = lambda A, B: os * torch.exp(-0.5 * torch.cdist(A, B) ** 2 / ls**2)  # noqa: E731
        return fitc_nlml(kern(Z, X), kern(Z, Z), os * torch.ones(X.shape[0], dtype=X.dtype),
                         s2, y)

    inputs = (Z0.clone().requires_grad_(), torch.tensor(0.5, dtype=torch.float64,
                                                         requires_grad=True),
              torch.tensor(0.3, dtype=torch.float64, requires_grad=True),
              torch.tensor(-1.0, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_model_gradient_equals_autograd_of_the_dense_nll():
    """The model's gradient (kernel's own contraction for K_ZX, autograd elsewhere) in
    Z, the kernel's raw parameters and σ² against autograd through the dense NLL."""
    X, y = _data(15, seed=5)
    model = FITC(Scale(RBF([0.8, 1.3], ard_dims=2), 0.9), X, y, X[:4] + 0.05, noise=0.07)
    params = [p for p in model.parameters() if p.requires_grad]
    got = torch.autograd.grad(model.objective(), params)
    C, _ = dense_fitc_cov(model.kernel, X, model.Z, model.noise)
    ref = torch.autograd.grad(dense_nll(C, y), params)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, rtol=1e-7, atol=1e-9)


@pytest.mark.filterwarnings("ignore::gpscale.train.warning_types.ConvergenceWarning")
def test_fit_lowers_the_nlml_and_moves_z():
    X, y = _data(40, seed=4)
    Z0 = X[:6].clone()
    with torch.no_grad():
        start = float(FITC(Scale(RBF(1.0)), X, y, Z0, noise=0.1).objective())
    model, res = fit_spgp(X, y, Scale(RBF(1.0)), 6, init=Z0, max_iter=30)
    with torch.no_grad():
        final = float(model.objective())
    assert res.objective == pytest.approx(final, rel=1e-12)
    assert final < start - 1.0
    assert not torch.equal(model.Z.detach(), Z0)
    for init in ("random", "kmeans", "clump"):
        Z = initial_pseudo_inputs(X, 5, init, torch.Generator().manual_seed(0))
        assert Z.shape == (5, 2) and torch.isfinite(Z).all()


def test_snelson_start_sets_spgps_initial_values():
    X, y = _data(25, seed=6)
    model = FITC(Scale(RBF(1.0, ard_dims=2)), X, y, X[:3], noise=0.1)
    snelson_start(model)
    half = (X.max(0).values - X.min(0).values) / 2
    torch.testing.assert_close(model.kernel.base.lengthscale.detach().reshape(-1), half)
    var = y.var(correction=0)
    torch.testing.assert_close(model.kernel.outputscale.detach(), var)
    torch.testing.assert_close(model.noise.detach(), var / 4)


def test_bad_input_is_a_value_error():
    X, y = _data(8)
    with pytest.raises(ValueError, match="m must be"):
        fit_spgp(X, y, RBF(1.0), 9)
    with pytest.raises(ValueError, match="only 8 training rows"):
        FITC(RBF(1.0), X, y, torch.zeros(9, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="noise"):
        FITC(RBF(1.0), X, y, X[:3], noise=0.0)
    with pytest.raises(ValueError, match="noise"):
        FITC(RBF(1.0), X, y, X[:3], noise=-1.0)
    with pytest.raises(ValueError, match="columns"):
        FITC(RBF(1.0), X, y, torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="init"):
        fit_spgp(X, y, RBF(1.0), 3, init="grid")
    with pytest.raises(ValueError, match="start"):
        gpscale.fit(X.numpy(), y.numpy(), method="spgp", start="nowhere")


@pytest.mark.filterwarnings("ignore::gpscale.train.warning_types.ConvergenceWarning")
def test_method_spgp_through_fit_predicts_and_saves(tmp_path):
    X, y = _data(40, seed=7)
    pred = gpscale.fit(X.numpy(), y.numpy(), method="spgp", m=6, max_iter=20)
    assert isinstance(pred.model, FITC) and pred.model.m == 6
    mean, std = pred.predict(X.numpy()[:5], return_std=True)
    assert mean.shape == (5,) and (std > 0).all()
    path = tmp_path / "spgp.pt"
    pred.save(path)
    again = gpscale.load(path)
    m2, s2 = again.predict(X.numpy()[:5], return_std=True)
    assert abs(m2 - mean).max() < 1e-12 and abs(s2 - std).max() < 1e-12
    assert "spgp" in gpscale.METHODS
