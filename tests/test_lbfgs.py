import math

import pytest
import torch
from torch import nn

from gpscale.linalg import CholeskyError
from gpscale.train.lbfgs import fit_lbfgs, guarded


def test_guarded_turns_failures_into_a_large_constant():
    x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    ok = guarded(lambda: (x - 2) ** 2, 5.0, torch.float64)
    assert ok.requires_grad and float(ok.detach()) == 1.0

    def not_pd():
        raise CholeskyError("not positive definite")

    bad = guarded(not_pd, 5.0, torch.float64)
    assert not bad.requires_grad and float(bad) == 5.0 * 10 + 1e10
    nan = guarded(lambda: x * math.nan, math.inf, torch.float64)
    assert not nan.requires_grad and float(nan) == 1e30


class _Wall(nn.Module):
    """(x − 3)², but the 'covariance' cannot be factorised beyond x = 1."""

    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(torch.tensor(0.0, dtype=torch.float64))

    def nlml(self):
        if float(self.x.detach()) > 1.0:
            raise CholeskyError("not positive definite")
        return (self.x - 3.0) ** 2


def test_fit_lbfgs_backs_off_where_the_objective_fails():
    model = _Wall()
    res = fit_lbfgs(model, max_iter=50)
    x = float(model.x.detach())
    assert 0.5 < x <= 1.0  # it moved towards the wall and never kept a failed point
    assert res.objective == pytest.approx((x - 3.0) ** 2)


class _Kink(nn.Module):
    """1000·|x| + x² from x = 1: the minimum sits on a kink, where the strong-Wolfe line
    search keeps bracketing and spends many evaluations per iteration."""

    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(torch.tensor([1.0, -1.0], dtype=torch.float64))

    def nlml(self):
        return 1000 * self.x.abs().sum() + (self.x ** 2).sum()


def test_fit_lbfgs_says_when_the_evaluation_budget_ran_out():
    """Stopping on the evaluation budget (2·max_iter + 10) before max_iter iterations is
    reported as ``max_evals``, not as convergence."""
    res = fit_lbfgs(_Kink(), max_iter=5)
    assert res.n_evals >= 2 * 5 + 10
    assert len(res.history) < 5
    assert res.reason == "max_evals" and not res.converged


class _Rosenbrock(nn.Module):
    def __init__(self):
        super().__init__()
        self.x = nn.Parameter(torch.tensor([-1.2, 1.0], dtype=torch.float64))

    def nlml(self):
        a, b = self.x
        return (1 - a) ** 2 + 100 * (b - a * a) ** 2


def test_fit_lbfgs_relative_ftol_stops_early_and_zero_changes_nothing():
    full = fit_lbfgs(_Rosenbrock(), max_iter=200)
    assert full.objective < 1e-8
    same = fit_lbfgs(_Rosenbrock(), max_iter=200, ftol=0.0)
    assert same.n_evals == full.n_evals and same.objective == full.objective
    loose = fit_lbfgs(_Rosenbrock(), max_iter=200, ftol=1e-2)
    assert loose.reason == "converged" and loose.converged
    assert loose.n_evals < full.n_evals
    assert full.objective <= loose.objective < 24.2  # it did descend from f(x0) = 24.2
    with pytest.raises(ValueError, match="ftol"):
        fit_lbfgs(_Rosenbrock(), ftol=-1.0)


def test_fit_lbfgs_max_ls_caps_the_evaluations_of_one_iteration():
    """On the kink every line search brackets at length; with max_ls = 3 the search
    stops at the first iteration that needs a fourth evaluation, keeping the best
    point seen."""
    uncapped = fit_lbfgs(_Kink(), max_iter=5)
    model = _Kink()
    res = fit_lbfgs(model, max_iter=5, max_ls=3)
    assert res.reason == "line_search" and not res.converged
    assert res.n_evals < uncapped.n_evals
    assert res.objective == pytest.approx(float(model.nlml().detach()))
    assert res.objective < 1000 * 2 + 2  # below the start
    with pytest.raises(ValueError, match="max_ls"):
        fit_lbfgs(_Kink(), max_ls=0)


# -- the per-point stopping rule, the budget warning, cheap restarts -----------------------
from gpscale.train.lbfgs import ConvergenceWarning  # noqa: E402


def test_tol_stops_once_the_objective_per_point_stops_moving():
    full = fit_lbfgs(_Rosenbrock(), max_iter=200)
    loose = fit_lbfgs(_Rosenbrock(), max_iter=200, tol=1e-3, patience=2)
    assert loose.reason == "converged" and loose.converged
    assert len(loose.history) < len(full.history) and loose.n_evals < full.n_evals
    # the rule: the last `patience` iterations each moved the best objective by < tol
    best = [min(h["objective"] for h in loose.history[: i + 1])
            for i in range(len(loose.history))]
    assert all(best[i - 1] - best[i] < 1e-3 for i in (-1, -2))
    # per point: the same rule on an objective summed over 1000 "points" stops at the
    # same iteration with tol 1000 times smaller
    scaled = fit_lbfgs(_Rosenbrock(), max_iter=200, tol=1e-6, patience=2, n_points=1000)
    assert len(scaled.history) == len(loose.history)


def test_tol_does_not_stop_while_the_objective_still_moves():
    full = fit_lbfgs(_Rosenbrock(), max_iter=200)
    tight = fit_lbfgs(_Rosenbrock(), max_iter=200, tol=1e-14, patience=3)
    assert tight.objective < 1e-8  # it reached the minimum, as without the rule
    assert tight.objective == pytest.approx(full.objective, abs=1e-12)
    with pytest.raises(ValueError, match="tol"):
        fit_lbfgs(_Rosenbrock(), tol=-1.0)
    with pytest.raises(ValueError, match="patience"):
        fit_lbfgs(_Rosenbrock(), tol=1e-3, patience=0)


def test_out_of_iterations_warns_and_says_so():
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        res = fit_lbfgs(_Rosenbrock(), max_iter=3)
    assert res.reason == "max_iter" and not res.converged
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_lbfgs(_Rosenbrock(), max_iter=3, warn=False)
        fit_lbfgs(_Rosenbrock(), max_iter=200)  # converges: no warning


class _DoubleWell(nn.Module):
    """(x² − 1)² + 0.3 x: the well at x ≈ −1.04 is deeper than the one at x ≈ +0.96."""

    def __init__(self, x0=0.9):
        super().__init__()
        self.x = nn.Parameter(torch.tensor([x0], dtype=torch.float64))

    def nlml(self):
        x = self.x[0]
        return (x * x - 1) ** 2 + 0.3 * x


def _set_x(value):
    def start(model):
        with torch.no_grad():
            model.x.fill_(value)
    return start


def test_cheap_restarts_keep_the_best_start_and_continue_only_it():
    alone = fit_lbfgs(_DoubleWell(), max_iter=50)
    assert alone.objective > 0.0  # the shallow well (≈ +0.29)
    model = _DoubleWell()
    res = fit_lbfgs(model, max_iter=50, starts=[_set_x(2.5), _set_x(-0.7)], restart_iter=2)
    assert float(model.x.detach()[0]) == pytest.approx(-1.0360, abs=1e-3)  # the deep well
    assert res.objective < -0.3 and res.converged
    assert {h["run"] for h in res.history} == {2}  # history of the winner (third start)
    full = fit_lbfgs(_DoubleWell(), max_iter=50, starts=[_set_x(2.5), _set_x(-0.7)])
    assert full.objective == pytest.approx(res.objective, abs=1e-9)
    assert res.n_evals < full.n_evals  # the losers stopped after 2 iterations
    with pytest.raises(ValueError, match="restart_iter"):
        fit_lbfgs(_DoubleWell(), restart_iter=0)


def test_continuing_a_run_matches_one_uninterrupted_run():
    """A single start with restart_iter runs as before; the continuation of the winner
    keeps its L-BFGS memory (same minimum, no more than a couple of extra evaluations)."""
    one = fit_lbfgs(_Rosenbrock(), max_iter=200)
    same = fit_lbfgs(_Rosenbrock(), max_iter=200, restart_iter=5)
    assert same.n_evals == one.n_evals and same.objective == one.objective
    model = _Rosenbrock()
    two = fit_lbfgs(model, max_iter=200, starts=[_set_x(-1.2)], restart_iter=5)
    assert two.objective < 1e-8


def test_ctrl_c_in_a_later_start_ends_the_fit_as_interrupted():
    """Ctrl-C during the second of two cheap starts: the first start's values are kept,
    but the fit reports "interrupted" (it used to report the first start's "max_iter",
    so the command line saved the model and exited 0)."""
    model = _Rosenbrock()
    calls = []

    def objective():
        calls.append(1)
        if len(calls) == 8:  # the first start (3 iterations) is over by then
            raise KeyboardInterrupt
        return model.nlml()

    res = fit_lbfgs(model, objective, max_iter=200, starts=[_set_x(0.5)], restart_iter=3)
    assert res.reason == "interrupted" and not res.converged
    assert res.objective < _Rosenbrock().nlml().item()  # the best values so far are kept
