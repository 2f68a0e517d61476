"""Repeated inputs merged exactly (gpscale.models.copies): the merged exact GP, by
Cholesky and by CG, has the NLML, gradients and predictions of the GP on every row."""

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as hst
from refine_checks import assert_unbiased_gradient, cg_model

import gpscale
from gpscale.kernels import RBF, Scale, from_config
from gpscale.methods.exact import fit_exact
from gpscale.models import ExactGP, model_class
from gpscale.models.copies import Copies, merge_copies, rows_variance


def _repeated(distinct=40, rows=150, d=2, seed=0, device="cpu"):
    """``rows`` rows drawn with replacement from ``distinct`` inputs (some inputs many
    times, some once), each row with its own noise."""
    g = torch.Generator().manual_seed(seed)
    base = torch.rand(distinct, d, generator=g, dtype=torch.float64) * 4.0
    weights = torch.rand(distinct, generator=g, dtype=torch.float64) ** 3
    pick = torch.multinomial(weights, rows, replacement=True, generator=g)
    X = base[pick]
    y = torch.sin(X.sum(1)) + 0.2 * torch.randn(rows, generator=g, dtype=torch.float64)
    Xs = torch.rand(30, d, generator=g, dtype=torch.float64) * 4.0
    return X.to(device), y.to(device), Xs.to(device)


def _kernel(d=2):
    return Scale(RBF(torch.linspace(0.7, 1.3, d), ard_dims=d), outputscale=1.4)


def _pair(X, y, mean="constant", noise=0.07):
    """The exact GP on every row and the one on the merged rows, same θ."""
    Xm, ym, copies = merge_copies(X, y)
    full = ExactGP(_kernel(X.shape[1]), X, y, noise=noise, mean=mean, device=X.device)
    merged = ExactGP(_kernel(X.shape[1]), Xm, ym, noise=noise, mean=mean, device=X.device,
                     copies=copies)
    with torch.no_grad():
        for m in (full, merged):
            m.mean_constant.fill_(0.3 if mean == "constant" else 0.0)
    return full, merged


def _grads(model):
    value = model.nlml()
    params = [p for p in model.parameters() if p.requires_grad]
    return value.detach(), torch.cat([g.reshape(-1) for g in torch.autograd.grad(value,
                                                                                 params)])


@settings(max_examples=25, deadline=None)
@given(distinct=hst.integers(1, 12), rows=hst.integers(2, 40), d=hst.integers(1, 3),
       seed=hst.integers(0, 10**6))
def test_merge_keeps_means_counts_and_spreads(distinct, rows, d, seed):
    X, y, _ = _repeated(distinct, rows, d, seed)
    Xm, ym, copies = merge_copies(X, y)
    keys = {tuple(x.tolist()) for x in X}
    if len(keys) == rows:
        assert copies is None and Xm is X and ym is y
        return
    assert Xm.shape[0] == len(keys) and copies.rows == rows
    assert copies.extra == rows - len(keys)
    for i, x in enumerate(Xm):
        at = (X == x).all(1)
        assert int(copies.counts[i]) == int(at.sum())
        torch.testing.assert_close(ym[i], y[at].mean(), rtol=1e-13, atol=1e-14)
        torch.testing.assert_close(copies.spread[i], (y[at] - y[at].mean()).square().sum(),
                                   rtol=1e-10, atol=1e-13)
    assert rows_variance(ym, copies) == pytest.approx(float(y.var()), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_merged_exact_gp_equals_the_gp_on_every_row(device, mean):
    """NLML, its gradient in every parameter, and predictions (with and without noise)
    of the merged model equal the model on all rows to rounding."""
    X, y, Xs = _repeated(device=device)
    full, merged = _pair(X, y, mean)
    assert merged.n < full.n and merged.observations == full.n
    v_full, g_full = _grads(full)
    v_merged, g_merged = _grads(merged)
    torch.testing.assert_close(v_merged, v_full, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(g_merged, g_full, rtol=1e-10, atol=1e-10)
    for noisy in (False, True):
        a, b = full.predict(Xs, include_noise=noisy), merged.predict(Xs, include_noise=noisy)
        torch.testing.assert_close(b.mean, a.mean, rtol=1e-10, atol=1e-11)
        torch.testing.assert_close(b.var, a.var, rtol=1e-9, atol=1e-11)


def test_merged_cg_posterior_equals_the_cholesky_one(device):
    """The iterative model on merged rows (C = K + σ²diag(1/c), the scaled
    preconditioner) gives the posterior of the exact GP on every row; its dense
    objective is the all-rows NLML; full-rank Lanczos variances are exact."""
    X, y, Xs = _repeated(distinct=80, rows=300, device=device)
    full, merged = _pair(X, y)
    for precond in ("rpchol", "pivchol"):
        it = cg_model(merged, tol=1e-11, precond=precond, precond_rank=15,
                                         block_dtype="float64", variance="lanczos",
                                         variance_options={"block_size": 20, "steps": 10})
        assert it.copies is not None and it.solver.solve_info["converged"]
        for noisy in (False, True):
            a, b = full.predict(Xs, include_noise=noisy), it.predict(Xs, include_noise=noisy)
            torch.testing.assert_close(b.mean, a.mean, rtol=1e-8, atol=1e-9)
            torch.testing.assert_close(b.var, a.var, rtol=1e-7, atol=1e-9)
        torch.testing.assert_close(it.objective().detach(), full.nlml().detach(),
                                   rtol=1e-11, atol=1e-9)
    # the preconditioner helps: fewer iterations than without one
    bare = cg_model(merged, tol=1e-11, precond="none",
                                       block_dtype="float64", variance="lanczos",
                                       variance_options={"steps": 1})
    assert it.solver.solve_info["iterations"] < bare.solver.solve_info["iterations"]


def test_merged_pathwise_variances_are_unbiased(device):
    """Pathwise draws with ε ~ N(0, σ² diag(1/c)) estimate the all-rows variance: four
    caches of 4000 draws (the points of one cache share its draws, so their mean ratio
    scatters by about one percent; measured on 8 seeds: 0.988-1.015, as without copies)."""
    X, y, Xs = _repeated(distinct=60, rows=200, device=device)
    full, merged = _pair(X, y)
    ratios = torch.stack([
        cg_model(merged, tol=1e-10, variance="pathwise", seed=seed,
                                    block_dtype="float64",
                                    variance_options={"num_samples": 4000,
                                                      "num_features": 64}).predict(Xs).var
        for seed in range(4)]) / full.predict(Xs).var
    assert abs(float(ratios.mean()) - 1.0) < 0.01
    assert float((ratios - 1.0).abs().max()) < 0.12


def test_merged_stochastic_gradient_is_unbiased(device):
    """The refinement's gradient on merged rows (noise weighted by 1/c, the copies'
    own σ² term, probes from the scaled preconditioner) estimates the all-rows NLML
    gradient: within four standard errors; the constant mean's is exact."""
    X, y, _ = _repeated(distinct=120, rows=400, d=3, device=device)
    full, merged = _pair(X, y, noise=0.05)
    _, want = _grads(full)
    model = cg_model(merged, solve=False, tol=1e-10, block_dtype="float64",
                                        precond_rank=20)
    assert_unbiased_gradient(model, want)


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_fit_exact_merges_copies_and_matches_every_row(solver):
    """fit_exact on rows with repeated inputs fits the merged model; its objective is
    the all-rows NLML at the fitted θ, and it saves and loads with its copies."""
    X, y, Xs = _repeated(distinct=150, rows=500, d=2, seed=4)
    opts = {"solver": solver} if solver == "cholesky" else \
        {"solver": "cg", "subsample": 100, "refine": 3, "cg_tol": 1e-6}
    model, result = fit_exact(X, y, Scale(RBF(torch.ones(2), ard_dims=2)), **opts)
    assert model.copies is not None and model.observations == 500 and model.n < 500
    check = ExactGP(model.kernel, X, y, noise=float(model.noise.detach()))
    if solver == "cholesky":
        torch.testing.assert_close(torch.tensor(result.objective, dtype=torch.float64),
                                   check.nlml().detach(), rtol=1e-9, atol=1e-7)
    ref = check.predict(Xs)
    out = model.predict(Xs)
    torch.testing.assert_close(out.mean, ref.mean, rtol=1e-4, atol=2e-4)
    config, state = model.to_config(), model.saved_state()
    json.dumps(config)
    twin = model_class(type(model).__name__).from_config(config, state,
                                                          from_config(model.kernel.config()))
    twin.load_state_dict(state)
    assert twin.copies is not None and twin.observations == 500
    torch.testing.assert_close(twin.predict(Xs).mean, out.mean, rtol=0, atol=0)


def test_the_api_fits_duplicated_rows_as_every_row(tmp_path):
    """gpscale.fit on a table whose rows repeat: the merged fit, saved and loaded, and
    the same fit on the distinct rows weighted by hand agree."""
    X, y, Xs = _repeated(distinct=60, rows=240, d=2, seed=7)
    pred = gpscale.fit(X.numpy(), y.numpy(), method="exact", seed=0)
    assert pred.model.observations == 240
    path = tmp_path / "m.gpscale"
    pred.save(path)
    back = gpscale.load(path)
    np.testing.assert_allclose(back.predict(Xs.numpy()), pred.predict(Xs.numpy()), rtol=0,
                               atol=0)


def test_copies_are_checked():
    X, y, _ = _repeated()
    Xm, ym, copies = merge_copies(X, y)
    with pytest.raises(ValueError, match="counts"):
        ExactGP(_kernel(), Xm, ym, copies=Copies(copies.counts[:-1], copies.spread[:-1]))
    with pytest.raises(ValueError, match=">= 1"):
        ExactGP(_kernel(), Xm, ym, copies=Copies(copies.counts * 0, copies.spread))


def test_auto_counts_distinct_inputs():
    """auto's exact-GP estimates count the distinct inputs of arrays in memory: 30 000
    rows at 600 inputs are a small exact GP, the same rows all distinct are not."""
    g = np.random.default_rng(0)
    base = g.random((600, 3))
    X = base[g.integers(0, 600, 30_000)]
    y = np.sin(X.sum(1)) + 0.1 * g.standard_normal(30_000)
    choice = gpscale.api.choose(X, y)
    assert choice.method == "exact" and "600 distinct inputs" in choice.reason
    spread = X + 1e-3 * g.random(X.shape)
    assert "distinct" not in gpscale.api.choose(spread, y).reason
    assert gpscale.api.choose(spread, y).reason != choice.reason


def test_the_command_line_fits_repeated_rows_on_the_iterative_path(tmp_path):
    """gpscale fit on a CSV whose rows repeat inputs, by CG: the model holds the distinct
    inputs, `gpscale info` says so, and predictions from the file match the API's."""
    import subprocess
    import sys

    X, y, Xs = _repeated(distinct=120, rows=480, d=2, seed=9)
    (tmp_path / "t.csv").write_text("a,b,y\n" + "".join(
        f"{a!r},{b!r},{v!r}\n" for (a, b), v in zip(X.tolist(), y.tolist())))
    (tmp_path / "new.csv").write_text("a,b\n" + "".join(f"{a!r},{b!r}\n"
                                                        for a, b in Xs.tolist()))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "gpscale.cli", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)

    fit = run("fit", "--data", "t.csv", "--target", "y", "--method", "exact", "--option",
              "solver=cg", "--option", "subsample=60", "--option", "refine=2", "--out", "m.pt")
    assert fit.returncode == 0, fit.stderr
    found = json.loads(run("info", "m.pt", "--json").stdout)
    assert found["model"] == "ExactGP" and found["solver"] is not None and found["n"] == 480
    assert found["distinct_inputs"] == len({tuple(x) for x in X.tolist()}) < 480
    assert "distinct inputs (copies merged" in run("info", "m.pt").stdout
    pred = run("predict", "--model", "m.pt", "--data", "new.csv", "--out", "p.csv")
    assert pred.returncode == 0, pred.stderr
    lines = (tmp_path / "p.csv").read_text().splitlines()[1:]
    mine = gpscale.load(tmp_path / "m.pt").predict(Xs.numpy())
    np.testing.assert_allclose([float(r.split(",")[0]) for r in lines], mine, rtol=1e-12,
                               atol=1e-12)
