import math

import numpy as np
import pytest
import torch

from gpscale import ExactGP, fit_lbfgs
from gpscale.kernels import make_kernel


def _data(n=60, d=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X.sum(1)) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X.to(device), y.to(device)


def dense_nlml(C, r):
    n = r.shape[0]
    _, logdet = torch.linalg.slogdet(C)
    return 0.5 * r @ torch.linalg.solve(C, r) + 0.5 * logdet + 0.5 * n * math.log(2 * math.pi)


@pytest.mark.parametrize("name", ["rbf-ard", "matern12-ard", "matern32-ard", "matern52-ard",
                                  "rq-ard", "se+lp", "co2"])
def test_nlml_and_gradient_match_dense_autograd(name, device):
    X, y = _data(device=device)
    model = ExactGP(make_kernel(name, X.shape[1]), X, y, noise=0.3, mean="constant")
    with torch.no_grad():
        model.mean_constant.fill_(0.2)
    f = model.nlml()
    f.backward()
    fast = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    ref = dense_nlml(model.covariance(), model.y - model.mean_constant)
    ref.backward()
    slow = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    assert torch.allclose(f, ref, rtol=1e-10, atol=1e-10)
    # Matérn-½'s ∂k/∂r² ∝ 1/r is singular at r → 0: both sides lose a few digits there
    rtol = 1e-6 if name == "matern12-ard" else 1e-8
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=rtol, atol=1e-9)


def test_nlml_equals_sklearn():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    X, y = _data(n=80, d=3, seed=1)
    model = ExactGP(make_kernel("rbf-ard", 3), X, y, noise=0.05)
    model.kernel.outputscale = 1.7
    model.kernel.base.lengthscale = torch.tensor([0.7, 1.3, 2.1], dtype=torch.float64)
    sk = ConstantKernel(1.7) * RBF([0.7, 1.3, 2.1]) + WhiteKernel(0.05)
    gpr = GaussianProcessRegressor(sk, alpha=0.0, optimizer=None).fit(X.numpy(), y.numpy())
    ours = float(model.nlml().detach())
    theirs = -gpr.log_marginal_likelihood_value_
    assert abs(ours - theirs) <= 1e-10 * abs(theirs)
    mean, var = model.predict(X[:7])
    sk_mean, sk_std = gpr.predict(X[:7].numpy(), return_std=True)
    np.testing.assert_allclose(mean.numpy(), sk_mean, rtol=1e-8, atol=1e-10)
    # sklearn's std includes the WhiteKernel noise
    np.testing.assert_allclose(var.numpy() + 0.05, sk_std**2, rtol=1e-7, atol=1e-10)


def test_predict_full_cov_matches_dense(device):
    X, y = _data(n=40, device=device)
    model = ExactGP(make_kernel("matern52-ard", 2), X, y, noise=0.1)
    Xs = X[:5] + 0.05
    mean, cov = model.predict(Xs, full_cov=True, include_noise=True)
    with torch.no_grad():
        C = model.covariance()
        Ks = model.kernel(X, Xs)
        ref_mean = Ks.T @ torch.linalg.solve(C, y)
        eye = torch.eye(5, dtype=X.dtype, device=device)
        ref_cov = model.kernel(Xs) - Ks.T @ torch.linalg.solve(C, Ks) + 0.1 * eye
    torch.testing.assert_close(mean, ref_mean, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(cov, ref_cov, rtol=1e-8, atol=1e-10)
    m2, v2 = model.predict(Xs, include_noise=True, block=2)
    torch.testing.assert_close(m2, mean)
    torch.testing.assert_close(v2, torch.diagonal(cov), rtol=1e-8, atol=1e-10)


def test_lbfgs_reduces_nlml_and_recovers_noise():
    g = torch.Generator().manual_seed(3)
    X = torch.rand(300, 1, generator=g, dtype=torch.float64) * 10
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(300, generator=g, dtype=torch.float64)
    model = ExactGP(make_kernel("rbf", 1), X, y, noise=1.0)
    start = model.nlml().item()
    result = fit_lbfgs(model, max_iter=100)
    assert result.objective < start - 100
    assert result.objective == pytest.approx(model.nlml().item(), rel=1e-12)
    assert 0.005 < model.noise.item() < 0.02  # true noise variance 0.01
    assert result.history and result.history[-1]["objective"] >= result.objective


def test_restarts_are_seeded_and_keep_the_best():
    X, y = _data(n=50)
    runs = []
    for _ in range(2):
        m = ExactGP(make_kernel("rbf-ard", 2), X, y)
        runs.append(fit_lbfgs(m, max_iter=30, restarts=2, seed=7))
    assert runs[0].objective == runs[1].objective
    m = ExactGP(make_kernel("rbf-ard", 2), X, y)
    single = fit_lbfgs(m, max_iter=30)
    assert runs[0].objective <= single.objective + 1e-9


def test_bad_inputs_raise_clear_errors():
    X, y = _data(n=10)
    k = make_kernel("rbf-ard", 2)
    with pytest.raises(ValueError, match="1-D"):
        ExactGP(k, X[:, 0], y)
    with pytest.raises(ValueError, match="rows"):
        ExactGP(k, X, y[:5])
    Xn = X.clone()
    Xn[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ExactGP(k, Xn, y)
    with pytest.raises(ValueError, match="greater than"):
        ExactGP(k, X, y, noise=-1.0)
    with pytest.raises(ValueError, match="unknown kernel"):
        make_kernel("squiggle", 2)
    with pytest.raises(ValueError, match="empty"):
        ExactGP(k, X[:0], y[:0])


def test_duplicate_rows_are_fine():
    X, y = _data(n=30)
    X = torch.cat([X, X[:10]])
    y = torch.cat([y, y[:10] + 0.01])
    model = ExactGP(make_kernel("rbf-ard", 2), X, y, noise=1e-3)
    result = fit_lbfgs(model, max_iter=50)
    assert math.isfinite(result.objective)
    mean, var = model.predict(X[:3])
    assert torch.isfinite(mean).all() and (var >= 0).all()


def test_ctrl_c_keeps_the_best_parameters():
    X, y = _data(n=40)
    model = ExactGP(make_kernel("rbf-ard", 2), X, y, noise=1.0)
    calls = {"n": 0}

    def objective():
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return model.nlml()

    start = model.nlml().item()
    result = fit_lbfgs(model, objective=objective, max_iter=100, restarts=3)
    assert result.reason == "interrupted" and not result.converged
    assert result.objective < start
    assert result.objective == pytest.approx(model.nlml().item(), rel=1e-12)
    assert calls["n"] == 6  # no restart after the interrupt
