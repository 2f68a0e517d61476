"""GPCV-ADMM's steps as the paper writes them, each against a dense reference: the
θ-step's line minimisation along one coordinate (eq. 12, §5.3), the single
Fletcher–Reeves z-step (eq. 14, the option ``z_step="fr"``) on Σ = K_VTᵀK_VT + ρ/2 C²,
z⁰ = C(perturbed θ⁰)⁻¹ y_T (eq. 10, §5), Algorithm 1's stop on ‖θ^(η+1) − θ^η‖ < ε, and
whole iterations of the paper preset against a dense transcription of the authors' R loop
(github.com/eveneveno/GPCV-ADMM-2019, ``Synthetic_test/se_v1.R``). The CG z-step against
the dense minimiser of (13): tests/test_admm.py."""

import math

import pytest
import torch
from scipy.optimize import minimize_scalar

from gpscale.data.synthetic import synthetic_admm
from gpscale.kernels import make_kernel
from gpscale.models.exact import ExactGP
from gpscale.params import inv_softplus
from gpscale.train.admm import (
    PRESETS,
    CoordinateThetaStep,
    HoldoutADMM,
    fit_admm_hocv,
    fit_admm_kfold,
    holdout_split,
    line_minimise,
    make_options,
)


def _state(name="rbf-ard", device="cpu", n=40, seed=0, **opts):
    g = torch.Generator().manual_seed(seed)
    d = 1 if name == "se+lp" else 2
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X.sum(1)) + 0.2 * torch.randn(n, generator=g, dtype=torch.float64)
    X, y = X.to(device), y.to(device)
    model = ExactGP(make_kernel(name, d), X, y, noise=0.3)
    iT, iV = holdout_split(n, 0.4, seed)
    iT, iV = iT.to(device), iV.to(device)
    st = HoldoutADMM(model, X[iT], y[iT], X[iV], y[iV], make_options(memory="dense", **opts))
    st.init()
    return model, st


def _dense_lrho(model, st):
    """L_ρ(θ, z, λ) of eq. (11) from dense matrices at the model's θ (differentiable)."""
    KVT = model.kernel(st.X_V, st.X_T)
    C = model.kernel(st.X_T) + model.noise * torch.eye(st.X_T.shape[0], dtype=KVT.dtype,
                                                        device=KVT.device)
    e = st.y_V - KVT @ st.z
    r = C @ st.z - st.y_T
    return e @ e + st.lam @ r + 0.5 * st.rho * (r @ r)


def test_line_minimise_finds_the_minimiser_of_a_known_function():
    """A parabola's minimiser at 3, from a first step of 0.01, and a bound kept."""
    t, f, evals = line_minimise(lambda t: (t - 3.0) ** 2, 9.0, 0.01, math.inf, 1e-10, 200)
    assert t == pytest.approx(3.0, abs=1e-8) and f < 1e-15 and evals < 200
    t, _, _ = line_minimise(lambda t: (t - 3.0) ** 2, 9.0, 0.01, 2.0, 1e-12, 200)
    assert 1.99 < t < 2.0  # the minimiser beyond t_max: it approaches the bound
    t, f, _ = line_minimise(lambda t: t, 0.0, 1.0, math.inf, 1e-6, 50)  # no descent
    assert t == 0.0 and f == 0.0


@pytest.mark.parametrize("name,coord", [("rbf", 1), ("rbf", 2), ("se+lp", 2), ("se+lp", 4)])
def test_coordinate_step_lands_on_the_dense_line_minimiser(name, coord, device):
    """One coordinate of the θ-step (eq. 12 with line minimisation) moves θ_i, in its own
    units, to the minimiser of the dense L_ρ along its descent direction: dense
    L_ρ(θ_i) is minimised on the bracket found by a grid and refined by scipy's Brent."""
    _, st = _state(name, device, line_tol=1e-10, line_max_evals=200)
    step = st.theta_update
    assert isinstance(step, CoordinateThetaStep)
    floor = step.floors[coord]
    theta0 = st.theta()
    v0 = floor + float(torch.nn.functional.softplus(theta0[coord]))

    def dense(v: float) -> float:
        vec = theta0.clone()
        vec[coord] = inv_softplus(torch.tensor(v - floor, dtype=torch.float64))
        st.set_theta(vec)
        with torch.no_grad():
            return float(_dense_lrho(st.model, st))

    f0, e, r = st.lrho()
    g = st.grad(e, r)
    sign = -1.0 if float(g[coord]) > 0 else 1.0
    # the reference: the first local minimum of dense L_ρ on a grid along the direction
    ts, fs = [], []
    for t in (v0 * 0.002 * k for k in range(1, 4000)):  # up the grid until L_ρ rises
        if v0 + sign * t <= floor or (len(fs) > 1 and fs[-1] > fs[-2]):
            break
        ts.append(t)
        fs.append(dense(v0 + sign * t))
    k = len(fs) - 2
    assert fs[k] < f0 and fs[k] < fs[k + 1] and k > 0  # an interior minimum in the window
    ref = minimize_scalar(lambda t: dense(v0 + sign * t), bracket=(ts[k - 1], ts[k], ts[k + 1]),
                          tol=1e-12).x
    st.set_theta(theta0)
    assert step.coordinate(coord, floor, f0, g)
    v1 = floor + float(torch.nn.functional.softplus(st.theta()[coord]))
    assert v1 == pytest.approx(v0 + sign * ref, rel=1e-6)
    others = [i for i in range(theta0.numel()) if i != coord]
    assert torch.equal(st.theta()[others], theta0[others])  # one coordinate only


def test_theta_step_sweeps_every_coordinate_and_lowers_lrho(device):
    """A θ-step is one sweep (theta_steps = 1): each coordinate moves once and L_ρ
    falls."""
    _, st = _state("se+lp", device)
    f0 = st.lrho()[0]
    moved, _ = st.theta_update.step()
    f1 = st.lrho()[0]
    assert moved == st.theta().numel() and f1 < f0


def test_a_coordinate_moves_by_at_most_line_max_ratio():
    """Each positive θ_i stays within a factor line_max_ratio of its value per θ-step."""
    _, st = _state("se+lp", line_max_ratio=1.05)
    floors = st.theta_update.floors
    before = [f + float(torch.nn.functional.softplus(t)) for f, t in zip(floors, st.theta())]
    st.theta_update.step()
    after = [f + float(torch.nn.functional.softplus(t)) for f, t in zip(floors, st.theta())]
    ratios = [max(a / b, b / a) for a, b in zip(after, before)]
    assert max(ratios) <= 1.05 + 1e-12 and max(ratios) > 1.0
    with pytest.raises(ValueError, match="line_max_ratio"):
        make_options(line_max_ratio=1.0)


def test_one_fr_z_step_equals_the_dense_conjugate_direction_step(device):
    """Eq. (14) twice from (θ, z⁰, λ): the first step along −g, the second along
    −g + β d_prev with Fletcher–Reeves β = ‖g‖²/‖g_prev‖², each with the exact line
    minimiser μ₂ = −gᵀd/(2dᵀΣd), Σ = K_VTᵀK_VT + ρ/2 C² and b = Cλ − ρCy_T − 2K_VTᵀy_V
    built densely; θ and λ change between the two steps as in Algorithm 1."""
    model, st = _state("rbf-ard", device, z_step="fr")

    def dense_quadratic():
        with torch.no_grad():
            KVT = model.kernel(st.X_V, st.X_T)
            C = model.kernel(st.X_T) + model.noise * torch.eye(st.X_T.shape[0],
                                                                dtype=KVT.dtype, device=KVT.device)
            Sigma = KVT.mT @ KVT + 0.5 * st.rho * C @ C
            b = C @ st.lam - st.rho * C @ st.y_T - 2 * KVT.mT @ st.y_V
        return Sigma, b

    Sigma, b = dense_quadratic()
    z = st.z.clone()
    g = 2 * Sigma @ z + b
    d = -g
    z_ref = z - (g @ d) / (2 * d @ Sigma @ d) * d
    assert st.z_step() == 1
    torch.testing.assert_close(st.z, z_ref, rtol=1e-10, atol=1e-12)
    st.set_theta(st.theta() + 0.05)  # a new θ and λ: the quadratic changes
    st.lam = st.lam + 0.3
    g_prev, d_prev = g, d
    Sigma, b = dense_quadratic()
    g = 2 * Sigma @ st.z + b
    d = -g + (g @ g) / (g_prev @ g_prev) * d_prev
    assert float(g @ d) < 0  # a descent direction here (else the step restarts at −g)
    z_ref = st.z - (g @ d) / (2 * d @ Sigma @ d) * d
    st.z_step()
    torch.testing.assert_close(st.z, z_ref, rtol=1e-10, atol=1e-12)
    # the quadratic (13) falls along the step
    assert float(b @ st.z + st.z @ Sigma @ st.z) < float(b @ z + z @ Sigma @ z)


def test_z0_solves_the_constraint_at_the_perturbed_theta0(device):
    """z⁰ = C(θ̃)⁻¹ y_T with θ̃_i = θ⁰_i (1 + 0.1 u_i), u_i ~ U[−1, 1] from z0_seed (dense
    solve); θ itself stays θ⁰, and z0_perturb = 0 gives C(θ⁰)⁻¹ y_T."""
    model, st = _state("se+lp", device, cg_tol=1e-13, cg_max_iter=None)
    theta0 = st.theta()
    u = 2 * torch.rand(theta0.numel(), generator=torch.Generator().manual_seed(0),
                       dtype=torch.float64) - 1
    floors = st.theta_update.floors
    values = [f + torch.nn.functional.softplus(t) for f, t in zip(floors, theta0)]
    perturbed = torch.stack([inv_softplus(v * (1 + 0.1 * float(ui)) - f)
                             for v, ui, f in zip(values, u, floors)])
    torch.testing.assert_close(st.perturbed_theta(), perturbed.to(theta0))
    st.set_theta(perturbed.to(theta0))
    with torch.no_grad():
        C = model.kernel(st.X_T) + model.noise * torch.eye(st.X_T.shape[0], dtype=torch.float64,
                                                            device=theta0.device)
        z_ref = torch.linalg.solve(C, st.y_T)
    st.set_theta(theta0)
    st.init()
    assert torch.equal(st.theta(), theta0)
    torch.testing.assert_close(st.z, z_ref, rtol=1e-8, atol=1e-10)
    _, plain = _state("se+lp", device, cg_tol=1e-13, cg_max_iter=None, z0_perturb=0.0)
    with torch.no_grad():
        C0 = model.kernel(plain.X_T) + model.noise * torch.eye(plain.X_T.shape[0],
                                                                dtype=torch.float64,
                                                                device=theta0.device)
    torch.testing.assert_close(plain.z, torch.linalg.solve(C0, plain.y_T), rtol=1e-8,
                               atol=1e-10)
    assert float((plain.z - st.z).norm()) > 1e-3 * float(plain.z.norm())


@pytest.mark.parametrize("eps", [1e-2, 1e-3])
def test_alg1_stops_at_the_first_iteration_that_moves_theta_less_than_eps(eps):
    """The paper preset's stop is Algorithm 1's: the run ends at the first η with
    ‖θ^(η+1) − θ^η‖ < ε (θ in its own units) and not before."""
    ds = synthetic_admm("se", 100, seed=3, noise=0.1)
    model = ExactGP(make_kernel("rbf", 1), ds.X, ds.y, noise=0.3)
    res = fit_admm_hocv(model, seed=0, eps=eps, max_iter=100, preset="paper")
    steps = res.history[1:]
    assert res.converged and res.reason == "converged"
    assert steps[-1]["dtheta"] < eps
    assert all(h["dtheta"] >= eps for h in steps[:-1])
    thetas = [torch.tensor([v for vals in h["theta"].values() for v in vals],
                           dtype=torch.float64)
              for h in res.history[-2:]]  # the recorded Δθ is the change in θ's units
    assert float((thetas[1] - thetas[0]).norm()) == pytest.approx(steps[-1]["dtheta"],
                                                                   rel=1e-9, abs=1e-15)


def test_defaults_are_the_papers_and_presets_name_the_variants():
    o = make_options()
    assert (o.rho, o.lam0, o.eps, o.max_iter, o.window) == (5.0, 1.0, 1e-2, 100, 1)
    assert (o.direction, o.line_search, o.theta_steps, o.z_step) == (
        "coordinate", "minimize", 1, "cg")
    assert o.z0_perturb > 0
    paper = make_options(preset="paper")  # Alg. 1 without its ε test: maxItr iterations
    assert (paper.eps, paper.max_iter, paper.z_step) == (0.0, 100, "cg")
    assert make_options(preset="paper", eps=1e-2).eps == 1e-2
    with pytest.raises(ValueError, match="eps"):
        make_options(eps=-1.0)
    old = make_options(preset="lbfgs-cg")
    assert (old.direction, old.theta_steps, old.z_step, old.window, old.z0_perturb) == (
        "lbfgs", 3, "cg", 10, 0.0)
    assert make_options(preset="tangent", rho=7.0).rho == 7.0  # keywords override
    assert set(PRESETS) == {"paper", "lbfgs-cg", "tangent"}
    with pytest.raises(ValueError, match="preset must be one of"):
        make_options(preset="fast")
    with pytest.raises(ValueError, match="z_step"):
        make_options(z_step="exact")
    with pytest.raises(ValueError, match="direction"):
        make_options(coupling="tangent")  # the tangent step takes gd or lbfgs


def test_kfold_naive_scheme_runs_the_paper_steps_per_fold_and_averages():
    """The naive K-fold scheme (§3.2) with the paper's steps and Alg. 1's ε: each fold
    stops by ε, and θ is the mean of the folds' θ in the hyperparameters' units."""
    ds = synthetic_admm("se", 80, seed=4, noise=0.1)
    model = ExactGP(make_kernel("rbf", 1), ds.X, ds.y, noise=0.3)
    res = fit_admm_kfold(model, k=2, seed=0, scale="keep", preset="paper", eps=1e-2)
    folds = [[h for h in res.history if h["fold"] == k] for k in (0, 1)]
    assert all(len(f) > 1 for f in folds) and res.converged
    last = [f[-1]["theta"]["kernel.base.lengthscale"][0] for f in folds]
    assert float(model.kernel.base.lengthscale.detach()) == pytest.approx(sum(last) / 2, rel=1e-12)


def _authors_loop(xt, xv, yt, yv, l, z, lam, noise, rho, iters):
    """Algorithm 1 as the authors' se_v1.R runs it, densely in numpy: the θ-step to the
    stationary point of L_ρ in l that their descent (gradient steps with Armijo
    backtracking until |∂L_ρ/∂l| ≤ 1e-3) runs into — here the first zero of ∂L_ρ/∂l
    downhill from l, bracketed by doubling steps and refined by Brent's method to 1e-14
    —, the z-step by the exact minimiser of (13) (their CG run to convergence), then
    λ ← λ + ρ(Cz − y_T); returns l after each iteration."""
    import numpy as np
    from scipy.optimize import brentq

    sq = lambda a, b: (a[:, None] - b[None, :]) ** 2  # noqa: E731
    K = lambda a, b, l: np.exp(-sq(a, b) / (2 * l * l))  # noqa: E731
    Kg = lambda a, b, l: K(a, b, l) * sq(a, b) / l ** 3  # noqa: E731
    eye = np.eye(len(xt))

    def grad(l):  # eq. (18) as the R code writes it, for the SE lengthscale
        e = yv - K(xv, xt, l) @ z
        r = (K(xt, xt, l) + noise * eye) @ z - yt
        return -2 * e @ (Kg(xv, xt, l) @ z) + (lam + rho * r) @ (Kg(xt, xt, l) @ z)

    out = []
    for _ in range(iters):
        g0 = grad(l)
        step = -np.sign(g0) * 1e-3 * l
        a, b = l, l + step
        while np.sign(grad(b)) == np.sign(g0):
            a, b = b, b + (b - a) * 2
        l = brentq(grad, min(a, b), max(a, b), xtol=1e-14, rtol=1e-15)
        Kvt, C = K(xv, xt, l), K(xt, xt, l) + noise * eye
        z = np.linalg.solve(2 * (Kvt.T @ Kvt + rho / 2 * C @ C),
                            2 * Kvt.T @ yv - C @ lam + rho * C @ yt)
        lam = lam + rho * (C @ z - yt)
        out.append(l)
    return out


def test_paper_preset_iterations_follow_the_authors_loop():
    """Five iterations of the paper preset (coordinate line minimisation, the CG z-step,
    the dual step) land on the same l, iteration by iteration, as a dense transcription
    of the authors' R loop from the same (l⁰, z⁰, λ⁰ = 1) on their protocol (SE, σ² = 1,
    noise variance 0.25 held, l⁰ = 0.9, data on an even grid split odd/even)."""
    import numpy as np

    from gpscale.data.synthetic import paper_kernel

    def se(l):
        return paper_kernel("se", {"l": l, "sigma2": 1.0}).to(torch.float64)

    g = torch.Generator().manual_seed(5)
    x = torch.linspace(0, 5, 80, dtype=torch.float64)
    with torch.no_grad():
        Kx = se(0.5)(x[:, None], x[:, None])
        f = torch.linalg.cholesky(Kx + 1e-8 * torch.eye(80, dtype=torch.float64)) @ \
            torch.randn(80, generator=g, dtype=torch.float64)
    y = f + 0.25 * torch.rand(80, generator=g, dtype=torch.float64)
    iT, iV = torch.arange(0, 80, 2), torch.arange(1, 80, 2)
    kernel = se(0.9)
    kernel.raw_outputscale.requires_grad_(False)
    model = ExactGP(kernel, x[:, None], y, noise=0.25)
    model.raw_noise.requires_grad_(False)
    st = HoldoutADMM(model, x[iT, None], y[iT], x[iV, None], y[iV],
                     make_options(preset="paper", memory="dense", line_tol=1e-12,
                                  line_max_evals=400, cg_tol=1e-13, cg_max_iter=None))
    with torch.no_grad():  # z⁰ from (10) at a perturbed l (the R code's rnorm(0.9, 0.1))
        C1 = se(0.97)(x[iT, None], x[iT, None])
        z0 = torch.linalg.solve(C1 + 0.25 * torch.eye(40, dtype=torch.float64), y[iT])
    st.init(z0=z0)
    assert torch.equal(st.lam, torch.ones(40, dtype=torch.float64))
    ref = _authors_loop(x[iT].numpy(), x[iV].numpy(), y[iT].numpy(), y[iV].numpy(), 0.9,
                        z0.numpy(), np.ones(40), 0.25, 5.0, 5)
    ours = []
    for _ in range(5):
        st.iterate()
        ours.append(float(model.kernel.base.lengthscale.detach()))
    assert ours == pytest.approx(ref, rel=1e-6)
    assert abs(ours[-1] - 0.9) > 1e-3  # θ moved
