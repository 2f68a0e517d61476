"""Defaults at small n (issue 22, case 7): GPCV-ADMM no longer stops "converged" after
one iteration with θ at its start; the minibatch methods say when their settings make
too few optimiser steps."""

import warnings

import numpy as np
import pytest

import gpscale
from gpscale.train.admm import make_options
from gpscale.train.minibatch import MIN_STEPS, FewStepsWarning, warn_few_steps


def _sine(n, seed, d=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_admm_hocv_does_not_stop_at_its_start():
    """With the paper's ρ = 5, ε = 1e-2 and a one-iteration stop test, this run stopped
    'converged' after iteration 1 (lengthscales 0.999, 0.998; test RMSE 0.33 of std)."""
    X, y = _sine(300, 0)
    Xt, yt = _sine(400, 1)
    pred = gpscale.fit(X, y, method="admm-hocv", seed=1, max_iter=30)
    iters = len(pred.result.history) - 1
    assert iters >= 10
    ls = pred.result.theta["kernel.base.lengthscale"]
    assert abs(ls[1] - 1.0) > 0.1  # the irrelevant input's lengthscale left its start
    mean, std = pred.predict(Xt, return_std=True)
    assert np.sqrt(np.mean((mean - yt) ** 2)) / yt.std() < 0.22
    assert np.median(std) < 0.2  # the noise is 0.1 (was 0.30 with the one-step stop)


def test_admm_consensus_rounds_are_not_stopped_in_the_first_window():
    X, y = _sine(120, 0)
    pred = gpscale.fit(X, y, method="admm-consensus", seed=1, max_iter=12)
    assert len(pred.result.history) >= 10  # stopped after 1 round before
    assert pred.result.history[-1]["dtheta_window"] >= 0


def test_admm_window_one_is_the_papers_test_and_window_is_checked():
    assert make_options(window=1).window == 1
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        make_options(window=0)


def test_few_steps_warning_says_what_to_do():
    with pytest.warns(FewStepsWarning, match=r"n=300 .* only 100 optimiser steps.*"
                                             r"method='exact'.*epochs=100"):
        warn_few_steps("scgd", 300, 32, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_few_steps("scgd", 3200, 32, 10)  # 1000 steps: no warning
        warn_few_steps("scgd", 300, 32, 100)
    assert MIN_STEPS == 1000


@pytest.mark.parametrize("method", ["minimax", "scgd", "bsgd"])
def test_minibatch_methods_warn_at_small_n(method):
    X, y = _sine(100, 0)
    with pytest.warns(FewStepsWarning, match=f"{method}: n=100"):
        gpscale.fit(X, y, method=method, epochs=1, num_features=16)
