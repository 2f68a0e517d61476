"""SVGP (Hensman et al. 2013/2015) and FeatureKernel: dense references, unbiasedness,
training, the "svgp" method and its save/load."""

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gpscale
from gpscale.features import FeatureKernel, RandomFourierFeatures
from gpscale.kernels import RBF, Scale
from gpscale.models import ExactGP, FeatureGP
from gpscale.models.svgp import SVGP
from gpscale.train.svgp import exact_feature_nlml, fit_svgp, make_svgp

F64 = torch.float64


def _data(n, d=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64) * 3
    y = torch.sin(2 * X[:, 0]) + 0.5 * X[:, -1] + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X.to(device), y.to(device)


def _kernel():
    return Scale(RBF(0.8), 1.3)


def _random_q(m, seed, device, scale=0.3):
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(m, generator=g, dtype=F64)
    L = torch.tril(torch.randn(m, m, generator=g, dtype=F64), -1) * scale
    L = L + torch.diag(0.2 + torch.rand(m, generator=g, dtype=F64))
    return mean.to(device), L.to(device)


def _full_elbo(model, X, y):
    with torch.no_grad():
        return float(model.elbo(X, y))


# -- FeatureKernel --------------------------------------------------------------------------
def test_feature_kernel_is_phi_phi_transpose(device):
    X1, _ = _data(7, 3, 1, device)
    X2, _ = _data(5, 3, 2, device)
    rff = RandomFourierFeatures(3, 40, lengthscale=[0.5, 1.0, 2.0], seed=3).to(device)
    k = FeatureKernel(rff)
    phi1, phi2 = rff(X1), rff(X2)
    torch.testing.assert_close(k(X1, X2), phi1 @ phi2.T, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(k(X1), phi1 @ phi1.T, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(k.diag(X1), torch.diagonal(phi1 @ phi1.T), rtol=1e-13, atol=0)
    assert rff.raw_lengthscale in set(k.parameters())
    k(X1, X2).sum().backward()
    assert rff.raw_lengthscale.grad is not None and rff.raw_lengthscale.grad.abs().sum() > 0


def test_feature_kernel_rejects_non_feature_maps():
    with pytest.raises(ValueError, match="features"):
        FeatureKernel(torch.nn.Linear(2, 3))


@pytest.mark.parametrize("p", [10, 60])
def test_exact_gp_on_feature_kernel_matches_feature_gp(device, p):
    X, y = _data(30, 2, 4, device)
    rff = RandomFourierFeatures(2, p, lengthscale=0.7, seed=5)
    exact = ExactGP(FeatureKernel(rff), X, y, noise=0.05, device=device)
    feat = FeatureGP(rff, X, y, noise=0.05, weights="fixed", device=device)
    a, b = exact.nlml(), feat.nlml()
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    ga = torch.autograd.grad(a, rff.raw_lengthscale)[0]
    gb = torch.autograd.grad(b, rff.raw_lengthscale)[0]
    torch.testing.assert_close(ga, gb, rtol=1e-8, atol=1e-10)
    assert math.isclose(exact_feature_nlml(rff, X, y, 0.05), float(b.detach()) / 30,
                        rel_tol=1e-9)


def test_exact_feature_nlml_with_signal_variance(device):
    X, y = _data(25, 2, 6, device)
    rff = RandomFourierFeatures(2, 16, seed=1)
    ref = ExactGP(Scale(FeatureKernel(rff), 2.5), X, y, noise=0.2, device=device).nlml()
    got = exact_feature_nlml(rff, X, y, torch.tensor(0.2, dtype=F64), variance=2.5)
    assert math.isclose(got, float(ref.detach()) / 25, rel_tol=1e-10)
    with pytest.raises(ValueError, match="noise"):
        exact_feature_nlml(rff, X, y, -1.0)


# -- the bound ------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(n=st.integers(3, 25), m=st.integers(1, 8), d=st.integers(1, 3), whiten=st.booleans(),
       seed=st.integers(0, 10_000))
def test_elbo_is_below_exact_log_marginal_likelihood(n, m, d, whiten, seed):
    X, y = _data(n, d, seed)
    Z = torch.randn(m, d, generator=torch.Generator().manual_seed(seed + 1), dtype=F64) * 2
    kernel = _kernel()
    model = SVGP(kernel, Z, num_data=n, noise=0.3, whiten=whiten)
    mean, L = _random_q(m, seed, "cpu")
    model.set_q(mean, chol=L)
    lml = -float(ExactGP(kernel, X, y, noise=0.3).nlml().detach())
    assert _full_elbo(model, X, y) <= lml + 1e-9


def _optimal_q(model, X, y):
    """Titsias' optimal q(u) in closed form, in the model's parameterisation."""
    with torch.no_grad():
        Kzz = model.kernel(model.Z)
        Kzx = model.kernel(model.Z, X)
        s2 = model.noise
        Sigma = Kzz + Kzx @ Kzx.T / s2
        m_u = Kzz @ torch.linalg.solve(Sigma, Kzx @ y) / s2
        S_u = Kzz @ torch.linalg.solve(Sigma, Kzz)
        if not model.whiten:
            return m_u, S_u
        Lz = torch.linalg.cholesky(Kzz)
        m_v = torch.linalg.solve_triangular(Lz, m_u[:, None], upper=False)[:, 0]
        T = torch.linalg.solve_triangular(Lz, S_u, upper=False)
        S_v = torch.linalg.solve_triangular(Lz, T.T, upper=False)
        return m_v, 0.5 * (S_v + S_v.T)


@pytest.mark.parametrize("whiten", [True, False])
def test_optimal_q_at_z_equal_x_gives_exact_marginal_likelihood(device, whiten):
    X, y = _data(15, 2, 7, device)
    kernel = Scale(RBF(0.5), 1.0)
    model = SVGP(kernel, X, num_data=15, noise=0.1, whiten=whiten, jitter=0.0, device=device)
    mean, cov = _optimal_q(model, X, y)
    model.set_q(mean, cov=cov)
    lml = -float(ExactGP(kernel, X, y, noise=0.1, device=device).nlml().detach())
    assert math.isclose(_full_elbo(model, X, y), lml, rel_tol=1e-9, abs_tol=1e-8)


@pytest.mark.parametrize("whiten", [True, False])
def test_optimal_q_gives_titsias_collapsed_bound(device, whiten):
    X, y = _data(20, 2, 8, device)
    Z = X[:6] + 0.05
    kernel = _kernel()
    model = SVGP(kernel, Z, num_data=20, noise=0.2, whiten=whiten, jitter=0.0, device=device)
    mean, cov = _optimal_q(model, X, y)
    model.set_q(mean, cov=cov)
    with torch.no_grad():
        Kxz, Kzz, Kxx = kernel(X, Z), kernel(Z), kernel(X)
        Q = Kxz @ torch.linalg.solve(Kzz, Kxz.T)
        C = Q + 0.2 * torch.eye(20, dtype=F64, device=device)
        ref = torch.distributions.MultivariateNormal(torch.zeros_like(y), C).log_prob(y)
        ref = float(ref - torch.trace(Kxx - Q) / (2 * 0.2))
    assert math.isclose(_full_elbo(model, X, y), ref, rel_tol=1e-9, abs_tol=1e-8)


@pytest.mark.parametrize("whiten", [True, False])
def test_set_optimal_q_streams_the_closed_form(device, whiten):
    X, y = _data(23, 2, 9, device)
    model = SVGP(_kernel(), X[:6] + 0.05, num_data=23, noise=0.2, whiten=whiten, jitter=0.0,
                 device=device)
    mean, cov = _optimal_q(model, X, y)
    model.set_optimal_q(X, y, block=5)  # several row blocks
    with torch.no_grad():
        L = model.q_chol()
        torch.testing.assert_close(model.q_mu, mean, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(L @ L.mT, cov, rtol=1e-8, atol=1e-10)


def test_fit_starts_from_the_optimal_q_unless_asked_not_to():
    X, y = _data(60, 2, 3)
    kw = dict(num_inducing=8, batch_size=60, epochs=1, lr=1e-12, optimizer="sgd", noise=0.2)
    opt, _ = fit_svgp(X, y, _kernel(), **kw)
    prior, _ = fit_svgp(X, y, _kernel(), q_init="prior", **kw)
    assert _full_elbo(opt, X, y) > _full_elbo(prior, X, y) + 1.0
    assert float(prior.q_mu.detach().abs().max()) < 1e-8
    with pytest.raises(ValueError, match="q_init"):
        fit_svgp(X, y, _kernel(), q_init="zeros", **kw)


def test_fit_anneals_the_learning_rate_on_request():
    X, y = _data(60, 2, 3)
    kw = dict(num_inducing=8, batch_size=10, epochs=2, lr=1e-2, noise=0.2, eval_every=6)
    _, res = fit_svgp(X, y, _kernel(), lr_schedule="cosine", **kw)
    factors = [h["lr_factor"] for h in res.history]
    assert factors == pytest.approx([0.5 * (1 + math.cos(math.pi * 5 / 12)),
                                     0.5 * (1 + math.cos(math.pi * 11 / 12))])
    # the schedule reaches the optimiser: the same seeded run ends elsewhere without it
    const, _ = fit_svgp(X, y, _kernel(), lr_schedule="constant", **kw)
    annealed, _ = fit_svgp(X, y, _kernel(), lr_schedule="cosine", **kw)
    assert not torch.allclose(const.q_mu, annealed.q_mu)
    with pytest.raises(ValueError, match="lr_schedule"):
        fit_svgp(X, y, _kernel(), lr_schedule="exponential", **kw)


@settings(max_examples=15, deadline=None)
@given(k=st.integers(1, 6), b=st.integers(1, 7), whiten=st.booleans(),
       seed=st.integers(0, 10_000))
def test_minibatch_elbo_is_unbiased_over_a_partition(k, b, whiten, seed):
    n = k * b
    X, y = _data(n, 2, seed)
    model = SVGP(_kernel(), X[: min(n, 5)] + 0.1, num_data=n, noise=0.3, whiten=whiten)
    mean, L = _random_q(model.num_inducing, seed, "cpu")
    model.set_q(mean, chol=L)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    batches = [_full_elbo(model, X[i], y[i]) for i in perm.split(b)]
    full = _full_elbo(model, X, y)
    assert math.isclose(sum(batches) / len(batches), full, rel_tol=1e-11, abs_tol=1e-9)
    if k > 1:  # the batches differ: the estimator is not trivially constant
        assert max(batches) - min(batches) > 1e-6


@pytest.mark.parametrize("whiten", [True, False])
def test_kl_matches_dense_formula(device, whiten):
    Z, _ = _data(6, 2, 9, device)
    model = SVGP(_kernel(), Z, num_data=10, whiten=whiten, jitter=0.0, device=device)
    mean, L = _random_q(6, 3, device)
    model.set_q(mean, chol=L)
    with torch.no_grad():
        P = torch.eye(6, dtype=F64, device=device) if whiten else model.kernel(Z)
        q = torch.distributions.MultivariateNormal(mean, scale_tril=L)
        p = torch.distributions.MultivariateNormal(torch.zeros_like(mean), P)
        ref = torch.distributions.kl_divergence(q, p)
        torch.testing.assert_close(model.kl(), ref, rtol=1e-10, atol=1e-12)
        model.set_q(torch.zeros(6, dtype=F64, device=device),
                    chol=torch.linalg.cholesky(P))  # q = p
        assert abs(float(model.kl())) < 1e-10


def test_whitened_and_unwhitened_agree_for_corresponding_q(device):
    X, y = _data(18, 2, 10, device)
    Z = X[:5] + 0.1
    kernel = _kernel()
    white = SVGP(kernel, Z, num_data=18, noise=0.2, whiten=True, device=device)
    plain = SVGP(kernel, Z, num_data=18, noise=0.2, whiten=False, device=device)
    m_v, L_v = _random_q(5, 11, device)
    white.set_q(m_v, chol=L_v)
    with torch.no_grad():
        Lz = white.prior_chol()
    plain.set_q(Lz @ m_v, chol=Lz @ L_v)  # u = L_zz v
    assert math.isclose(_full_elbo(white, X, y), _full_elbo(plain, X, y), rel_tol=1e-10)
    with torch.no_grad():
        assert math.isclose(float(white.kl()), float(plain.kl()), rel_tol=1e-9, abs_tol=1e-10)
    for a, b in zip(white.predict(X[:7], full_cov=True), plain.predict(X[:7], full_cov=True)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_predictions_match_dense_formulas(device):
    X, _ = _data(9, 2, 12, device)
    Z = X[:4] + 0.2
    kernel = _kernel()
    model = SVGP(kernel, Z, num_data=50, noise=0.15, whiten=False, jitter=0.0, device=device)
    m_u, L = _random_q(4, 13, device)
    model.set_q(m_u, chol=L)
    with torch.no_grad():
        Ksz, Kzz, Kss = kernel(X, Z), kernel(Z), kernel(X)
        S = L @ L.T
        W = torch.linalg.solve(Kzz, Ksz.T)  # K_zz⁻¹ K_zs
        mean_ref = W.T @ m_u
        cov_ref = Kss - Ksz @ W + W.T @ S @ W
    mean, cov = model.predict(X, full_cov=True)
    torch.testing.assert_close(mean, mean_ref, rtol=1e-10, atol=1e-11)
    torch.testing.assert_close(cov, cov_ref, rtol=1e-9, atol=1e-10)
    mean_b, var_b = model.predict(X, block=4)  # blocked diagonal
    torch.testing.assert_close(mean_b, mean_ref, rtol=1e-10, atol=1e-11)
    torch.testing.assert_close(var_b, torch.diagonal(cov_ref), rtol=1e-9, atol=1e-10)
    _, var_y = model.predict(X, include_noise=True)
    torch.testing.assert_close(var_y, torch.diagonal(cov_ref) + 0.15, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(model.predict(X).mean, mean_ref,
                               rtol=1e-10, atol=1e-11)
    with pytest.raises(ValueError, match="columns"):
        model.predict(torch.zeros(3, 5, dtype=F64, device=device))


# -- training -------------------------------------------------------------------------------
def test_small_fit_improves_the_elbo():
    X, y = _data(120, 2, 14)
    kernel = Scale(RBF(2.0), 0.5)
    init, _, _ = make_svgp(X, y, copy.deepcopy(kernel), 15, noise=0.5, seed=3)
    model, result = fit_svgp(X, y, kernel, num_inducing=15, batch_size=30, epochs=40,
                             lr=0.03, noise=0.5, seed=3)
    torch.testing.assert_close(init.Z, X[torch.randperm(120, generator=torch.Generator()
                                                       .manual_seed(3))[:15]])
    before, after = _full_elbo(init, X, y), _full_elbo(model, X, y)
    assert after > before + 0.1 * abs(before)
    assert result.method == "svgp" and result.reason == "max_epochs"
    assert result.history and all("batch_objective" in h for h in result.history)
    assert result.objective == result.history[-1]["batch_objective"]
    assert set(result.theta) == {"noise", "kernel.outputscale", "kernel.base.lengthscale"}
    assert not torch.equal(model.Z, init.Z)  # the inducing locations are learned


def test_fit_keeps_the_best_exact_feature_nlml_iterate():
    X, y = _data(80, 2, 15)
    rff = RandomFourierFeatures(2, 20, lengthscale=2.0, seed=0)
    seen = []

    def evaluate(model):
        value = exact_feature_nlml(rff, X, y, model.noise)
        seen.append(value)
        return value

    model, result = fit_svgp(X, y, FeatureKernel(rff), num_inducing=10, batch_size=10,
                             epochs=3, lr=0.05, evaluate=evaluate, eval_every=4, seed=1)
    assert len(seen) >= 5 and result.objective == min(seen)
    assert math.isclose(exact_feature_nlml(rff, X, y, model.noise), result.objective,
                        rel_tol=1e-12)  # the best iterate was restored
    _, named = fit_svgp(X, y, FeatureKernel(copy.deepcopy(rff)), num_inducing=10,
                        batch_size=10, epochs=1, evaluate="feature-nlml", seed=1)
    assert math.isfinite(named.objective) and "objective" in named.history[-1]


def test_kmeans_init_and_unwhitened_fit_run():
    X, y = _data(60, 2, 16)
    model, result = fit_svgp(X, y, _kernel(), 8, 20, epochs=2, init="kmeans", whiten=False,
                             optimizer="adadelta")
    assert model.Z.shape == (8, 2) and math.isfinite(result.objective)
    _, scored = fit_svgp(X, y, _kernel(), 8, 20, epochs=1, evaluate=lambda: 1.5)
    assert scored.objective == 1.5 and scored.history[-1]["objective"] == 1.5


def test_gpscale_fit_svgp_predict_save_load(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, size=(150, 2)) * [1.0, 100.0]
    y = np.sin(X[:, 0]) + 0.01 * X[:, 1] + 0.1 * rng.standard_normal(150)
    pred = gpscale.fit(X, y, method="svgp", num_inducing=20, batch_size=50, epochs=30,
                       lr=0.03, seed=0)
    mean, std = pred.predict(X[:10], return_std=True)
    assert mean.shape == (10,) and std.shape == (10,) and np.all(std > 0)
    assert np.sqrt(np.mean((pred.predict(X) - y) ** 2)) < 0.5 * np.std(y)
    assert "svgp" in pred.summary()
    path = pred.save(tmp_path / "svgp.pt")
    loaded = gpscale.load(path)
    mean2, std2 = loaded.predict(X[:10], return_std=True)
    np.testing.assert_allclose(mean2, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std2, std, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="option"):
        gpscale.fit(X, y, method="svgp", num_features=3)


def test_svgp_on_feature_kernel_cannot_be_saved(tmp_path):
    X, y = _data(30, 2, 17)
    model, result = fit_svgp(X, y, FeatureKernel(RandomFourierFeatures(2, 8)), 5, 10, 1)
    from gpscale.preprocessing import Standardizer

    pred = gpscale.Predictor(model, Standardizer.identity(2), result, "svgp", "FeatureKernel")
    with pytest.raises(ValueError, match="FeatureKernel"):
        pred.save(tmp_path / "f.pt")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("kwargs, match", [
    ({"num_inducing": 31}, "num_inducing"),
    ({"num_inducing": 0}, "num_inducing"),
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 31}, "batch_size"),
    ({"batch_size": 2.5}, "batch_size"),
    ({"noise": -1.0}, "noise"),
    ({"init": "grid"}, "init"),
    ({"optimizer": "lbfgs"}, "optimizer"),
    ({"evaluate": "feature-nlml"}, "FeatureKernel"),
    ({"evaluate": "nlml"}, "evaluate"),
    ({"epochs": 0}, "epochs"),
])
def test_fit_svgp_rejects_bad_arguments(kwargs, match):
    X, y = _data(30, 2, 18)
    args = {"num_inducing": 5, "batch_size": 10, "epochs": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        fit_svgp(X, y, _kernel(), **args)


def test_nan_and_shape_errors():
    X, y = _data(30, 2, 19)
    Xbad = X.clone()
    Xbad[3, 1] = math.nan
    with pytest.raises(ValueError, match="X"):
        fit_svgp(Xbad, y, _kernel(), 5, 10, 1)
    ybad = y.clone()
    ybad[0] = math.inf
    with pytest.raises(ValueError, match="y"):
        fit_svgp(X, ybad, _kernel(), 5, 10, 1)
    with pytest.raises(ValueError, match="Z"):
        SVGP(_kernel(), torch.full((3, 2), math.nan, dtype=F64), num_data=30)
    model = SVGP(_kernel(), X[:4], num_data=30)
    with pytest.raises(ValueError, match="yb"):
        model.elbo(X[:5], y[:4])
    with pytest.raises(ValueError, match="Xb"):
        model.elbo(X[:5, :1], y[:5])
    with pytest.raises(ValueError, match="num_data"):
        SVGP(_kernel(), X[:4], num_data=0)
    with pytest.raises(ValueError, match="method"):
        gpscale.fit(X.numpy(), y.numpy(), method="svgpp")
