"""Budgets kept: a fit's time allowance (gpscale.deadline) read by every stage that
can stop early — L-BFGS between iterations, CG between iterations, the iterative exact
GP's stages, the kernel's choice — and what ``auto`` passes down. The clock is a fake
one that the tests move, so each stage's cut is exact and nothing here is timed."""

import dataclasses
import math
import warnings

import pytest
import torch

import gpscale
import gpscale.deadline as deadline_module
from gpscale.deadline import Deadline
from gpscale.kernels import RBF, Scale
from gpscale.linalg.cg import cg
from gpscale.methods import METHODS
from gpscale.methods.auto import DEFAULT_BUDGET, EXACT_SECONDS, Choice, time_allowance
from gpscale.methods.exact import fit_exact
from gpscale.methods.kernel_choice import CANDIDATES, choose_kernel
from gpscale.models import ConjugateGradients, ExactGP
from gpscale.models.exact_cg import LOOSE_TOL, precond_cap
from gpscale.plan import make_plan
from gpscale.train import fit_lbfgs
from gpscale.train.lbfgs import OUT_OF_TIME
from gpscale.train.warning_types import ConvergenceWarning


class Clock:
    """A fake ``time`` module: ``perf_counter`` moves ``step`` seconds at each reading."""

    def __init__(self, step: float = 0.0) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(deadline_module, "time", fake)
    return fake


def _time_limits_seen(monkeypatch, method: str) -> list:
    """The seconds left on the time_limit each fit of ``method`` is called with, in order
    (None for none): the api hands down its one Deadline."""
    seen = []
    real = METHODS[method].fit_fn

    def spy(*args, **kwargs):
        limit = kwargs.get("time_limit")
        assert limit is None or isinstance(limit, Deadline)
        seen.append(None if limit is None else limit.left())
        return real(*args, **kwargs)

    monkeypatch.setitem(METHODS, method, dataclasses.replace(METHODS[method], fit_fn=spy))
    return seen


def _data(n=300, d=3, noise=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + noise * torch.randn(
        n, generator=g, dtype=torch.float64)
    return X, y


def test_a_deadline_counts_down_and_a_stage_gets_an_earlier_one(clock):
    d = Deadline(100.0)
    clock.now = 30.0
    assert d.left() == pytest.approx(70.0) and not d.passed()
    stage = d.sooner(20.0)
    assert stage.left() == pytest.approx(20.0)
    assert d.sooner(500.0).left() == pytest.approx(70.0)  # never later than its parent
    assert d.sooner(-5.0).passed()
    clock.now = 101.0
    assert d.passed() and d.left() == 0.0 and stage.passed()
    assert Deadline.of(None) is None
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError, match="time allowance"):
            Deadline(bad)


def test_lbfgs_stops_between_iterations_at_its_deadline(clock):
    """The deadline passes after the search has begun: it ends at the best θ seen, with
    reason "time allowance", after fewer iterations than an unlimited search."""
    X, y = _data(n=200, seed=1)

    def model():
        return ExactGP(Scale(RBF(torch.ones(3), ard_dims=3)), X, y, noise=0.5)

    free = fit_lbfgs(model(), max_iter=60, tol=None)
    m = model()
    d = Deadline(10.0)
    objective = m.nlml

    def ticking():
        clock.now += 1.0  # each evaluation "takes" one second
        return objective()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the caller, not fit_lbfgs, says what the cut cost
        cut = fit_lbfgs(m, ticking, max_iter=60, tol=None, deadline=d)
    assert cut.reason == OUT_OF_TIME and not cut.converged
    assert 1 <= len(cut.history) < len(free.history)
    assert cut.objective == pytest.approx(float(m.nlml().detach()))  # best θ restored


def test_cg_ends_when_stop_says_so():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(40, 40, generator=g, dtype=torch.float64)
    A = A @ A.T + 0.01 * torch.eye(40, dtype=torch.float64)
    b = torch.randn(40, generator=g, dtype=torch.float64)
    seen = []
    _, full = cg(lambda v: A @ v, b, tol=1e-10, max_iter=200)
    _, cut = cg(lambda v: A @ v, b, tol=1e-10, max_iter=200,
                stop=lambda rel: seen.append(float(rel.max())) or len(seen) >= 3)
    assert cut.iterations == 3 < full.iterations and not cut.converged


def test_cg_solve_past_its_deadline_stops_at_the_loose_tolerance(clock):
    """A deadline already passed: the solve still reaches LOOSE_TOL (never a useless
    α), stops there instead of at tol, says so in solve_info and warns."""
    X, y = _data(n=400, noise=0.01, seed=2)
    kernel = Scale(RBF(torch.full((3,), 0.7), ard_dims=3))
    solver = ConjugateGradients(tol=1e-10, precond="none", block_dtype="float64")
    model = ExactGP(kernel, X, y, noise=1e-3, solver=solver)
    full = model.solve()
    assert full["converged"] and full["stopped"] == ""
    late = Deadline(0.0)
    with pytest.warns(RuntimeWarning, match="time allowance"):
        info = model.solve(warm=False, deadline=late)
    assert info["stopped"] == "time allowance" and not info["converged"]
    assert info["residual_max"] <= LOOSE_TOL and info["iterations"] < full["iterations"]


def test_the_iterative_fit_keeps_its_allowance(clock):
    """A clock that moves a second at every reading: the search on the sample stops at
    its share, the refinement is dropped for want of time, and CG ends at the deadline
    at the loose tolerance; each cut is warned and the plan is in the history."""
    clock.step = 1.0
    X, y = _data(n=500, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, result = fit_exact(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), solver="cg",
                                  subsample=150, refine=5, probes=4, seed=0, cg_tol=1e-8,
                                  time_limit=6.0)
    said = " | ".join(str(w.message) for w in caught)
    assert "stopped at the fit's time allowance" in said
    assert "no time to refine" in said
    plan = next(h for h in result.history if h.get("phase") == "plan")
    assert plan["refine"] == 0 and plan["precond_rank_estimate"] >= 1
    assert not any(h.get("phase") == "refine" for h in result.history)
    solve = result.history[-1]
    assert solve["phase"] == "all rows" and solve["residual_max"] <= LOOSE_TOL
    pred = model.predict(X[:20])
    assert torch.isfinite(pred.mean).all() and (pred.var > 0).all()


def test_without_a_limit_nothing_is_cut(clock):
    clock.step = 1.0  # the clock runs, but no deadline reads it
    X, y = _data(n=500, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, result = fit_exact(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), solver="cg",
                              subsample=150, refine=2, probes=4, seed=0)
    assert not any("time allowance" in str(w.message) for w in caught)
    assert sum(h.get("phase") == "refine" for h in result.history) == 2


def test_the_rank_estimate_follows_the_noise():
    """The preconditioner's rank estimated from a sample grows as the noise shrinks
    against the signal, and is the cap where the sample cannot tell."""
    X, y = _data(n=1200, seed=4)
    solver = ConjugateGradients()
    ranks = []
    for noise in (1.0, 1e-1, 1e-3, 1e-6):
        sample = ExactGP(Scale(RBF(torch.full((3,), 1.0), ard_dims=3)), X, y, noise=noise)
        ranks.append(solver.rank_for(sample, 20_000))
    assert ranks == sorted(ranks) and ranks[0] < ranks[2] < ranks[3]
    assert ranks[3] == precond_cap(20_000)
    assert ConjugateGradients(precond_rank=50).rank_for(sample, 20_000) == 50


def test_the_kernel_choice_shares_its_deadline(clock):
    """Each candidate's fit gets an equal share of the time left; candidates not begun
    by the deadline are left out, and the note says which."""
    X, y = _data(n=120, seed=5)
    d = Deadline(3.0)
    fitted = []

    def tick(*args, **kwargs):
        fitted.append(kwargs["time_limit"].left())  # each its own deadline, within d
        assert kwargs["time_limit"].end <= d.end
        clock.now += 1.5
        return real(*args, **{k: v for k, v in kwargs.items() if k != "time_limit"})

    import gpscale.methods.kernel_choice as kc
    real = kc.fit_exact
    kc.fit_exact = tick
    try:
        choice, fits = choose_kernel(X, y, rows=200, deadline=d, max_iter=5)
    finally:
        kc.fit_exact = real
    assert len(fits) == 2 and fitted[0] == pytest.approx(3.0 / len(CANDIDATES))
    assert "not fitted within the time allowance" in choice.note
    assert set(choice.scores) == set(fits)


def test_auto_gives_the_method_its_budget():
    """auto's plan carries the budget (or its default) to a method with a time_limit,
    at most twice the estimate it printed and never under a minute; a named method gets
    none unless given one."""
    X, y = _data(n=300, seed=6)
    data = gpscale.io.training_data(X.numpy(), y.numpy())
    kernel = gpscale.kernels.make_kernel("rbf-ard", 3)
    small = make_plan(data, "auto", kernel)
    assert small.choice.seconds < 1 and small.time_limit == EXACT_SECONDS
    assert make_plan(data, "auto", kernel, budget=30.0).time_limit == 30.0
    large = Choice("exact", {}, "", seconds=400.0)
    assert time_allowance(large, None) == 800.0
    assert time_allowance(Choice("exact", {}, "", seconds=600.0), None) == DEFAULT_BUDGET
    assert time_allowance(large, 500.0) == 500.0
    assert time_allowance(Choice("cholqr-vfe", {"m": 8}, ""), None) == DEFAULT_BUDGET
    assert make_plan(data, "exact", kernel).time_limit is None
    named = make_plan(data, "exact", kernel, options={"time_limit": 12.0})
    assert named.time_limit == 12.0
    assert "time_limit" in METHODS["exact"].options


def test_a_time_limit_reaches_the_exact_fit_through_the_api(monkeypatch):
    """A named method gets the time_limit it was given (none otherwise); under auto the
    exact fit gets what the kernel's choice left of auto's allowance."""
    seen = _time_limits_seen(monkeypatch, "exact")
    X, y = _data(n=80, seed=7)
    gpscale.fit(X.numpy(), y.numpy(), method="exact", kernel="rbf-ard", time_limit=50.0)
    gpscale.fit(X.numpy(), y.numpy(), method="exact", kernel="rbf-ard")
    gpscale.fit(X.numpy(), y.numpy(), method="auto", kernel="rbf-ard")
    assert 0 < seen[0] <= 50.0 and seen[1] is None
    assert 0 < seen[2] <= EXACT_SECONDS


def _rq_case(n=1000):
    """An RQ kernel of large outputscale and α at σ² = 0.011 (hyperparameters a 6 000-row
    auto fit ended at): float32 tiles' rounding outweighs σ² though the noise check
    passes them, and CG in float32 stalls."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 4, generator=g, dtype=torch.float64) * 3.4 - 1.7
    y = torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1]) + 0.05 * torch.randn(
        n, generator=g, dtype=torch.float64)
    k = gpscale.kernels.make_kernel("rq-ard", 4)
    k.outputscale = torch.tensor(70.0, dtype=torch.float64)
    k.base.alpha = torch.tensor(80.0, dtype=torch.float64)
    k.base.lengthscale = torch.tensor([1.6, 2.2, 59.0, 118.0], dtype=torch.float64)
    return k, X, y


def test_cg_in_float32_that_stalls_is_solved_again_in_float64():
    k, X, y = _rq_case()
    model = ExactGP(k, X, y, noise=0.011, solver=ConjugateGradients(max_iter=200))
    assert model.solver.solve_dtype(model) == "float32"  # the noise check lets it through
    with pytest.warns(RuntimeWarning, match="float32 kernel tiles"):
        info = model.solve()
    assert info["converged"] and model.solver.block_dtype == "float64"
    dense = ExactGP(k, X, y, noise=0.011)
    exact = torch.linalg.solve(dense.covariance(), y)
    assert torch.linalg.norm(model.solver.alpha - exact) <= 1e-2 * torch.linalg.norm(exact)


def test_cg_in_float32_that_converges_stays_in_float32():
    X, y = _data(n=600, seed=8)
    model = ExactGP(Scale(RBF(torch.ones(3), ard_dims=3)), X, y, noise=0.1,
                    solver=ConjugateGradients())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = model.solve()
    assert info["converged"] and model.solver.block_dtype == "float32"


def test_sgpr_keeps_its_allowance_held_and_in_passes(clock):
    """sgpr's searches stop at the deadline (the second start is skipped), in memory
    and by passes over Rows, and say so."""
    from gpscale.io.rows import Rows
    from gpscale.methods.sgpr import fit_sgpr_method

    clock.step = 1.0
    X, y = _data(n=400, seed=9)
    for rows in ((X, y), (Rows.in_memory(X, y), None)):
        with pytest.warns(ConvergenceWarning, match="sgpr's search stopped at the fit's time"):
            _, result = fit_sgpr_method(*rows, Scale(RBF(torch.ones(3), ard_dims=3)), m=16,
                                        passes=rows[1] is None, subsample=200, refine=5,
                                        time_limit=8.0)
        assert result.reason == OUT_OF_TIME and len(result.history) <= 10
    _, free = fit_sgpr_method(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), m=16)
    assert free.reason != OUT_OF_TIME and len(free.history) > 10


def test_auto_gives_sgpr_its_budget():
    X, y = _data(n=300, seed=10)
    data = gpscale.io.training_data(X.numpy(), y.numpy())
    plan = make_plan(data, "auto", gpscale.kernels.make_kernel("rbf-ard", 3))
    assert "time_limit" in METHODS["sgpr"].options
    assert plan.time_limit == time_allowance(plan.choice, None)


def test_rff_keeps_its_allowance(clock):
    from gpscale.methods.rff import fit_rff

    clock.step = 1.0
    X, y = _data(n=400, seed=11)
    with pytest.warns(ConvergenceWarning, match="rff's search stopped at the fit's time"):
        _, result = fit_rff(X, y, Scale(RBF(torch.ones(3), ard_dims=3)), num_features=64,
                            time_limit=5.0)
    assert result.reason == OUT_OF_TIME


def test_a_method_reading_passes_gets_the_budget_through_the_api(tmp_path, monkeypatch):
    """Rows left in their files: auto's pick that reads passes gets its time_limit."""
    import pandas as pd

    seen = _time_limits_seen(monkeypatch, "rff")
    X, y = _data(n=200, seed=12)
    frame = pd.DataFrame(X.numpy(), columns=["a", "b", "c"]).assign(y=y.numpy())
    frame.to_parquet(tmp_path / "rows.parquet")
    gpscale.fit(str(tmp_path / "rows.parquet"), target="y", method="rff", kernel="rbf-ard",
                num_features=32, max_iter=3, time_limit=40.0)
    assert 0 < seen[0] <= 40.0


def test_a_deadline_is_handed_down_as_itself():
    d = Deadline(5.0)
    assert Deadline.of(d) is d
    assert Deadline.of(None) is None
    assert 0 < Deadline.of(2.0).left() <= 2.0
    Deadline.check(d), Deadline.check(None), Deadline.check(0.0)
    with pytest.raises(ValueError, match=">= 0 seconds"):
        Deadline.check(-1.0)
