"""Fuzz: every registered method on columns shaped like real data — constant,
near-constant, duplicated rows, integer codes, heavy tails (Student-t, Cauchy) and large
offsets (1e6 + small) — must give a sane model (held-out RMSE below the std of y, 95%
intervals covering 80-100% of held-out rows drawn from the same process) or say why
with a gpscale warning. Small and fast: a few examples per method, n <= 150."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpscale
from gpscale.linalg.cholesky import NumericalWarning
from gpscale.methods import METHODS
from gpscale.train import ConvergenceWarning, DataQualityWarning, SizeWarning
from gpscale.train.minibatch import FewStepsWarning

#: the warnings by which gpscale says a fit may not be trusted
GPSCALE_WARNINGS = (ConvergenceWarning, DataQualityWarning, SizeWarning, NumericalWarning,
                    FewStepsWarning)

#: options where a method's defaults take seconds on 150 rows (the sizes, iterations and
#: epochs meant for 10^4-10^6 rows); the other methods run at their defaults
SMALL = {
    "rff": {"num_features": 128, "max_iter": 60},
    "admm-hocv": {"max_iter": 30}, "admm-kfold": {"max_iter": 15},
    "admm-consensus": {"max_iter": 15},
    "cholqr-vfe": {"m": 20, "max_epochs": 3}, "cholqr-dtc": {"m": 20, "max_epochs": 3},
    "minimax": {"epochs": 30, "num_features": 64}, "scgd": {"epochs": 30, "num_features": 64},
    "bsgd": {"epochs": 30, "num_features": 64},
    "svgp": {"epochs": 60, "num_inducing": 20},
    "grief-i": {"num_features": 40, "n_iter": 300, "burn": 100, "thin": 10},
}

#: nuisance columns: what real tables carry besides the informative one
NUISANCE = ("constant", "near_constant", "integer", "student_t", "cauchy", "shifted")
#: how the informative column is written
SIGNAL = ("plain", "integer", "shifted")


def _column(kind, rng, n):
    if kind == "constant":
        return np.full(n, 4.0)
    if kind == "near_constant":
        col = np.zeros(n)
        col[rng.random(n) < 0.01] = 1.0
        return col
    if kind == "integer":
        return rng.integers(0, 5, n).astype(float)
    if kind == "student_t":
        return rng.standard_t(2, n)
    if kind == "cauchy":
        return rng.standard_cauchy(n)
    return 1e6 + rng.uniform(0, 1, n)  # shifted


def _draw(seed, signal, nuisance, n, copies):
    """Training rows (``copies`` times each) and held-out rows of one process:
    y = sin(2 x) + x/2 + 0.1 noise, x the informative column written as ``signal``."""
    rng = np.random.default_rng(seed)

    def rows(m):
        x = rng.uniform(-2, 2, m)
        if signal == "integer":
            x = np.round(x * 2) / 2  # codes on a half-unit grid
        y = np.sin(2 * x) + 0.5 * x + 0.1 * rng.standard_normal(m)
        shown = 1e6 + x if signal == "shifted" else x
        X = np.column_stack([shown] + [_column(k, rng, m) for k in nuisance])
        return X, y

    X, y = rows(n)
    Xt, yt = rows(200)
    return np.repeat(X, copies, axis=0), np.repeat(y, copies), Xt, yt


def _sane(pred, Xt, yt):
    mean, std = pred.predict(Xt, return_std=True)
    rmse = float(np.sqrt(np.mean((mean - yt) ** 2)))
    cover = float(np.mean(np.abs(mean - yt) <= 1.96 * std))
    return rmse < yt.std() and 0.8 <= cover <= 1.0, f"rmse {rmse:.3f} vs std " \
        f"{yt.std():.3f}, 95% coverage {cover:.2f}"


shapes = st.tuples(st.integers(0, 2**16), st.sampled_from(SIGNAL),
                   st.lists(st.sampled_from(NUISANCE), min_size=0, max_size=3, unique=True),
                   st.integers(60, 150), st.sampled_from([1, 1, 3]))


@pytest.mark.parametrize("method", sorted(METHODS))
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes)
def test_real_shapes_give_a_sane_model_or_a_warning(method, shape):
    seed, signal, nuisance, n, copies = shape
    X, y, Xt, yt = _draw(seed, signal, nuisance, n, copies)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pred = gpscale.fit(X, y, method=method, **SMALL.get(method, {}))
        ok, said = _sane(pred, Xt, yt)
    warned = [w for w in got if issubclass(w.category, GPSCALE_WARNINGS)]
    assert ok or warned, f"{method} on {signal} x with {nuisance}, n={n} x{copies}: {said}"


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes)
def test_the_iterative_exact_path_gives_a_sane_model_or_a_warning(shape):
    """The exact GP forced onto its CG solver at small n (θ from a sample, the posterior
    on every row by CG): the same promise, and the skill check ran."""
    seed, signal, nuisance, n, copies = shape
    X, y, Xt, yt = _draw(seed, signal, nuisance, n, copies)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pred = gpscale.fit(X, y, method="exact", solver="cg", subsample=max(20, n // 2))
        ok, said = _sane(pred, Xt, yt)
    warned = [w for w in got if issubclass(w.category, GPSCALE_WARNINGS)]
    assert ok or warned, f"exact CG on {signal} x with {nuisance}, n={n} x{copies}: {said}"
    assert pred.result.skill["loo_rows"] >= 2


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), n=st.integers(60, 150), copies=st.sampled_from([1, 3]),
       solver=st.sampled_from(["cholesky", "cg"]))
def test_a_target_the_inputs_do_not_predict_is_warned_as_no_skill(seed, n, copies, solver):
    """y independent of X (heavy-tailed): whatever θ the exact fit ends at, its
    leave-one-out predictions explain nothing, and it says so."""
    rng = np.random.default_rng(seed)
    X = np.repeat(rng.uniform(-2, 2, (n, 2)), copies, axis=0)
    y = rng.standard_t(2, n * copies)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        pred = gpscale.fit(X, y, method="exact", solver=solver, subsample=max(20, n // 2))
    said = [str(w.message) for w in got if issubclass(w.category, ConvergenceWarning)]
    assert pred.result.skill["loo_r2"] <= 0.05 + 1e-12 or not pred.result.skill["problem"]
    assert any("no predictive skill" in s for s in said), (pred.result.skill, said)
