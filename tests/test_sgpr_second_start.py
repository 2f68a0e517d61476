"""sgpr's second start (an exact fit on a sample, tried when the first search ends with
high noise) is an alternative: where it gives no finite bound, the first search stands
instead of the whole fit failing (it did on breastcancer and solar at the defaults)."""

from __future__ import annotations

import numpy as np
import torch

import gpscale
from gpscale.kernels import make_kernel
from gpscale.methods import sgpr as sgpr_method
from gpscale.train.lbfgs import NoFiniteObjective


def test_an_unusable_second_start_keeps_the_first_search(monkeypatch):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 2, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(60, generator=g, dtype=torch.float64)
    real, calls = sgpr_method._fit, []

    def fit(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise NoFiniteObjective("no evaluation of the second search was finite")
        return real(*args, **kwargs)

    monkeypatch.setattr(sgpr_method, "_fit", fit)
    monkeypatch.setattr(sgpr_method, "noise_above", lambda *a: True)  # ask for it
    options = sgpr_method.SGPROptions(m=8, max_iter=5)
    model, result = sgpr_method._fit_held(X, y, make_kernel("rbf-ard", 2), options, None)
    assert len(calls) == 2
    first = real(X, y, make_kernel("rbf-ard", 2), 8, options.noise, None, options,
                 sgpr_method.sqrt_d_start, None)
    assert result.objective == first[1].objective
    for a, b in zip(model.state_dict().values(), first[0].state_dict().values()):
        assert torch.equal(a, b)


def test_sgpr_fits_breastcancer_and_solar_at_its_defaults(data_dir):
    for name in ("breastcancer", "solar"):
        z = np.load(data_dir / "uci" / f"{name}.npz")
        train = ~z["test_mask"][:, 0]
        pred = gpscale.fit(z["X"][train], z["y"][train], method="sgpr", kernel="rbf-ard",
                           passes=False, seed=0)
        assert np.isfinite(pred.predict(z["X"][~train])).all()
