"""The exact GP's skill check (:mod:`gpscale.models.skill`): leave-one-out residuals
from one Cholesky factor against refitting without the row (dense, float64), a fit on
copies, heavy tails and an uninformative input warned as having no skill and shown by
``gpscale info``, a good fit not."""

import warnings

import numpy as np
import pytest
import torch

import gpscale
from gpscale import cli
from gpscale.kernels import make_kernel
from gpscale.models import ExactGP
from gpscale.models.copies import merge_copies
from gpscale.models.skill import fit_skill, loo_residuals
from gpscale.train import ConvergenceWarning


def _model(n=40, seed=0, copies=False):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64) * 3
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    if copies:  # every fourth row repeats the one before it, with its own y
        X[3::4] = X[2::4][: X[3::4].shape[0]]
    X, y, c = merge_copies(X, y) if copies else (X, y, None)
    m = ExactGP(make_kernel("rbf-ard", 2), X, y, noise=0.05, mean="constant", copies=c)
    with torch.no_grad():
        m.mean_constant.fill_(0.1)
        m.kernel.base.lengthscale = torch.tensor([0.7, 1.9], dtype=torch.float64)
    return m


def _refit_without(model, i):
    """The prediction of row i from the other rows, by a fresh solve (the reference)."""
    keep = torch.arange(model.n) != i
    C = model.covariance().detach()
    Ck = C[keep][:, keep]
    r = model.y[keep] - model.mean_constant.detach()
    k = C[i, keep]
    mean = model.mean_constant.detach() + k @ torch.linalg.solve(Ck, r)
    var = C[i, i] - k @ torch.linalg.solve(Ck, k)
    return mean, var


@pytest.mark.parametrize("copies", [False, True])
def test_loo_residuals_equal_refitting_without_each_row(copies):
    model = _model(copies=copies)
    C = model.covariance().detach()
    L = torch.linalg.cholesky(C)
    alpha = torch.cholesky_solve((model.y - model.mean_constant.detach())[:, None], L)[:, 0]
    resid, var = loo_residuals(L, alpha)
    for i in range(model.n):
        mean, v = _refit_without(model, i)
        torch.testing.assert_close(resid[i], model.y[i] - mean, rtol=1e-9, atol=1e-11)
        torch.testing.assert_close(var[i], v, rtol=1e-9, atol=1e-11)
    skill = fit_skill(model)
    spread = float((model.y - model.y.mean()).square().sum())
    assert skill["loo_r2"] == pytest.approx(1 - float(resid.square().sum()) / spread,
                                            rel=1e-9)
    assert skill["loo_rows"] == model.n and not skill["problem"]


def test_a_sample_of_rows_past_the_limit():
    model = _model(n=60)
    skill = fit_skill(model, rows=25)
    assert skill["loo_rows"] == 25 and skill["y_rows"] == 60


def test_an_interpolating_lengthscale_is_no_skill():
    model = _model()
    with torch.no_grad():
        model.kernel.base.lengthscale = torch.tensor([1e-5, 1.0], dtype=torch.float64)
    skill = fit_skill(model)
    assert skill["lengthscale_share"] < 1e-4
    assert "interpolates" in skill["problem"] and "noise floor" in skill["problem"]


def test_a_small_lengthscale_on_a_column_of_few_values_separates_groups_not_rows():
    model = _model()
    with torch.no_grad():  # column 0 becomes a 0/1 code: its groups, not rows, apart
        model.X[:, 0] = (model.X[:, 0] > 1.5).to(model.X)
        model.kernel.base.lengthscale = torch.tensor([1e-5, 1.0], dtype=torch.float64)
    skill = fit_skill(model)
    assert skill["lengthscale_share"] == pytest.approx(1.0 / float(model.X[:, 1].std()))
    assert "interpolates" not in skill["problem"]


def _heavy(tmp_path):
    """Issue 48's shape: copies, a near-constant and an integer-coded column, Cauchy
    noise."""
    rng = np.random.default_rng(1)
    n0 = 500
    X = np.c_[rng.uniform(0, 1, n0), 5 + 1e-9 * rng.standard_normal(n0),
              rng.integers(0, 5, n0), rng.uniform(0, 1, n0)]
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_cauchy(n0)
    idx = rng.integers(0, n0, 200)
    X, y = np.r_[X, X[idx]], np.r_[y, y[idx]]
    path = tmp_path / "heavy.csv"
    np.savetxt(path, np.c_[X, y], delimiter=",", header="a,const,code,b,y", comments="")
    return X, y, path


def test_heavy_tails_and_copies_warn_no_skill_and_info_shows_it(tmp_path, capsys):
    X, y, path = _heavy(tmp_path)
    with pytest.warns(ConvergenceWarning, match="no predictive skill.*heavy tails"):
        pred = gpscale.fit(X, y, method="exact")
    assert pred.result.skill["loo_r2"] < 0.05 and pred.result.skill["problem"]
    out = tmp_path / "m.pt"
    assert cli.main(["fit", "-q", "--data", str(path), "--target", "y", "--out",
                     str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "skill    leave-one-out R²" in text and "no predictive skill" in text


def test_a_good_fit_has_skill_and_no_warning():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 3, (150, 2))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(150)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        pred = gpscale.fit(X, y, method="exact")
    assert pred.result.skill["loo_r2"] > 0.9 and not pred.result.skill["problem"]
    assert "no predictive skill" not in pred.summary()
