"""Every registered method's model honours the GPModel contract (predict -> mean, var;
objective; to_config / from_config), and model files written by format version 1 (before
the methods moved into gpscale.methods) still load and predict what they did."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import CHEAP_OPTIONS as CHEAP

import gpscale
from gpscale.models import GPModel, MeanAndVariance, model_class

FIXTURES = Path(__file__).parent / "data" / "format_v1"


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, 2)) * [1.0, 100.0]
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n) + 50.0
    return X, y


def test_every_registered_method_has_cheap_options_here():
    assert set(CHEAP) == set(gpscale.METHODS), "add the new method to CHEAP"


@pytest.mark.parametrize("method", sorted(CHEAP))
def test_registered_methods_models_honour_the_contract(method):
    X, y = _data()
    pred = gpscale.fit(X, y, method=method, **CHEAP[method])
    model = pred.model
    assert isinstance(model, GPModel) and model_class(type(model).__name__) is type(model)
    Xs = torch.as_tensor(pred.scaler.transform_x(X[:9]))
    ys = torch.as_tensor(pred.scaler.transform_y(y))
    out = model.predict(Xs, include_noise=False)
    noisy = model.predict(Xs, include_noise=True)
    assert isinstance(out, MeanAndVariance) and out.mean.shape == out.var.shape == (9,)
    assert torch.all(out.var >= 0) and torch.all(noisy.var > out.var)
    torch.testing.assert_close(noisy.mean, out.mean)
    takes_data = type(model).__name__ in ("SVGP", "GriefIPosterior")
    data = (torch.as_tensor(pred.scaler.transform_x(X)), ys) if takes_data else None
    with torch.no_grad():
        f = model.objective(data)
    assert f.ndim == 0 and torch.isfinite(f)
    if not takes_data:
        with pytest.raises(ValueError, match="without data"):
            model.objective((Xs, ys[:9]))
    # rebuilt from its config and state, the model predicts the same
    config = model.to_config()
    json.dumps(config)  # plain values only
    kernel = getattr(model, "kernel", None)
    kernel = gpscale.kernels.from_config(kernel.config()) if kernel is not None else None
    state = model.saved_state()
    twin = type(model).from_config(config, state, kernel)
    twin.load_state_dict(state)
    again = twin.predict(Xs, include_noise=True)
    torch.testing.assert_close(again.mean, noisy.mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(again.var, noisy.var, rtol=1e-12, atol=1e-12)


def test_grief_i_objective_matches_the_dense_likelihood():
    """The GRIEF-I posterior's objective (eq. 18 from the statistics it holds) against
    the dense Gaussian NLML of y under s₀ Φ diag(w) Φᵀ + σ²I (eq. 16), averaged over
    the draws."""
    X, y = _data(n=30)
    pred = gpscale.fit(X, y, method="grief-i", **CHEAP["grief-i"])
    post = pred.model
    Xs = torch.as_tensor(pred.scaler.transform_x(X))
    ys = torch.as_tensor(pred.scaler.transform_y(y))
    phi = post.features(Xs) * post.scale.sqrt()
    dense = []
    for w, s2 in zip(post.w, post.noise):
        C = phi @ torch.diag(w) @ phi.mT + s2 * torch.eye(len(ys), dtype=torch.float64)
        dist = torch.distributions.MultivariateNormal(torch.zeros_like(ys), C)
        dense.append(-dist.log_prob(ys))
    torch.testing.assert_close(post.objective(), torch.stack(dense).mean(),
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.pt")))
def test_format_version_1_files_still_load(name):
    """Files written by c302604 (format version 1, before gpscale.methods and the model
    contract) load and predict what they predicted then."""
    expected = json.loads((FIXTURES / "predictions.json").read_text())
    pred = gpscale.load(FIXTURES / f"{name}.pt")
    mean, std = pred.predict(np.asarray(expected["X_test"]), return_std=True)
    np.testing.assert_allclose(mean, expected["predictions"][name]["mean"], rtol=1e-10)
    np.testing.assert_allclose(std, expected["predictions"][name]["std"], rtol=1e-10)


@pytest.mark.parametrize("method,options", [
    ("rff", {"max_iter": 2, "num_features": 16}),
    ("grief-ii", {"max_iter": 2, "num_features": 20}),
    ("grief-i", CHEAP["grief-i"]), ("minimax", CHEAP["minimax"])])
def test_saved_feature_models_hold_statistics_not_rows(method, options, tmp_path):
    """A feature-space model's file keeps (ΦᵀΦ, Φᵀy, yᵀy, n) or its draws, not the rows:
    the same model fitted on 60 and on 200 rows writes files of the same size, and the
    loaded model predicts what the fitted one did."""
    sizes = {}
    for n in (60, 200):
        X, y = _data(n=n)
        pred = gpscale.fit(X, y, method=method, **options)
        path = pred.save(tmp_path / f"{n}.pt")
        sizes[n] = path.stat().st_size
        saved = torch.load(path, weights_only=True)
        assert not {"X", "y"} & set(saved["state_dict"]), sorted(saved["state_dict"])
        back = gpscale.load(path)
        assert back.model.n == n
        np.testing.assert_allclose(back.predict(X[:20], return_std=True),
                                   pred.predict(X[:20], return_std=True), rtol=1e-10)
    assert abs(sizes[200] - sizes[60]) < 200, sizes
