"""The exact GP's CG solver and the fast kernel products against dense references (small n,
float64): CG means equal Cholesky means, variances equal (Lanczos at full rank) or
estimate without bias (pathwise sampling) the Cholesky variances, float32 slabs stay
close, warm starts save iterations, and a saved model predicts what it did."""

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as hst
from refine_checks import cg_model

from gpscale.kernels import RBF, Matern, Periodic, RationalQuadratic, Scale, make_kernel
from gpscale.kernels.chunked import (
    block_matmul,
    kernel_form,
    kernel_matmul,
    kernel_product,
    prepare_columns,
)
from gpscale.kernels.operator import KernelOperator, row_blocks
from gpscale.models import ConjugateGradients, ExactGP, model_class

KERNELS = {
    "rbf-ard": lambda d: Scale(RBF([0.7, 1.3, 2.0][:d], ard_dims=d), 1.7),
    "rbf": lambda d: RBF(0.9),
    "matern12": lambda d: Matern(0.5, 1.1),
    "matern32-ard": lambda d: Scale(Matern(1.5, [0.5, 1.0, 2.0][:d], ard_dims=d), 0.6),
    "matern52": lambda d: Scale(Matern(2.5, 1.3), 2.0),
    "rq": lambda d: Scale(RationalQuadratic(0.8, alpha=0.6)),
    "active": lambda d: Scale(RBF(1.0, active_dims=[d - 1])),
    "periodic": lambda d: Periodic(1.0, 1.5),  # no fast form: kernel(X1, X2)
}


def _data(n, d=3, seed=0, noise=0.05, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4.0
    f = torch.sin(X @ torch.linspace(1.0, 0.3, d, dtype=torch.float64)) + 0.3 * X[:, 0]
    y = f + noise * torch.randn(n, generator=g, dtype=torch.float64)
    Xs = torch.rand(60, d, generator=g, dtype=torch.float64) * 4.0
    return X.to(device), y.to(device), Xs.to(device)


def _exact(X, y, noise=0.01, mean_constant=0.2):
    ex = ExactGP(make_kernel("rbf-ard", X.shape[1]), X, y, noise=noise, mean="constant",
                 device=X.device)
    with torch.no_grad():
        ex.kernel.base.lengthscale = torch.tensor([0.8, 1.2, 1.6], dtype=torch.float64)
        ex.kernel.outputscale = torch.tensor(1.5, dtype=torch.float64)
        ex.mean_constant.fill_(mean_constant)
    return ex


# -- products -------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(n1=hst.integers(1, 40), n2=hst.integers(1, 40), d=hst.integers(1, 3),
       k=hst.integers(1, 5), block=hst.integers(1, 50), name=hst.sampled_from(sorted(KERNELS)),
       noise=hst.sampled_from([None, 0.3]))
def test_kernel_product_equals_the_dense_product(n1, n2, d, k, block, name, noise):
    g = torch.Generator().manual_seed(n1 * 1000 + n2 * 10 + k)
    X2 = torch.randn(n2, d, generator=g, dtype=torch.float64) + 3.0
    X1 = X2 if noise is not None else torch.randn(n1, d, generator=g, dtype=torch.float64)
    V = torch.randn(n2, k, generator=g, dtype=torch.float64)
    kernel = KERNELS[name](d).double()
    with torch.no_grad():
        dense = kernel(X1, X2) @ V + (0.0 if noise is None else noise * V)
    scale = dense.abs().max().clamp_min(1.0)
    # Matérn-½ is not differentiable at r = 0: a rounding error δ ~ 1e-16 in r² there
    # moves k = e^{−r} by √δ in either implementation
    tight = 1e-7 if name == "matern12" else 1e-12
    out = kernel_product(kernel, X1, X2, V, noise=noise, block=block)
    torch.testing.assert_close(out, dense, rtol=0, atol=tight * float(scale))
    low = kernel_product(kernel, X1, X2, V, noise=noise, block=block,
                         block_dtype=torch.float32)
    assert low.dtype == torch.float64
    # float32 slabs: squared distances carry ~eps32·|x - c|² of rounding; kernels smooth
    # at r = 0 turn it into ~1e-7 relative error, Matérn-½ (exp(-r)) into its square
    # root at near-coincident points, ~sqrt(eps32) = 3.5e-4
    tol32 = 2e-3 if name.startswith("matern12") else 1e-5
    torch.testing.assert_close(low, dense, rtol=0, atol=tol32 * float(scale))
    # the per-block pure function, concatenated, is the product
    form, cols = kernel_form(kernel), prepare_columns(kernel_form(kernel), X2)
    parts = [block_matmul(form, X1[s:e], cols, V) for s, e in row_blocks(n1 if noise is None
                                                                          else n2, block)]
    torch.testing.assert_close(torch.cat(parts) + (0.0 if noise is None else noise * V),
                               dense, rtol=0, atol=tight * float(scale))


def test_kernel_product_1d_and_argument_errors():
    X, y, _ = _data(30)
    kernel = KERNELS["rbf-ard"](3).double()
    with torch.no_grad():
        dense = kernel(X) @ y + 0.1 * y
    torch.testing.assert_close(kernel_product(kernel, X, X, y, noise=0.1), dense)
    with pytest.raises(ValueError, match="V has 29 rows"):
        kernel_product(kernel, X, X, y[:29])
    with pytest.raises(ValueError, match="same rows"):
        kernel_product(kernel, X[:5], X, y, noise=0.1)


def test_kernel_matmul_keeps_its_gradients():
    """The differentiable product (now with the fast forward) still matches autograd."""
    X, _, _ = _data(25)
    kernel = KERNELS["matern32-ard"](3).double()
    V = torch.randn(25, 2, dtype=torch.float64, requires_grad=True)
    out = kernel_matmul(kernel, X, X, V, block=7)
    ref = kernel(X, X) @ V
    torch.testing.assert_close(out, ref)
    params = [p for p in kernel.parameters()] + [V]
    g1 = torch.autograd.grad(out.square().sum(), params)
    g2 = torch.autograd.grad(ref.square().sum(), params)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def test_chunked_does_not_import_the_kernel_classes():
    import ast
    import inspect

    import gpscale.kernels.chunked as chunked
    tree = ast.parse(inspect.getsource(chunked))
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not any(m and m.lstrip(".").startswith(("base", "stationary")) for m in imported)


def test_operator_products(device):
    X, y, Xs = _data(50, device=device)
    kernel = KERNELS["rbf-ard"](3).double().to(device)
    op = KernelOperator(kernel, X, 0.2, block=16)
    V = torch.randn(50, 3, dtype=torch.float64, device=device)
    with torch.no_grad():
        K = kernel(X)
        torch.testing.assert_close(op.matmul(V), K @ V + 0.2 * V)
        torch.testing.assert_close(op.cross_matmul(Xs, V), kernel(Xs, X) @ V)
        torch.testing.assert_close(op.cross(Xs[:4]), kernel(Xs[:4], X))
        torch.testing.assert_close(op.diag(), K.diagonal() + 0.2)
    assert op.passes == 1 and op.columns == 3


# -- the model ---------------------------------------------------------------------------
def test_cg_mean_equals_the_cholesky_mean(device):
    X, y, Xs = _data(400, device=device)
    ex = _exact(X, y)
    it = cg_model(ex, tol=1e-12, precond_rank=50, block_dtype="float64",
                                     variance_options={"num_samples": 8})
    assert it.solver.solve_info["converged"] and it.solver.solve_info["iterations"] < 400
    ref, out = ex.predict(Xs), it.predict(Xs)
    torch.testing.assert_close(out.mean, ref.mean, rtol=1e-8, atol=1e-8)
    # the stop rule: RMS mean error at the training inputs <= tol · RMS(y − m)
    coarse = cg_model(ex, tol=1e-3, precond_rank=20, variance="lanczos",
                                         block_dtype="float64", variance_options={"steps": 1})
    err = (coarse.predict(X).mean - ex.predict(X).mean).square().mean().sqrt()
    assert float(err) <= 1e-3 * float((y - 0.2).square().mean().sqrt())


def test_full_rank_lanczos_variances_equal_the_cholesky_variances(device):
    X, y, Xs = _data(300, device=device)
    ex = _exact(X, y)
    it = cg_model(ex, tol=1e-10, variance="lanczos", block_dtype="float64",
                                     variance_options={"block_size": 30, "steps": 10})
    assert it.solver.cache.R.shape == (300, 300)
    for noisy in (False, True):
        ref, out = ex.predict(Xs, include_noise=noisy), it.predict(Xs, include_noise=noisy)
        torch.testing.assert_close(out.var, ref.var, rtol=1e-7, atol=1e-9)
    # below full rank the Krylov projection only adds variance (an upper bound)
    low = cg_model(ex, tol=1e-10, variance="lanczos", block_dtype="float64",
                                      variance_options={"block_size": 8, "steps": 4})
    assert torch.all(low.predict(Xs).var >= ex.predict(Xs).var - 1e-10)


def test_pathwise_variances_are_unbiased(device):
    """E[(g(x*) − k*ᵀC⁻¹(g(X) + ε))²] = k** − k*ᵀC⁻¹k* for every draw: with S = 4000
    draws each point's estimate has relative standard error ≈ √(2/S) = 2.2 %."""
    X, y, Xs = _data(200, device=device)
    ex = _exact(X, y)
    it = cg_model(ex, tol=1e-10, variance="pathwise", seed=3,
                                     block_dtype="float64",
                                     variance_options={"num_samples": 4000,
                                                       "num_features": 64})
    ref, out = ex.predict(Xs).var, it.predict(Xs).var
    ratio = out / ref
    assert abs(float(ratio.mean()) - 1.0) < 0.01  # 60 points: standard error ≈ 0.3 %
    assert float((ratio - 1.0).abs().max()) < 0.12  # ≈ 5 standard errors


def test_default_pathwise_variances_are_calibrated(device):
    """With the default S = 64 draws the relative error per point is ≈ √(2/64) = 18 %."""
    X, y, Xs = _data(300, device=device)
    ex = _exact(X, y)
    it = cg_model(ex, tol=1e-8)
    ratio = it.predict(Xs).var / ex.predict(Xs).var
    assert 0.85 < float(ratio.median()) < 1.15
    assert float(ratio.min()) > 0.3 and float(ratio.max()) < 2.5
    noisy = it.predict(Xs, include_noise=True).var / ex.predict(Xs, include_noise=True).var
    assert float((noisy - 1).abs().max()) < float((ratio - 1).abs().max()) + 1e-12


def test_float32_slabs_keep_the_mean(device):
    """float32 tiles and preconditioner (relative error ~1e-7 per entry) with float64
    sums, at the default tol = 1e-3 (the smallest they are used for): the true residual
    stays within 1.5 tol and the mean's RMS error at the training inputs within the stop
    rule's bound tol · RMS(y − m), as with float64 tiles."""
    X, y, Xs = _data(400, device=device)
    ex = _exact(X, y)
    ref = ex.predict(X).mean
    r = y - 0.2
    bound = 1e-3 * float(r.square().mean().sqrt())
    iters = {}
    for dt in ("float32", "float64"):
        it = cg_model(ex, block_dtype=dt, variance="lanczos",
                                         variance_options={"steps": 1}, precond_rank=30)
        assert it.solver.solve_dtype(it) == dt
        true = (r - it.solver.operator(it, "float64").matmul(it.solver.alpha)).norm() / r.norm()
        assert float(true) < 1.5e-3
        assert float((it.predict(X).mean - ref).square().mean().sqrt()) < bound
        iters[dt] = it.solver.solve_info["iterations"]
    # float32 tiles and preconditioner cost a few more iterations (here +25 %, on
    # kin40k 0-2 %) while each pass costs ~0.6 of a float64 one
    assert iters["float32"] <= 1.3 * iters["float64"] + 2, iters


def test_warm_start_takes_fewer_iterations():
    X, y, _ = _data(250)
    ex = _exact(X, y)
    it = cg_model(ex, tol=1e-8, precond_rank=10, variance="lanczos",
                                     variance_options={"block_size": 4, "steps": 1})
    assert it.solver.solve_dtype(it) == "float64"  # tol below what float32 tiles reach
    cold_iters = it.solver.solve_info["iterations"]
    with torch.no_grad():  # a nearby θ, as between two hyperparameter steps
        it.kernel.outputscale = it.kernel.outputscale * 1.02
    warm = it.solve()["iterations"]
    cold = it.solve(warm=False)["iterations"]
    assert warm < cold and cold >= cold_iters - 2
    start = it.solver.alpha.clone()
    assert it.solve(x0=start)["iterations"] <= 2


def test_save_and_load_give_identical_predictions(tmp_path):
    X, y, Xs = _data(150)
    ex = _exact(X, y)
    for variance in ("pathwise", "lanczos"):
        it = cg_model(ex, tol=1e-6, variance=variance, precond_rank=20,
                                         variance_options={"num_samples": 8} if
                                         variance == "pathwise" else {"steps": 2})
        config, state = it.to_config(), it.saved_state()
        json.dumps(config)
        assert config["solver"] == "cg" and config["cg_iterations"] > 0
        assert config["cg_residual"] <= 1e-6 and config["bytes"]["variance_cache"] > 0
        path = tmp_path / f"{variance}.pt"
        torch.save({"config": config, "state": state, "kernel": it.kernel.config()}, path)
        saved = torch.load(path, weights_only=True)
        from gpscale.kernels import from_config
        # files written before the solvers were one class name "IterativeExactGP"
        assert model_class("IterativeExactGP") is model_class("ExactGP") is ExactGP
        twin = model_class("ExactGP").from_config(
            saved["config"], saved["state"], from_config(saved["kernel"]))
        twin.load_state_dict(saved["state"])
        for noisy in (False, True):
            a, b = it.predict(Xs, include_noise=noisy), twin.predict(Xs, include_noise=noisy)
            torch.testing.assert_close(b.mean, a.mean, rtol=0, atol=0)
            torch.testing.assert_close(b.var, a.var, rtol=0, atol=0)
        assert twin.solver.solve_info["iterations"] == config["cg_iterations"]  # not re-solved


def test_from_exact_carries_the_hyperparameters_and_objective():
    X, y, _ = _data(120)
    ex = _exact(X, y)
    ex.noise = torch.tensor(0.0123, dtype=torch.float64)
    it = cg_model(ex, solve=False)
    assert torch.equal(it.noise, ex.noise) and torch.equal(it.mean_constant, ex.mean_constant)
    for p, q in zip(it.kernel.parameters(), ex.kernel.parameters()):
        assert torch.equal(p, q)
    with torch.no_grad():
        torch.testing.assert_close(it.objective(), ex.nlml(), rtol=1e-10, atol=1e-10)
    # changed hyperparameters are re-solved on the next predict
    it.predict(X[:3])
    theta = it.solver.solved_theta.clone()
    with torch.no_grad():
        it.noise = torch.tensor(0.02, dtype=torch.float64)
    it.predict(X[:3])
    assert not torch.equal(theta, it.solver.solved_theta)


def test_a_noise_at_its_floor_moves_to_the_cg_solver():
    """Issue 48: a fit whose σ² ended at its floor is moved, not re-checked as a user's
    initial noise (which must be above the floor)."""
    X, y, _ = _data(80)
    ex = ExactGP(make_kernel("rbf", 3), X, y, noise=0.1, noise_floor=1e-4)
    with torch.no_grad():
        ex.raw_noise.fill_(-800.0)  # softplus underflows: σ² is the floor itself
    assert float(ex.noise) == 1e-4
    for floor in (None, 5e-5):
        it = ex.with_solver(ConjugateGradients(), noise_floor=floor)
        assert float(it.noise) == pytest.approx(1e-4, rel=1e-9)
        assert ExactGP.noise.floor_of(it) == (1e-4 if floor is None else floor)
    assert torch.equal(ex.with_solver("cholesky").raw_noise, ex.raw_noise)


def test_the_iterative_path_takes_a_sample_fit_at_its_noise_floor():
    """Issue 48's crash: nearly noise-free data, the sample's fit at its noise floor,
    ``refine=0``: the CG model is built from it."""
    from gpscale.methods.exact import fit_exact
    g = torch.Generator().manual_seed(0)
    X = torch.rand(700, 4, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1])
    y = (y - y.mean()) / y.std()
    with pytest.warns(Warning, match="floor"):
        model, _ = fit_exact(X, y, make_kernel("rbf-ard", 4), solver="cg", subsample=300,
                             refine=0, max_iter=60)
    assert model.solver.name == "cg" and model.solver.solve_info["converged"]
    assert model.solver.solve_dtype(model) == "float64"  # σ² too small for float32 tiles
    assert float(model.noise) >= ExactGP.noise.floor_of(model)


def test_bad_arguments_are_refused():
    X, y, _ = _data(20)
    kernel = make_kernel("rbf", 3)
    with pytest.raises(ValueError, match="tol"):
        ExactGP(kernel, X, y, solver=ConjugateGradients(tol=0.0))
    with pytest.raises(ValueError, match="block_dtype"):
        ExactGP(kernel, X, y, solver=ConjugateGradients(block_dtype="float16"))
    with pytest.raises(ValueError, match="variance"):
        ExactGP(kernel, X, y, solver=ConjugateGradients(variance="exact"))
    with pytest.raises(ValueError, match="max_iter"):
        ExactGP(kernel, X, y, solver=ConjugateGradients(max_iter=0))
    with pytest.raises(ValueError, match="spectral density"):
        ExactGP(Periodic(1.0, 1.0), X, y, solver=ConjugateGradients(variance="pathwise")).solve()
    # a kernel without a spectral density falls back to Lanczos variances
    assert ExactGP(Periodic(1.0, 1.0), X, y, solver="cg").solver.cache.kind == "lanczos"


def test_matern_pathwise_variance_follows_the_student_t_density():
    X, y, Xs = _data(150)
    ex = ExactGP(Scale(Matern(1.5, 1.0)), X, y, noise=0.01)
    it = cg_model(ex, tol=1e-10, block_dtype="float64",
                                     variance_options={"num_samples": 3000,
                                                       "num_features": 64})
    ratio = it.predict(Xs).var / ex.predict(Xs).var
    assert abs(float(ratio.mean()) - 1.0) < 0.02
    assert math.isfinite(float(ratio.max()))


# -- preconditioner pieces -----------------------------------------------------------------
def test_rp_cholesky_is_exact_at_full_rank_and_stops_at_its_tolerance(device):
    from gpscale.linalg.lowrank import rp_cholesky
    X, _, _ = _data(120, device=device)
    kernel = KERNELS["rbf-ard"](3).double().to(device)
    with torch.no_grad():
        K = kernel(X)
    L = rp_cholesky(kernel, X, 120, block=16, seed=1, rel_tol=1e-14)
    torch.testing.assert_close(L @ L.mT, K, rtol=0, atol=1e-7)
    again = rp_cholesky(kernel, X, 120, block=16, seed=1, rel_tol=1e-14)
    assert torch.equal(L, again)  # seeded
    errs = [float(K.trace() - (Lr * Lr).sum())
            for Lr in (rp_cholesky(kernel, X, r, block=8, seed=0) for r in (8, 24, 48))]
    assert errs[0] > errs[1] > errs[2] >= -1e-9
    short = rp_cholesky(kernel, X, 120, block=8, seed=0, abs_tol=errs[1])
    assert float(K.trace() - (short * short).sum()) <= errs[1] + 1e-9
    assert short.shape[1] < 120


def test_low_rank_inverse_equals_the_dense_inverse():
    from gpscale.linalg.lowrank import low_rank_inverse
    g = torch.Generator().manual_seed(0)
    L = torch.randn(200, 30, generator=g, dtype=torch.float64)
    R = torch.randn(200, 3, generator=g, dtype=torch.float64)
    s2 = torch.tensor(0.05, dtype=torch.float64)
    dense = torch.linalg.solve(L @ L.mT + s2 * torch.eye(200, dtype=torch.float64), R)
    torch.testing.assert_close(low_rank_inverse(L, s2)(R), dense, rtol=1e-9, atol=1e-9)
    scale = torch.rand(200, generator=g, dtype=torch.float64) + 0.5
    S = torch.diag(scale)
    P = torch.linalg.inv(S) @ (L @ L.mT + s2 * torch.eye(200, dtype=torch.float64)) \
        @ torch.linalg.inv(S)
    torch.testing.assert_close(low_rank_inverse(L, s2, scale=scale)(R),
                               torch.linalg.solve(P, R), rtol=1e-8, atol=1e-8)


def test_float32_tiles_keep_a_good_preconditioner_good():
    """Where σ² is small against K's top eigenvalues (here 1e-4 against about 3000) and
    the preconditioner is all but exact, CG with float32 product tiles converges in a
    few iterations. Its Woodbury apply in float32 took 44 here (and 42 instead of 5 on
    elevators): its rounding comes back times λ/σ²."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(3000, 2, generator=g, dtype=torch.float64) * 4
    y = torch.sin(3 * X[:, 0]) + torch.cos(2 * X[:, 1]) + 0.3 * torch.randn(
        3000, generator=g, dtype=torch.float64)
    kernel = Scale(RBF(torch.tensor([3.0, 4.0]), ard_dims=2))
    model = ExactGP(kernel, X, y, noise=1e-4,
                    solver=ConjugateGradients(tol=1e-3, block_dtype="float32"))
    info = model.solve()
    assert info["converged"] and info["precond_rank"] < 100
    assert info["iterations"] <= 8, info


@pytest.mark.parametrize("precond", ["rpchol", "pivchol", "none"])
def test_every_preconditioner_gives_the_cholesky_mean(precond):
    X, y, Xs = _data(200)
    ex = _exact(X, y)
    it = cg_model(ex, tol=1e-11, precond=precond, precond_rank=40,
                                     block_dtype="float64", variance="lanczos",
                                     variance_options={"block_size": 2, "steps": 1})
    torch.testing.assert_close(it.predict(Xs).mean, ex.predict(Xs).mean, rtol=1e-8, atol=1e-8)
    assert it.solver.solve_info["precond_rank"] == (0 if precond == "none" else 40)


def test_the_solve_reports_its_residuals_and_shows_a_progress_bar(capsys):
    X, y, _ = _data(200)
    it = cg_model(_exact(X, y), tol=1e-8, precond_rank=5,
                                     variance="lanczos", solve=False,
                                     variance_options={"block_size": 2, "steps": 1})
    info = it.solve(progress=True)
    res = info["residuals"]
    assert len(res) == info["iterations"] > 1
    assert res[-1] == pytest.approx(info["residual_max"]) and res[-1] <= 1e-8 < res[0]
    bar = capsys.readouterr().err
    assert f"CG on 200 rows: {info['iterations']}pass" in bar  # no total, no ETA
    assert f"/{it.solver.max_iter}" not in bar
    it.solve(warm=False)  # progress=False by default: nothing shown
    assert capsys.readouterr().err == ""


def test_the_preconditioners_cap_keeps_a_rank_floor_where_memory_allows(monkeypatch):
    from gpscale.models import exact_cg
    from gpscale.models.exact_cg import PRECOND_BYTES, PRECOND_MIN_RANK, precond_cap

    small = 20_000  # PRECOND_BYTES holds more than the floor: unchanged
    assert precond_cap(small) == PRECOND_BYTES // (8 * small) > PRECOND_MIN_RANK
    assert precond_cap(small, available=1) == PRECOND_BYTES // (8 * small)
    assert precond_cap(100) == 100  # at most n
    big = 198_000
    assert PRECOND_BYTES // (8 * big) == 1016
    assert precond_cap(big) == PRECOND_MIN_RANK  # memory not known: the floor
    assert precond_cap(big, available=64 * 2**30) == PRECOND_MIN_RANK
    half = 2 * big * 8 * 3000  # twice a rank-3000 factor
    assert precond_cap(big, available=half) == 3000
    assert precond_cap(big, available=2**20) == 1016  # never below PRECOND_BYTES' rank
    assert precond_cap(big, itemsize=4) == PRECOND_MIN_RANK  # float32: 2 033 by bytes
    # the model asks for it with the memory its operator has (here: this machine's)
    from gpscale.kernels import operator
    X, y, _ = _data(300)
    monkeypatch.setattr(exact_cg, "PRECOND_BYTES", 8 * 300 * 10)  # rank 10 by bytes
    monkeypatch.setattr(exact_cg, "PRECOND_MIN_RANK", 40)
    monkeypatch.setattr(operator, "available_memory", lambda: 2 * 8 * 300 * 25)
    it = cg_model(_exact(X, y), precond_tol=0.0, variance="lanczos",
                                     variance_options={"block_size": 2, "steps": 1})
    assert it.solver.solve_info["precond_rank"] == 25
    monkeypatch.setattr(operator, "available_memory", lambda: None)
    assert it.solve(warm=False)["precond_rank"] == 40


def test_the_pathwise_variance_error_stated_is_the_measured_one():
    """The error the summary and the file state (PathwiseVariance.error) against the
    Cholesky variances at the same θ (dense reference; benchmarks/results/cg-variance)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 2, generator=g, dtype=torch.float64)
    Xs = torch.randn(400, 2, generator=g, dtype=torch.float64) * 1.2
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(300, generator=g, dtype=torch.float64)
    ex = ExactGP(make_kernel("rbf-ard", 2), X, y, noise=0.05)
    ref = ex.predict(Xs).var
    for S in (32, 128):
        it = ex.with_solver(ConjugateGradients(tol=1e-8, variance="pathwise",
                                               variance_options={"num_samples": S}))
        rel = (it.predict(Xs).var / ref - 1).abs()
        stated = it.solver.cache.error()
        assert 0.5 * stated["median"] < float(rel.median()) < 1.5 * stated["median"]
        assert float(rel.quantile(0.99)) < 1.3 * stated["p99"]
        assert f"pathwise estimate from {S} draws" in it.title
        assert it.to_config()["variance_error"] == stated
