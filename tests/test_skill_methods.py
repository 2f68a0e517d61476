"""Issue 48: the no-skill check of every method's fit, not only the exact GP's
(:func:`gpscale.models.skill.sample_skill`, run by
:func:`gpscale.methods.skill_check.check_skill`): leave-one-out of an exact GP at the
fit's hyperparameters on a sample of its rows, against a dense refit without each row;
sgpr and rff warn on a target with no signal, not on a good fit; the files' path draws
its sample in a pass."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from parquet_data import write_parquet

import gpscale
from gpscale import cli
from gpscale.features import RandomFourierFeatures
from gpscale.kernels import make_kernel
from gpscale.models import SGPR, FeatureGP
from gpscale.models.skill import sample_skill
from gpscale.quality import DataQualityWarning
from gpscale.train import ConvergenceWarning


def _xy(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64) * 3
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def _dense_loo_r2(C, y, mean=0.0):
    """LOO R² by solving without each row in turn (the reference)."""
    resid = []
    for i in range(len(y)):
        keep = torch.arange(len(y)) != i
        k = C[i, keep]
        mu = mean + k @ torch.linalg.solve(C[keep][:, keep], y[keep] - mean)
        resid.append(y[i] - mu)
    resid = torch.stack(resid)
    return 1 - float(resid.square().sum()) / float((y - y.mean()).square().sum())


def test_a_feature_models_check_is_its_own_covariance_left_out_row_by_row():
    X, y = _xy()
    f = RandomFourierFeatures(2, 50, lengthscale=[0.8, 2.0], seed=1)
    model = FeatureGP(f, X, y, noise=0.05)
    with torch.no_grad():
        model.weight = torch.tensor([1.7], dtype=torch.float64)
        phi = model.features(X)
    skill = sample_skill(model, X, y)
    C = 1.7 * phi @ phi.mT + 0.05 * torch.eye(len(y), dtype=torch.float64)
    assert skill["loo_r2"] == pytest.approx(_dense_loo_r2(C, y), rel=1e-9)
    assert skill["loo_rows"] == 40 and skill["of"].startswith("an exact GP")
    share = float((model.features.lengthscale.detach() / X.std(0)).min())
    assert skill["lengthscale_share"] == pytest.approx(share) and not skill["problem"]


def test_a_sparse_models_check_uses_its_kernel_and_a_sample():
    X, y = _xy(60)
    model = SGPR(make_kernel("rbf-ard", 2), X, y, Z=X[:7].clone(), noise=0.02)
    with torch.no_grad():
        C = model.kernel(X) + 0.02 * torch.eye(60, dtype=torch.float64)
    skill = sample_skill(model, X, y)
    assert skill["loo_r2"] == pytest.approx(_dense_loo_r2(C, y), rel=1e-9)
    part = sample_skill(model, X, y, rows=25)
    assert part["loo_rows"] == 25 and part["y_rows"] == 25


def test_a_model_with_no_kernel_or_one_noise_is_left_unchecked():
    X, y = _xy()
    module = torch.nn.Module()
    assert sample_skill(module, X, y) == {}
    module.noise = torch.ones(3, dtype=torch.float64)  # a posterior's noise samples
    assert sample_skill(module, X, y) == {}


def _data(signal, n=300, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n) if signal \
        else rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("method", ["sgpr", "rff"])
def test_a_target_without_signal_warns_and_a_good_fit_does_not(method):
    X, y = _data(signal=False)
    with pytest.warns(ConvergenceWarning, match="no predictive skill.*Drop duplicated rows"):
        pred = gpscale.fit(X, y, method=method, kernel="rbf-ard")
    skill = pred.result.skill
    assert skill["loo_r2"] < 0.05 and skill["loo_rows"] == 300
    assert "noise floor" not in skill["problem"]  # an exact-only option
    assert "no predictive skill" in pred.summary()
    X, y = _data(signal=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", DataQualityWarning)
        pred = gpscale.fit(X, y, method=method, kernel="rbf-ard")
    assert pred.result.skill["loo_r2"] > 0.9 and not pred.result.skill["problem"]


def test_streamed_rows_are_sampled_and_info_shows_the_check(tmp_path, capsys):
    X, y = _data(signal=False, n=500)
    folder = write_parquet(tmp_path / "p", X, y, parts=3, row_group=60)
    out = tmp_path / "m.pt"
    assert cli.main(["fit", "-q", "--data", str(folder), "--target", "y", "--method",
                     "rff", "--out", str(out)]) == 0
    assert "no predictive skill" in capsys.readouterr().err
    assert cli.main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "skill    leave-one-out R²" in text and "no predictive skill" in text
    assert gpscale.load(out).result.skill["loo_rows"] == 500
