"""GP-GRIEF-I with the weights on the eigenfunctions (eq. 16): the primal (eq. 18) and
dual likelihood forms against a dense Gaussian NLML and autograd, their predictions
against the dense GP with K̃ = ΦWΦᵀ, the filled grid, and the fitted posterior."""

from __future__ import annotations

import pytest
import torch

from gpscale.features.grief import GriefFeatures, fill_grid, fill_grids, grid_1d
from gpscale.models.grief_eigen import (
    ReweightedGrief,
    ReweightedGriefPosterior,
    dual_is_cheaper,
)
from gpscale.train.grief import fit_grief_i

F64 = torch.float64


def _problem(n, p, rank=None, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    phi = torch.randn(n, rank or p, generator=g, dtype=F64)
    if rank is not None:  # a rank-deficient Φ (columns of few values make one)
        phi = phi @ torch.randn(rank, p, generator=g, dtype=F64)
    y = torch.randn(n, generator=g, dtype=F64)
    w = torch.rand(p, generator=g, dtype=F64) * 2 + 0.1
    return phi.to(device), y.to(device), w.to(device), torch.tensor(0.3, dtype=F64,
                                                                    device=device)


def _dense(phi, y, w, noise):
    """−log N(y; 0, ΦWΦᵀ + σ²I) and its autograd gradient in (w, σ²)."""
    w, noise = w.clone().requires_grad_(), noise.clone().requires_grad_()
    C = phi @ torch.diag(w) @ phi.mT + noise * torch.eye(len(y), dtype=F64, device=y.device)
    value = -torch.distributions.MultivariateNormal(torch.zeros_like(y), C).log_prob(y)
    g_w, g_noise = torch.autograd.grad(value, (w, noise))
    return value.detach(), g_w, g_noise


@pytest.mark.parametrize("n,p,rank", [(7, 12, None), (12, 7, None), (9, 9, None),
                                      (10, 14, 4), (15, 6, 3)])
@pytest.mark.parametrize("source", ["features", "statistics"])
@pytest.mark.parametrize("form", ["primal", "dual"])
def test_likelihood_and_gradient_match_dense_autograd(device, n, p, rank, source, form):
    phi, y, w, noise = _problem(n, p, rank, device=device)
    if source == "features":
        lik = ReweightedGrief.from_features(phi, y, form=form)
    else:
        lik = ReweightedGrief.from_statistics(phi.mT @ phi, phi.mT @ y, y @ y, n, form=form)
    assert lik.form == form
    if form == "dual" and source == "statistics":
        assert lik.k == min(n, p, rank or p)  # only the directions Φ spans
    for got, want in zip(lik.nlml_and_grad(w, noise), _dense(phi, y, w, noise)):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("n,p", [(8, 13), (13, 8)])
@pytest.mark.parametrize("form", ["primal", "dual"])
def test_predictions_match_the_dense_gp(device, n, p, form):
    """Mean k*ᵀ(K̃+σ²I)⁻¹y and variance k** − k*ᵀ(K̃+σ²I)⁻¹k* of K̃ = ΦWΦᵀ."""
    phi, y, w, noise = _problem(n + 5, p, seed=3, device=device)
    phi, phi_new, y = phi[:n], phi[n:], y[:n]
    lik = ReweightedGrief.from_statistics(phi.mT @ phi, phi.mT @ y, y @ y, n, form=form)
    mean, var = lik.predict(phi_new, w, noise)
    K = phi @ torch.diag(w) @ phi.mT + noise * torch.eye(n, dtype=F64, device=device)
    k_star = phi @ torch.diag(w) @ phi_new.mT
    torch.testing.assert_close(mean, k_star.mT @ torch.linalg.solve(K, y), rtol=1e-9,
                               atol=1e-10)
    kss = (phi_new * w * phi_new).sum(1)
    torch.testing.assert_close(var, kss - (k_star * torch.linalg.solve(K, k_star)).sum(0),
                               rtol=1e-8, atol=1e-10)


def test_form_choice_and_bad_input():
    phi, y, w, noise = _problem(6, 40)
    assert ReweightedGrief.from_statistics(phi.mT @ phi, phi.mT @ y, y @ y, 6).form == "dual"
    phi2, y2, _, _ = _problem(50, 40)
    assert ReweightedGrief.from_statistics(phi2.mT @ phi2, phi2.mT @ y2, y2 @ y2,
                                           50).form == "primal"
    assert dual_is_cheaper(100, 1000) and not dual_is_cheaper(960, 1000)
    lik = ReweightedGrief.from_features(phi, y)
    with pytest.raises(ValueError, match="p = 40"):
        lik.nlml_and_grad(w[:5], noise)
    with pytest.raises(ValueError, match="form"):
        ReweightedGrief.from_features(phi, y, form="orthogonal")


def test_filled_grid_does_not_cap_p():
    """Binary and three-valued columns get m̄ evenly spaced grid points over their range
    (a constant column keeps its one), so p = 1000 on three such columns, where their
    distinct values alone give m = 2·2·3 = 12."""
    g = torch.Generator().manual_seed(1)
    X = torch.stack([torch.randint(0, 2, (50,), generator=g),
                     torch.randint(0, 2, (50,), generator=g),
                     torch.randint(0, 3, (50,), generator=g)], 1).to(F64)
    raw = [grid_1d(X[:, i], 10) for i in range(3)]
    assert [r.numel() for r in raw] == [2, 2, 3]
    filled = [fill_grid(r, 10) for r in raw]
    torch.testing.assert_close(filled[2], torch.linspace(0, 2, 10, dtype=F64))
    assert GriefFeatures(None, 1000, grids=raw).num_features == 12
    assert GriefFeatures(None, 1000, grids=filled).num_features == 1000
    one = torch.tensor([3.0], dtype=F64)
    assert fill_grid(one, 10) is one
    wide = torch.linspace(0, 1, 12, dtype=F64)
    assert fill_grid(wide, 10) is wide


def test_fill_grids_fills_a_quantile_grid_only_below_p():
    """Grids of 10, 4 and 10 points (product 400): the uniform grid's short column is
    always filled to m̄ evenly spaced points; the quantile grid's only for p > 400, and
    below that every grid is returned as it was."""
    grids = [torch.linspace(0, 1, 10, dtype=F64), torch.tensor([0.0, 0.1, 0.2, 5.0], dtype=F64),
             torch.linspace(-1, 1, 10, dtype=F64)]
    even = torch.linspace(0, 5, 10, dtype=F64)
    for kind, p, short in [("uniform", 200, even), ("quantile", 401, even),
                           ("quantile", 400, grids[1]), ("quantile", 200, grids[1])]:
        out = fill_grids(grids, 10, kind, p)
        assert len(out) == 3 and out[0] is grids[0] and out[2] is grids[2]
        torch.testing.assert_close(out[1], short, rtol=0, atol=0)
    with pytest.raises(ValueError, match="grid"):
        fill_grids(grids, 10, "even", 200)


@pytest.mark.parametrize("grid,p,filled", [("quantile", 200, False),
                                             ("quantile", 1000, True),
                                             ("uniform", 200, True)])
def test_quantile_grid_is_filled_only_where_it_would_cap_p(grid, p, filled):
    """A column of few values (mostly one) has a short grid: its 4 values. On the
    quantile grid fit_grief_i fills it only when the grids' product (10·4·10 = 400)
    is below p; the uniform grid is filled whenever a column is short."""
    g = torch.Generator().manual_seed(7)
    n = 80
    ties = torch.zeros(n, dtype=F64)
    ties[:8] = torch.tensor([1.0, 1.0, 2.0, 2.0, 2.0, 9.0, 9.0, 9.0], dtype=F64)
    X = torch.stack([torch.rand(n, generator=g, dtype=F64), ties,
                     torch.rand(n, generator=g, dtype=F64)], 1)
    assert [grid_1d(X[:, i], 10, "quantile").numel() for i in range(3)] == [10, 4, 10]
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    post, _ = fit_grief_i(X, y, p=p, grid=grid, n_iter=20, burn=10, thin=5)
    sizes = post.features.grid_sizes
    assert sizes[1] == (10 if filled else 4)
    if not filled:  # the grids fit_grief_i used are the unfilled ones, point for point
        torch.testing.assert_close(post.features.grid_points(1), grid_1d(X[:, 1], 10, grid))


def test_grief_i_posterior_is_the_dense_mixture_and_round_trips():
    """fit_grief_i's default (eq. 16): p weights (not ≤ n), the posterior's objective is
    the mean dense NLML over the draws, its predictions the dense mixture, and a
    posterior rebuilt from its config and state predicts the same."""
    g = torch.Generator().manual_seed(4)
    X = torch.rand(40, 2, generator=g, dtype=F64) * 4 - 2
    y = torch.sin(X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(40, generator=g,
                                                                    dtype=F64)
    post, chain = fit_grief_i(X[:30], y[:30], p=60, n_iter=60, burn=20, thin=10,
                              init_points=30, init_max_iter=20)
    assert isinstance(post, ReweightedGriefPosterior)
    assert post.w.shape == (4, 60) and post.likelihood.form == "dual"
    phi = post.features(X[:30]) * post.scale.sqrt()
    ref = [_dense(phi, y[:30], w, s)[0] for w, s in zip(post.w, post.noise)]
    torch.testing.assert_close(post.objective(), torch.stack(ref).mean(), rtol=1e-9,
                               atol=1e-9)
    mean, var = post.predict(X[30:], include_noise=True)
    phi_new = post.features(X[30:]) * post.scale.sqrt()
    mus, second = [], []
    for w, s in zip(post.w, post.noise):
        K = phi @ torch.diag(w) @ phi.mT + s * torch.eye(30, dtype=F64)
        ks = phi @ torch.diag(w) @ phi_new.mT
        mu = ks.mT @ torch.linalg.solve(K, y[:30])
        v = (phi_new * w * phi_new).sum(1) - (ks * torch.linalg.solve(K, ks)).sum(0) + s
        mus.append(mu)
        second.append(v + mu * mu)
    want_mean = torch.stack(mus).mean(0)
    torch.testing.assert_close(mean, want_mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(var, torch.stack(second).mean(0) - want_mean**2, rtol=1e-7,
                               atol=1e-10)
    back = ReweightedGriefPosterior.from_config(post.to_config(), post.saved_state())
    back.load_state_dict(post.saved_state())
    torch.testing.assert_close(back.predict(X[30:]).mean, post.predict(X[30:]).mean,
                               rtol=1e-12, atol=1e-12)
    assert "p = 60 weighted eigenfunctions" in post.summary()


def test_rotated_basis_stays_an_option():
    g = torch.Generator().manual_seed(5)
    X = torch.rand(25, 2, generator=g, dtype=F64)
    y = X.sum(1) + 0.05 * torch.randn(25, generator=g, dtype=F64)
    post, _ = fit_grief_i(X, y, p=40, n_iter=40, burn=10, thin=10, init_points=25,
                          init_max_iter=50, basis="rotated")
    assert post.rank <= 25  # at most n rotated directions
    assert post.summary().startswith(f"GP-GRIEF-I posterior: 3 draws, rank p̃ = {post.rank}")
    with pytest.raises(ValueError, match="basis"):
        fit_grief_i(X, y, p=40, basis="pca")


def test_merged_quantile_grid_is_filled_unless_told_otherwise():
    """A column that is 0 on 70 % of the rows: its quantile grid merges to fewer than m̄
    points; where that caps p (here 10·4 = 40 grid points against p = 200) GRIEF-I
    fills it to m̄, ``fill=False`` keeps it."""
    g = torch.Generator().manual_seed(6)
    X = torch.rand(60, 2, generator=g, dtype=F64)
    X[:42, 1] = 0.0
    y = X.sum(1)
    kw = {"p": 200, "n_iter": 20, "burn": 5, "thin": 5, "init_points": 60,
          "init_max_iter": 50, "grid": "quantile"}
    filled, _ = fit_grief_i(X, y, **kw)
    kept, _ = fit_grief_i(X, y, fill=False, **kw)
    assert filled.features.grid_sizes == [10, 10]
    assert kept.features.grid_sizes[1] < 10


def test_zero_features_leave_the_noise_only_model():
    """Φ ≡ 0 (the exact-GP start can give lengthscales so short that no grid point is
    near a data point): the dual form has k = 0, −LML is that of N(0, σ²I), and the
    prediction is the prior's (mean 0, variance φ*ᵀWφ*)."""
    y = torch.linspace(-1, 1, 9, dtype=F64)
    lik = ReweightedGrief.from_statistics(torch.zeros(12, 12, dtype=F64),
                                          torch.zeros(12, dtype=F64), y @ y, 9)
    assert (lik.form, lik.k) == ("dual", 0)
    w, noise = torch.full((12,), 2.0, dtype=F64), torch.tensor(0.5, dtype=F64)
    value, g_w, _ = lik.nlml_and_grad(w, noise)
    want = -torch.distributions.MultivariateNormal(torch.zeros(9, dtype=F64),
                                                   noise * torch.eye(9, dtype=F64)).log_prob(y)
    torch.testing.assert_close(value, want, rtol=1e-12, atol=1e-12)
    assert torch.equal(g_w, torch.zeros(12, dtype=F64))
    phi_new = torch.ones(2, 12, dtype=F64)
    mean, var = lik.predict(phi_new, w, noise)
    assert torch.equal(mean, torch.zeros(2, dtype=F64))
    torch.testing.assert_close(var, torch.full((2,), 24.0, dtype=F64))
