import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale import fit_lbfgs
from gpscale.features import RandomFourierFeatures, draw_frequencies
from gpscale.kernels import RBF, Matern
from gpscale.models import FeatureGP, gaussian_nll

D64 = torch.float64


def _data(n=50, d=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=D64)
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=D64)
    return X.to(device), y.to(device)


def _dense_nlml(model):
    phi = model.features(model.X)
    p = phi.shape[1]
    W = torch.diag_embed(model.weight.expand(p))
    C = phi @ W @ phi.T + model.noise * torch.eye(model.n, dtype=D64, device=phi.device)
    return gaussian_nll(C, model.y), C, phi


@pytest.mark.parametrize("weights", ["scalar", "diag", "fixed"])
@pytest.mark.parametrize("chunk", [7, 1000])
def test_nlml_and_gradients_equal_dense(weights, chunk, device):
    X, y = _data(device=device)
    feats = RandomFourierFeatures(2, 16, lengthscale=[0.7, 1.4], seed=3)
    model = FeatureGP(feats, X, y, noise=0.2, weights=weights, chunk=chunk)
    with torch.no_grad():
        model.raw_weight.add_(torch.linspace(-0.3, 0.3, model.raw_weight.numel(),
                                             dtype=D64, device=device))
    params = [p for p in model.parameters() if p.requires_grad]
    f = model.nlml()
    got = torch.autograd.grad(f, params)
    ref, _, _ = _dense_nlml(model)
    want = torch.autograd.grad(ref, params)
    torch.testing.assert_close(f, ref, rtol=1e-10, atol=1e-10)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


def test_predictions_equal_dense_gp(device):
    X, y = _data(n=30, device=device)
    model = FeatureGP(RandomFourierFeatures(2, 12, seed=1), X, y, noise=0.3, weights="diag")
    Xs = torch.randn(6, 2, dtype=D64, generator=torch.Generator().manual_seed(9)).to(device)
    with torch.no_grad():
        _, C, phi = _dense_nlml(model)
        W = torch.diag_embed(model.weight.expand(12))
        phis = model.features(Xs)
        Ks = phi @ W @ phis.T
        mean = Ks.T @ torch.linalg.solve(C, y)
        cov = phis @ W @ phis.T - Ks.T @ torch.linalg.solve(C, Ks)
    m, v = model.predict(Xs)
    torch.testing.assert_close(m, mean, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(v, torch.diagonal(cov), rtol=1e-7, atol=1e-10)
    m2, c2 = model.predict(Xs, full_cov=True, include_noise=True)
    torch.testing.assert_close(c2, cov + 0.3 * torch.eye(6, dtype=D64, device=device),
                               rtol=1e-7, atol=1e-10)
    torch.testing.assert_close(m2, mean, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind,kernel", [("rbf", RBF(0.9)), ("matern52", Matern(2.5, 0.9)),
                                         ("matern32", Matern(1.5, 0.9))])
def test_rff_approximates_its_kernel(kind, kernel):
    X = torch.randn(40, 3, dtype=D64, generator=torch.Generator().manual_seed(0)) * 0.5
    feats = RandomFourierFeatures(3, 20000, kernel=kind, lengthscale=0.9, seed=5)
    phi = feats(X)
    err = (phi @ phi.T - kernel(X).detach()).abs().max()
    assert err < 0.05  # Monte-Carlo error ~ 1/sqrt(10000 frequencies)


@settings(max_examples=15, deadline=None)
@given(num=st.integers(1, 40), d=st.integers(1, 6), seed=st.integers(0, 99))
def test_orthogonal_frequencies_are_orthogonal_in_blocks(num, d, seed):
    omega = draw_frequencies(num, d, "rbf", True, torch.Generator().manual_seed(seed))
    assert omega.shape == (num, d)
    block = omega[: min(num, d)]
    gram = block @ block.T
    off = gram - torch.diag_embed(torch.diagonal(gram))
    assert off.abs().max() < 1e-10 * max(1.0, float(gram.abs().max()))


def test_rff_seeding_and_errors():
    a = RandomFourierFeatures(2, 8, seed=4).omega
    assert torch.equal(a, RandomFourierFeatures(2, 8, seed=4).omega)
    assert not torch.equal(a, RandomFourierFeatures(2, 8, seed=5).omega)
    with pytest.raises(ValueError, match="even"):
        RandomFourierFeatures(2, 7)
    with pytest.raises(ValueError, match="unknown RFF kernel"):
        RandomFourierFeatures(2, 8, kernel="cosine")
    with pytest.raises(ValueError, match="weights"):
        FeatureGP(RandomFourierFeatures(2, 8), *_data(), weights="full")


def test_fit_learns_lengthscale_and_noise():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(400, 1, generator=g, dtype=D64) * 6
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(400, generator=g, dtype=D64)
    model = FeatureGP(RandomFourierFeatures(1, 128, seed=0), X, y, noise=1.0)
    start = model.nlml().item()
    result = fit_lbfgs(model, max_iter=100, method="rff")
    assert result.objective < start - 100
    assert result.objective == pytest.approx(model.nlml().item(), rel=1e-12)
    assert 0.005 < model.noise.item() < 0.02  # true noise variance 0.01
    m, _ = model.predict(X[:50])
    assert math.sqrt(float(((m - torch.sin(2 * X[:50, 0])) ** 2).mean())) < 0.06


def test_predict_rejects_inputs_with_other_columns():
    from gpscale import ExactGP
    from gpscale.kernels import make_kernel

    X, y = _data(n=20)
    models = [FeatureGP(RandomFourierFeatures(2, 8), X, y),
              ExactGP(make_kernel("rbf-ard", 2), X, y)]
    for model in models:
        with pytest.raises(ValueError, match="3 columns but the model was trained on 2"):
            model.predict(torch.zeros(4, 3, dtype=D64))
