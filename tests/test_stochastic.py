"""Weight-space objective, MINIMAX / SCGD / BSGD estimators (Shoham & Avron) against
dense references, projections, small end-to-end fits and the gpscale.fit methods."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gpscale
from gpscale.features import RandomFourierFeatures
from gpscale.models import FeatureGP
from gpscale.params import LOG_2PI
from gpscale.train.stochastic import fit_bsgd, fit_minimax, fit_scgd
from gpscale.train.weight_space import (
    batch_F,
    bsgd_batch,
    exact_objective,
    grad_B,
    objective_dense,
    objective_from_statistics,
    optimal_w,
    project_A,
    project_B,
    psi_batch,
    psi_full,
    scgd_batch,
)

D64 = torch.float64


def _data(n=10, d_in=2, p=6, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d_in, generator=g, dtype=D64)
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=D64)
    feats = RandomFourierFeatures(d_in, p, lengthscale=[0.8, 1.3][:d_in], seed=seed).to(device)
    return X.to(device), y.to(device), feats


def _dense_nlml(phi, y, noise):
    """-log N(y | 0, ΦΦᵀ + σ²I), dense."""
    K = phi @ phi.mT + noise * torch.eye(phi.shape[0], dtype=D64, device=phi.device)
    sign, ld = torch.linalg.slogdet(K)
    assert sign > 0
    return 0.5 * (y @ torch.linalg.solve(K, y) + ld + phi.shape[0] * LOG_2PI)


def test_objective_at_optimal_w_is_twice_nlml(device):
    X, y, feats = _data(n=25, p=8, device=device)
    noise = torch.tensor(0.3, dtype=D64, device=device)
    model = FeatureGP(feats, X, y, noise=0.3, weights="fixed", device=device)
    gram, proj, yy = model.statistics()
    w = optimal_w(gram, proj, noise)
    phi = feats(X)
    l_stats = objective_from_statistics(gram, proj, yy, 25, w, noise)
    l_dense = objective_dense(phi, y, w, noise)
    ref = 2 * _dense_nlml(phi, y, noise) - 25 * LOG_2PI
    assert torch.allclose(l_stats, ref, rtol=1e-10, atol=1e-9)
    assert torch.allclose(l_dense, ref, rtol=1e-10, atol=1e-9)
    assert torch.allclose(2 * model.nlml() - 25 * LOG_2PI, ref, rtol=1e-10, atol=1e-9)
    assert torch.allclose(exact_objective(model, w), ref, rtol=1e-10, atol=1e-9)
    # w* minimises l: any other w is worse, and the gradient in w vanishes
    w_var = w.clone().requires_grad_(True)
    (gw,) = torch.autograd.grad(objective_dense(phi.detach(), y, w_var, noise), w_var)
    assert gw.abs().max() < 1e-8
    assert objective_dense(phi, y, w + 0.01, noise) > l_dense


def _minimax_state(n, p, device, seed=1):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(p, generator=g, dtype=D64).to(device).requires_grad_(True)
    noise = torch.tensor(0.4, dtype=D64, device=device, requires_grad=True)
    M = torch.randn(p, p, generator=g, dtype=D64)
    A = (M @ M.T + n * torch.eye(p, dtype=D64)).to(device).requires_grad_(True)
    B = torch.randn(p, p, generator=g, dtype=D64).to(device)
    return w, noise, A, B / torch.linalg.matrix_norm(B)


@pytest.mark.parametrize("subsets", ["partition", "all"])
def test_minimax_gradients_are_unbiased(device, subsets):
    """The mean over every batch of a partition (or over all index sets of size s)
    of ∇(n/s)Σ_S ψ_i equals ∇Ψ exactly, for θ = (w, σ², α), A and B."""
    n, s, p = 8, 2 if subsets == "partition" else 3, 6
    X, y, feats = _data(n=n, p=p, device=device)
    w, noise, A, B = _minimax_state(n, p, device)
    mu = 1.7
    wrt = [w, noise, A, feats.raw_lengthscale]
    full = torch.autograd.grad(psi_full(feats(X), y, w, noise, A, B, mu), wrt)
    B_var = B.clone().requires_grad_(True)
    (full_B,) = torch.autograd.grad(psi_full(feats(X), y, w, noise, A, B_var, mu), B_var)
    if subsets == "partition":
        batches = list(torch.randperm(n, generator=torch.Generator().manual_seed(3))
                       .split(s))
    else:
        batches = [torch.tensor(c) for c in itertools.combinations(range(n), s)]
    mean = [torch.zeros_like(t) for t in wrt]
    mean_B = torch.zeros_like(B)
    for S in batches:
        S = S.to(device)
        est = (n / s) * psi_batch(feats(X[S]), y[S], n, w, noise, A, B, mu)
        for acc, gr in zip(mean, torch.autograd.grad(est, wrt)):
            acc += gr / len(batches)
        with torch.no_grad():
            mean_B += grad_B(feats(X[S]), n, noise, A, mu) / len(batches)
    for a, b in zip(mean, full):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    # ∇_B Ψ = μ(A − F)/‖A‖
    with torch.no_grad():
        F = batch_F(feats(X), noise, n)
        ref_B = mu * (A - F) / torch.linalg.matrix_norm(A)
    assert torch.allclose(mean_B, ref_B, rtol=1e-10, atol=1e-12)
    assert torch.allclose(full_B, ref_B, rtol=1e-10, atol=1e-12)
    # and the batch terms sum to Ψ
    with torch.no_grad():
        total = psi_batch(feats(X), y, n, w, noise, A, B, mu)
        assert torch.allclose(total, psi_full(feats(X), y, w, noise, A, B, mu), rtol=1e-12)


def test_balanced_dual_makes_minimax_gradient_exact(device):
    """At A = F(θ), B = −‖A‖A⁻¹/μ (the balancing dual, feasible for μ ≥ ‖F‖‖F⁻¹‖):
    ∇_A Ψ = 0 and ∇_θ Ψ = ∇_θ l."""
    n, p = 12, 6
    X, y, feats = _data(n=n, p=p, device=device)
    w = torch.randn(p, generator=torch.Generator().manual_seed(2), dtype=D64).to(device)
    w.requires_grad_(True)
    noise = torch.tensor(0.3, dtype=D64, device=device, requires_grad=True)
    with torch.no_grad():
        F = batch_F(feats(X), noise, n)
        eye = torch.eye(p, dtype=D64, device=device)
        B = -torch.linalg.matrix_norm(F) * torch.cholesky_solve(eye, torch.linalg.cholesky(F))
        mu = 2.0 * float(torch.linalg.matrix_norm(B))
        B = B / mu
    assert torch.linalg.matrix_norm(B) <= 1.0
    A = F.clone().requires_grad_(True)
    wrt = [w, noise, feats.raw_lengthscale]
    got = torch.autograd.grad(psi_full(feats(X), y, w, noise, A, B, mu), [*wrt, A])
    ref = torch.autograd.grad(objective_dense(feats(X), y, w, noise), wrt)
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10)
    assert got[-1].abs().max() < 1e-10 * F.abs().max()


def test_scgd_with_true_F_gives_exact_gradient(device):
    n, p = 12, 6
    X, y, feats = _data(n=n, p=p, device=device)
    w = torch.randn(p, generator=torch.Generator().manual_seed(5), dtype=D64).to(device)
    w.requires_grad_(True)
    noise = torch.tensor(0.25, dtype=D64, device=device, requires_grad=True)
    wrt = [w, noise, feats.raw_lengthscale]
    full = torch.autograd.grad(objective_dense(feats(X), y, w, noise), wrt)
    F = batch_F(feats(X), noise, n).detach()
    g_all = torch.autograd.grad(scgd_batch(feats(X), y, n, w, noise, F), wrt)
    for a, b in zip(g_all, full):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    mean = [torch.zeros_like(t) for t in wrt]
    for S in torch.arange(n, device=device).split(4):  # a partition: unbiased
        for acc, gr in zip(mean, torch.autograd.grad(
                scgd_batch(feats(X[S]), y[S], n, w, noise, F), wrt)):
            acc += gr / 3
    for a, b in zip(mean, full):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    # with a wrong tracker the direction is wrong (the test can fail)
    g_bad = torch.autograd.grad(scgd_batch(feats(X), y, n, w, noise, 2 * F), wrt)
    assert not torch.allclose(g_bad[1], full[1], rtol=1e-6)


def test_bsgd_gradient_matches_dense_batch_nlml(device):
    X, y, feats = _data(n=15, p=8, device=device)
    noise = torch.tensor(0.2, dtype=D64, device=device, requires_grad=True)
    S = torch.tensor([0, 3, 4, 9, 11], device=device)
    wrt = [noise, feats.raw_lengthscale]
    got = torch.autograd.grad(bsgd_batch(feats(X[S]), y[S], noise), wrt)
    ref_val = 2 * _dense_nlml(feats(X[S]), y[S], noise) - 5 * LOG_2PI
    ref = torch.autograd.grad(ref_val, wrt)
    assert torch.allclose(bsgd_batch(feats(X[S]), y[S], noise), ref_val, rtol=1e-11)
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-11)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 6), noise=st.floats(1e-3, 10.0), seed=st.integers(0, 10_000),
       scale=st.floats(0.01, 100.0))
def test_project_A(p, noise, seed, scale):
    g = torch.Generator().manual_seed(seed)
    A = scale * torch.randn(p, p, generator=g, dtype=D64)
    P = project_A(A, noise)
    assert P.shape == (p, p)
    assert torch.allclose(P, P.T, atol=1e-12 * scale)
    assert torch.linalg.eigvalsh(P).min() >= noise * (1 - 1e-9) - 1e-12 * scale
    assert torch.allclose(project_A(P, noise), P, atol=1e-9 * (scale + noise))
    Pm = project_A(A, noise, a_max=noise * 2)
    assert torch.linalg.eigvalsh(Pm).max() <= 2 * noise * (1 + 1e-9) + 1e-12 * scale
    # a feasible matrix is left as it is
    M = torch.randn(p, p, generator=g, dtype=D64)
    feas = M @ M.T + noise * torch.eye(p, dtype=D64)
    assert torch.allclose(project_A(feas, noise), feas, atol=1e-9 * feas.abs().max())
    # the projection is the nearest feasible point: no closer one along a random
    # feasible direction
    assert (torch.linalg.matrix_norm(A - P)
            <= torch.linalg.matrix_norm(A - feas) + 1e-9 * (scale + feas.abs().max()))


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 6), scale=st.floats(1e-3, 1e3), seed=st.integers(0, 1000))
def test_project_B(p, scale, seed):
    B = scale * torch.randn(p, p, generator=torch.Generator().manual_seed(seed), dtype=D64)
    P = project_B(B)
    assert torch.linalg.matrix_norm(P) <= 1 + 1e-12
    if torch.linalg.matrix_norm(B) <= 1:
        assert torch.equal(P, B)
    else:
        assert torch.allclose(P / torch.linalg.matrix_norm(P), B / torch.linalg.matrix_norm(B))


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 8), noise=st.floats(1e-3, 10.0), seed=st.integers(0, 10_000),
       shift=st.floats(-2.0, 2.0), bounded=st.booleans())
def test_project_A_equals_eigenvalue_clipping(p, noise, seed, shift, bounded):
    """project_A equals the dense reference U clip(Λ) Uᵀ of the symmetric part, with
    spectra inside, across and outside [σ², a_max]."""
    g = torch.Generator().manual_seed(seed)
    Q = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=D64))[0]
    lam = noise * (1 + shift + 0.5 * torch.rand(p, generator=g, dtype=D64))
    A = (Q * lam) @ Q.T + 1e-3 * noise * torch.randn(p, p, generator=g, dtype=D64)
    a_max = 2.5 * noise if bounded else None
    sym = 0.5 * (A + A.T)
    ev, U = torch.linalg.eigh(sym)
    ref = (U * ev.clamp(min=noise, max=a_max)) @ U.T
    assert torch.allclose(project_A(A, noise, a_max), ref, rtol=0, atol=1e-12 * noise * p)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(1, 8), seed=st.integers(0, 10_000), noise=st.floats(1e-3, 10.0),
       mu=st.floats(0.1, 10.0))
def test_psi_batch_from_the_projection_spectrum_equals_cholesky(p, seed, noise, mu):
    """MINIMAX's step takes log|A| and its gradient A⁻¹ from the projection's
    eigendecomposition: equal, value and every gradient, to the Cholesky form."""
    g = torch.Generator().manual_seed(seed)
    n, s = 30, 7
    A, (lam, U) = project_A(torch.randn(p, p, generator=g, dtype=D64), noise,
                            return_eig=True)
    assert torch.allclose(A @ U, U * lam, rtol=0, atol=1e-12 * (1 + A.abs().max()))
    B = project_B(torch.randn(p, p, generator=g, dtype=D64))
    phi = torch.randn(s, p, generator=g, dtype=D64)
    y = torch.randn(s, generator=g, dtype=D64)
    w0 = torch.randn(p, generator=g, dtype=D64)
    out = []
    for eig in (None, (n * lam, U)):
        w = w0.clone().requires_grad_(True)
        sigma2 = torch.tensor(noise, dtype=D64, requires_grad=True)
        A_bar = A.clone().requires_grad_(True)
        value = psi_batch(phi, y, n, w, sigma2, n * A_bar, B, mu, eig=eig)
        value.backward()
        out.append((value.detach(), w.grad, sigma2.grad, A_bar.grad))
    for got, ref in zip(out[1], out[0]):
        assert torch.allclose(got, ref, rtol=1e-10, atol=1e-10 * (1 + ref.abs().max()))


@pytest.mark.parametrize("projection", ["eigh", "auto"])
def test_minimax_fit_with_spectral_logdet_equals_cholesky(monkeypatch, projection):
    """The whole MINIMAX fit, its projections handing their eigendecompositions (or
    log|A| and A⁻¹) to the next step, equals the same fit with log|A| by Cholesky at
    every step."""
    import gpscale.train.stochastic as stochastic

    X, y = _toy(n=60)

    def fit():
        return fit_minimax(X, y, RandomFourierFeatures(2, 10, seed=0), batch_size=10,
                           epochs=3, optimizer="adam", lr=0.02, seed=1,
                           projection=projection)

    model, res = fit()
    project, factored = stochastic.project_A, stochastic.project_A_factored
    monkeypatch.setattr(stochastic, "project_A",
                        lambda A, noise, a_max=None, return_eig=False:
                        (project(A, noise, a_max), None))
    monkeypatch.setattr(stochastic, "project_A_factored",
                        lambda A, noise, a_max=None, test_inside=True:
                        (factored(A, noise, a_max, test_inside)[0], None, True))
    ref_model, ref = fit()
    assert res.objective == pytest.approx(ref.objective, rel=1e-10)
    assert float(model.noise) == pytest.approx(float(ref_model.noise), rel=1e-9)
    for a, b in zip(model.features.parameters(), ref_model.features.parameters()):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-10)


def test_project_A_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        project_A(torch.zeros(2, 3, dtype=D64), 0.1)


def _toy(n=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=D64) * 4 - 2
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, generator=g,
                                                                          dtype=D64)
    return X, (y - y.mean()) / y.std()


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
@pytest.mark.parametrize("fit", [fit_minimax, fit_scgd, fit_bsgd])
def test_small_fit_improves_exact_nlml(fit, schedule):
    X, y = _toy()
    feats = RandomFourierFeatures(2, 40, lengthscale=3.0, seed=0)
    start = FeatureGP(RandomFourierFeatures(2, 40, lengthscale=3.0, seed=0), X, y,
                      noise=0.5, weights="fixed")
    with torch.no_grad():
        before = float(start.nlml()) / 200
    model, res = fit(X, y, feats, noise=0.5, batch_size=20, epochs=8, optimizer="adam",
                     lr=0.05, lr_schedule=schedule, seed=0)
    with torch.no_grad():
        after = float(model.nlml()) / 200
    assert model.weights_kind == "fixed"
    assert math.isclose(after, res.objective, rel_tol=1e-9)
    assert after < before - 0.05, (before, after)
    assert len(res.history) >= 8 and "noise" in res.theta
    last = res.history[-1]["lr_factor"]  # 80 steps: cosine ends at (1 + cos(79π/80))/2
    assert last == (1.0 if schedule == "constant" else pytest.approx(3.85e-4, rel=1e-2))


@pytest.mark.parametrize("fit", [fit_minimax, fit_scgd, fit_bsgd])
def test_schedule_reaches_the_optimiser(fit):
    # same seed and batches: only the step sizes differ, so the noise must too
    X, y = _toy(n=60)
    runs = [fit(X, y, RandomFourierFeatures(2, 10, seed=0), batch_size=10, epochs=1,
                optimizer="sgd", lr=1e-3, lr_schedule=schedule, eval_every=100)[0]
            for schedule in ("constant", "constant", "power")]
    noise = [float(model.noise.detach()) for model in runs]
    assert noise[0] == noise[1] != noise[2]


def test_minimax_options_and_constraint_gap():
    X, y = _toy(n=60)
    _, res = fit_minimax(X, y, RandomFourierFeatures(2, 10, seed=0), batch_size=20, epochs=2,
                         mu="auto", mu_growth=2.0, track_constraint=True, zeta_max=1e3)
    rows = [h for h in res.history if "objective" in h]
    assert len(rows) == 2 and all(0 <= h["constraint_gap"] < 10 for h in rows)
    assert rows[1]["mu"] == pytest.approx(2 * rows[0]["mu"]) and rows[0]["mu"] > 2
    with pytest.raises(ValueError, match="dual_init"):
        fit_minimax(X, y, RandomFourierFeatures(2, 10, seed=0), dual_init="ones")


def test_scgd_options_decaying_rates_and_independent_tracker():
    X, y = _toy(n=100)
    feats = RandomFourierFeatures(2, 20, lengthscale=3.0, seed=0)
    ls0 = feats.lengthscale.detach().clone()
    model, res = fit_scgd(X, y, feats, batch_size=10, epochs=3, b=None, b0=1.0,
                          lr_schedule="power", tracker="independent", optimizer="sgd",
                          lr=1e-3)
    assert math.isfinite(res.objective) and res.reason == "max_epochs"
    assert not torch.allclose(model.features.lengthscale, ls0)  # RFF lengthscales learned
    with pytest.raises(ValueError, match="b must"):
        fit_scgd(X, y, feats, b=1.5)


def test_fit_is_seeded():
    X, y = _toy(n=80)
    runs = [fit_scgd(X, y, RandomFourierFeatures(2, 20, seed=0), batch_size=16, epochs=2,
                     seed=4)[1].objective for _ in range(2)]
    assert runs[0] == runs[1]


def test_bad_arguments():
    X, y = _toy(n=40)
    feats = RandomFourierFeatures(2, 10, seed=0)
    with pytest.raises(ValueError, match="batch_size"):
        fit_minimax(X, y, feats, batch_size=0)
    with pytest.raises(ValueError, match="mu"):
        fit_minimax(X, y, feats, mu=-1.0)
    with pytest.raises(ValueError, match="tracker"):
        fit_scgd(X, y, feats, tracker="other")
    with pytest.raises(ValueError, match="features"):
        fit_bsgd(X, y, "rff")
    with pytest.raises(ValueError, match="optimizer"):
        fit_bsgd(X, y, feats, optimizer="lbfgs")
    for fit in (fit_minimax, fit_scgd, fit_bsgd):
        with pytest.raises(ValueError, match="lr_schedule"):
            fit(X, y, feats, lr_schedule="step")


@pytest.mark.parametrize("method", ["minimax", "scgd", "bsgd"])
def test_gpscale_fit_and_save_load(method, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(120, 2)) * [1.0, 10.0] + [0.0, 50.0]
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(120) + 3.0
    pred = gpscale.fit(X, y, method=method, kernel="rbf-ard", num_features=20, epochs=2,
                       batch_size=30, optimizer="adam", lr=0.05)
    mean, std = pred.predict(X[:5], return_std=True)
    assert mean.shape == (5,) and np.all(std > 0)
    path = pred.save(tmp_path / f"{method}.pt")
    back = gpscale.load(path)
    m2, s2 = back.predict(X[:5], return_std=True)
    np.testing.assert_allclose(m2, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s2, std, rtol=1e-10, atol=1e-12)
