"""NeuralFeatures (deep kernels of Shoham & Avron §5) and ScaledFeatures."""

import numpy as np
import pytest
import torch
from torch import nn

import gpscale
from gpscale.features import NeuralFeatures, RandomFourierFeatures, ScaledFeatures
from gpscale.models import FeatureGP
from gpscale.params import LOG_2PI

D64 = torch.float64


def _X(n=20, d=3, seed=0, device="cpu"):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed),
                       dtype=D64).to(device)


def test_linear_kernel_is_inner_product_of_network_output(device):
    f = NeuralFeatures(3, kernel="linear", outputscale=2.0, seed=1, device=device)
    X = _X(device=device)
    assert f.num_features == 128 and f.width == 128
    h = f.body(X)
    assert h.device.type == device.type and h.dtype == D64
    assert (h >= 0).all()  # ReLU after the last layer, as the paper's g_w
    assert len([m for m in f.body if isinstance(m, nn.Linear)]) == 2
    K = f(X) @ f(X).mT
    assert torch.allclose(K, 2.0 * h @ h.mT, rtol=1e-12, atol=1e-12)
    # the paper learns no magnitude for the linear kernel (it duplicates the last layer)
    assert not f.raw_outputscale.requires_grad
    assert NeuralFeatures(3, learn_scale=True).raw_outputscale.requires_grad


def test_gaussian_kernel_by_rff_on_network_output():
    f = NeuralFeatures(3, kernel="rbf", num_rff=4000, lengthscale=0.7, outputscale=1.5,
                       seed=2)
    X = _X(n=15)
    assert f.num_features == 4000
    with torch.no_grad():
        h = f.body(X)
        K = f(X) @ f(X).mT
        ref = 1.5 * torch.exp(-torch.cdist(h, h) ** 2 / (2 * 0.7 ** 2))
    assert torch.allclose(torch.diagonal(K), torch.full((15,), 1.5, dtype=D64), atol=1e-12)
    assert (K - ref).abs().max() < 0.12  # orthogonal RFF, 2000 frequencies
    learnable = {n for n, p in f.named_parameters() if p.requires_grad}
    assert {"raw_outputscale", "rff.raw_lengthscale", "body.0.weight"} <= learnable
    assert f.rff.lengthscale.numel() == 1  # u₁: one lengthscale


def test_seeded_initialisation():
    a, b, c = (NeuralFeatures(4, kernel="rbf", num_rff=20, seed=s) for s in (5, 5, 6))
    X = _X(d=4)
    assert torch.equal(a(X), b(X))
    assert not torch.allclose(a(X), c(X))


def test_custom_body_and_bad_arguments():
    body = nn.Sequential(nn.Linear(3, 7, dtype=D64), nn.Tanh())
    f = NeuralFeatures(3, body=body)
    assert f.num_features == 7
    assert f(_X()).shape == (20, 7)
    with pytest.raises(ValueError, match="kernel"):
        NeuralFeatures(3, kernel="matern")
    with pytest.raises(ValueError, match="num_rff"):
        NeuralFeatures(3, kernel="rbf", num_rff=7)
    with pytest.raises(ValueError, match="d "):
        NeuralFeatures(0)
    with pytest.raises(ValueError, match="input columns"):
        f(_X(d=2))
    with pytest.raises(ValueError, match="custom body"):
        f.config()


def test_feature_gp_nlml_gradient_through_network_matches_dense(device):
    """FeatureGP's two-pass streaming gradient equals autograd of the dense NLML."""
    f = NeuralFeatures(2, kernel="rbf", hidden=(8, 8), num_rff=30, seed=3, device=device)
    X, y = _X(n=25, d=2, device=device), torch.sin(_X(n=25, d=2, device=device)[:, 0])
    model = FeatureGP(f, X, y, noise=0.2, weights="fixed", chunk=7, device=device)
    params = [p for p in f.parameters() if p.requires_grad]
    got = torch.autograd.grad(model.nlml(), params)
    phi = f(X)
    K = phi @ phi.mT + 0.2 * torch.eye(25, dtype=D64, device=device)
    L = torch.linalg.cholesky(K)
    a = torch.cholesky_solve(y[:, None], L)[:, 0]
    dense = 0.5 * (y @ a) + torch.log(torch.diagonal(L)).sum() + 12.5 * LOG_2PI
    assert torch.allclose(model.nlml(), dense, rtol=1e-11)
    ref = torch.autograd.grad(dense, params)
    for g, r in zip(got, ref):
        assert torch.allclose(g, r, rtol=1e-8, atol=1e-10)


def test_scaled_features():
    base = RandomFourierFeatures(2, 10, seed=0)
    f = ScaledFeatures(base, outputscale=3.0)
    X = _X(d=2)
    assert torch.allclose(f(X), base(X) * 3.0 ** 0.5)
    assert f.raw_outputscale.requires_grad and f.num_features == 10
    with pytest.raises(ValueError, match="base"):
        ScaledFeatures("rff")


@pytest.mark.parametrize("features", ["nn-linear", "nn-rbf"])
def test_fit_with_neural_features_and_save_load(features, tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(90, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(90)
    pred = gpscale.fit(X, y, method="scgd", features=features, num_features=40,
                       batch_size=30, epochs=2, optimizer="adam", lr=1e-2)
    assert isinstance(pred.model.features, NeuralFeatures)
    mean, std = pred.predict(X[:4], return_std=True)
    back = gpscale.load(pred.save(tmp_path / "m.pt"))
    m2, s2 = back.predict(X[:4], return_std=True)
    np.testing.assert_allclose(m2, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s2, std, rtol=1e-10, atol=1e-12)
    assert back.model.features.kernel == features[3:]
    with pytest.raises(ValueError, match="features"):
        gpscale.fit(X, y, method="bsgd", features="nn-tanh", epochs=1)
