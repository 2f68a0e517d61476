"""method="auto": the rule's choices, its reasons, and fits through every door."""

import numpy as np
import pytest

import gpscale
from gpscale.kernels import make_kernel
from gpscale.methods.auto import (
    EXACT_SECONDS,
    ITERATIVE_SECONDS,
    MAX_FEATURES,
    MAX_INDUCING,
    MIN_FEATURES,
    MIN_INDUCING,
    SGPR_SECONDS,
    choose_method,
)
from gpscale.methods.cost import (
    SGPR_HELD_ROWS,
    exact_seconds,
    iterative_seconds,
    rff_seconds,
    sgpr_bytes,
    sgpr_passes_bytes,
    sgpr_passes_seconds,
    sgpr_seconds,
    too_large,
)


def _data(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.standard_normal(n)


def test_small_data_gets_exact_larger_sgpr_and_the_largest_rff():
    k = make_kernel("rbf-ard", 5)
    small, large = choose_method(500, 5, k), choose_method(200_000, 5, k)
    huge, beyond = choose_method(2 * SGPR_HELD_ROWS, 5, k), choose_method(10**8, 5, k)
    assert small.method == "exact" and "n=500" in small.reason
    m = large.options.get("m", 512)  # sized to auto's default budget
    assert large.method == "sgpr" and sgpr_seconds(200_000, m) <= SGPR_SECONDS
    assert "exact GP would need" in large.reason and f"m={m}" in large.reason
    assert "rows held in memory" in large.reason
    assert huge.method == "sgpr" and "passes" not in huge.options  # past the line: passes
    m = huge.options.get("m", 512)
    assert sgpr_passes_seconds(2 * SGPR_HELD_ROWS, m) <= SGPR_SECONDS \
        < sgpr_passes_seconds(2 * SGPR_HELD_ROWS, m + 64)
    assert "refined by passes over all rows" in huge.reason
    assert sgpr_passes_seconds(10**8, MIN_INDUCING) > SGPR_SECONDS
    assert beyond.method == "rff" and beyond.options == {}  # rff's own default size
    assert "sgpr by passes would need about" in beyond.reason


def test_past_the_line_sgpr_reads_passes_with_m_sized_by_its_cost_model():
    """No cliff at SGPR_HELD_ROWS: sgpr by passes at any n whose cost model fits the
    budget, m the largest that does (more inducing inputs where the rows allow)."""
    k = make_kernel("rbf-ard", 8)
    budgets = (1000, 2000, 3500)  # below the exact GP on every row (64 min at 250 001)
    for n in (SGPR_HELD_ROWS + 1, 10**6, 10**7):
        picks = [choose_method(n, 8, k, budget=b) for b in budgets]
        assert all(c.method == "sgpr" and "passes" not in c.options for c in picks), picks
        sizes = [c.options.get("m", 512) for c in picks]
        assert sizes == sorted(sizes)
        for b, m in zip(budgets, sizes):
            assert sgpr_passes_seconds(n, m) <= b
            assert m == MAX_INDUCING or sgpr_passes_seconds(n, m + 64) > b
    m = choose_method(10**6, 8, k).options["m"]  # within the default budget
    assert sgpr_passes_seconds(10**6, m) <= SGPR_SECONDS < sgpr_passes_seconds(10**6, m + 64)
    assert choose_method(9 * 10**6, 8, k).options == {"m": MIN_INDUCING}
    assert choose_method(10**7, 8, k).method == "rff"  # not even the smallest m fits
    assert sgpr_passes_seconds(10**7, MIN_INDUCING) > SGPR_SECONDS


def test_the_exact_threshold_follows_the_cost_model_and_the_budget():
    k = make_kernel("rbf", 2)
    edge = int((EXACT_SECONDS / exact_seconds(1)) ** (1 / 3))
    assert choose_method(edge - 1, 2, k).method == "exact"
    assert choose_method(edge + 2, 2, k).method == "sgpr"
    # a larger budget buys the exact GP further up
    assert choose_method(edge + 2, 2, k, budget=10 * EXACT_SECONDS).method == "exact"


def test_a_budget_sizes_sgpr_monotonically_then_falls_back_to_rff():
    k = make_kernel("rbf-ard", 4)
    n = 200_000
    budgets = (1, 120, 600, 1500)  # below the exact GP's iterative estimate
    assert iterative_seconds(n, 4) > budgets[-1]
    picks = [choose_method(n, 4, k, budget=b) for b in budgets]
    assert picks[0].method == "rff"  # not even m = MIN_INDUCING fits one second
    sizes = [c.options.get("m", 512) for c in picks[1:]]
    assert all(c.method == "sgpr" for c in picks[1:])
    assert sizes == sorted(sizes) and MIN_INDUCING <= sizes[0] and sizes[-1] <= MAX_INDUCING
    for b, m in zip(budgets[1:], sizes):
        assert sgpr_seconds(n, m) <= b  # sized to fit the budget by the cost model
        assert m == MAX_INDUCING or sgpr_seconds(n, m + 64) > b  # ... and the largest
    unbudgeted = choose_method(n, 4, k).options.get("m", 512)  # sized to the default budget
    assert sgpr_seconds(n, unbudgeted) <= SGPR_SECONDS < sgpr_seconds(n, unbudgeted + 64)


def test_the_exact_gp_on_every_row_where_its_estimate_fits():
    """Past the exact GP's size guard, a stationary kernel gets the exact GP on every row
    (its iterative path) where that cost model fits the budget (default a quarter of an
    hour: kin40k's 36 000 x 8 and 57 248 x 27 yes, 150 000 x 27 no); between the
    Cholesky limit and the switch to the iterative path sgpr stays; kernels without
    tiled products never."""
    k8, k27 = make_kernel("rbf-ard", 8), make_kernel("rbf-ard", 27)
    kin40k = choose_method(36_000, 8, k8)
    assert iterative_seconds(36_000, 8) <= ITERATIVE_SECONDS
    assert kin40k.method == "exact" and "iterative" in kin40k.reason
    assert choose_method(57_248, 27, k27).method == "exact"
    assert choose_method(150_000, 27, k27).method == "sgpr"
    assert choose_method(150_000, 27, k27, budget=10**5).method == "exact"
    assert not too_large(4500, 8)
    assert choose_method(4500, 8, k8).method == "sgpr"  # Cholesky too slow, no switch yet
    assert choose_method(100_000, 4, make_kernel("rbf-ard", 4), budget=10**6).method == "exact"
    assert choose_method(36_000, 8, make_kernel("linear", 8)).method != "exact"


def test_sgpr_is_left_when_its_matrices_would_not_fit_in_memory(monkeypatch):
    from gpscale.methods import auto

    k = make_kernel("rbf-ard", 4)
    monkeypatch.setattr(auto, "available_memory",
                        lambda: int(1.5 * sgpr_bytes(50_000, 4, MIN_INDUCING)))
    choice = choose_method(50_000, 4, k)  # the rows held would not fit: sgpr by passes
    assert choice.method == "sgpr" and choice.options["passes"] is True
    assert sgpr_passes_bytes(4, choice.options.get("m", 512)) <= 0.75 * sgpr_bytes(
        50_000, 4, MIN_INDUCING)
    monkeypatch.setattr(auto, "available_memory", lambda: 10**8)
    choice = choose_method(50_000, 4, k)
    assert choice.method == "rff" and "sgpr by passes would need" in choice.reason


def test_a_budget_sizes_rff_monotonically_within_its_range(monkeypatch):
    from gpscale.methods import auto

    monkeypatch.setattr(auto, "available_memory", lambda: 10**8)  # no room for sgpr
    k = make_kernel("rbf-ard", 4)
    n = 2 * SGPR_HELD_ROWS
    assert iterative_seconds(n, 4) > 10**4  # the exact GP on every row is not in reach
    sizes = [choose_method(n, 4, k, budget=b).options.get("num_features", 512)
             for b in (1, 30, 300, 3000, 10**4)]
    assert sizes == sorted(sizes) and sizes[0] == MIN_FEATURES and sizes[-1] == MAX_FEATURES
    for b, p in zip((30, 300, 3000), sizes[1:4]):
        assert rff_seconds(n, p) <= b  # sized to fit the budget by the cost model


def test_kernels_without_random_features_get_cholqr():
    choice = choose_method(50_000, 64, make_kernel("tanimoto", 64))
    assert choice.method == "cholqr-vfe" and choice.options == {"m": 256}
    assert "no spectral density" in choice.reason


@pytest.mark.parametrize("budget", [0, -1, float("nan"), "10"])
def test_a_bad_budget_is_refused(budget):
    with pytest.raises(ValueError, match="budget must be a positive number"):
        choose_method(100, 2, make_kernel("rbf", 2), budget=budget)


def test_fit_auto_says_what_it_picked_and_predicts():
    X, y = _data(200)
    pred = gpscale.fit(X, y, method="auto", max_iter=30)
    assert pred.method == "exact" and pred.choice.method == "exact"
    assert "picked by method='auto': exact" in pred.summary()
    mean = pred.predict(X[:20])
    assert np.sqrt(np.mean((mean - y[:20]) ** 2)) < 0.3


def test_fit_auto_on_rows_past_the_exact_threshold_trains_sgpr(tmp_path):
    X, y = _data(4000)
    choice = gpscale.api.choose(X, y)
    assert choice.method == "sgpr"
    pred = gpscale.fit(X, y, method="auto", max_iter=15, m=32)
    assert pred.method == "sgpr" and pred.model.m == 32  # the user's size wins
    pred.save(tmp_path / "m.pt")
    again = gpscale.load(tmp_path / "m.pt")
    assert again.method == "sgpr"
    np.testing.assert_allclose(again.predict(X[:50]), pred.predict(X[:50]), rtol=1e-12)


def test_fit_auto_on_a_parquet_source(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = _data(150)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y})
    frame.to_parquet(tmp_path / "t.parquet")
    pred = gpscale.fit(tmp_path / "t.parquet", target="y", method="auto", max_iter=20)
    assert pred.choice.method == "exact" and pred.feature_names == ["a", "b", "c"]


def test_options_the_picked_method_does_not_take_are_refused_naming_the_choice():
    X, y = _data(100)
    with pytest.raises(ValueError, match="method='auto' picked 'exact'.*num_features"):
        gpscale.fit(X, y, method="auto", num_features=64)


def test_budget_goes_with_auto_only():
    X, y = _data(50)
    with pytest.raises(ValueError, match="budget= sizes the model that method='auto'"):
        gpscale.fit(X, y, method="exact", budget=10)


def test_the_estimator_takes_auto():
    from gpscale.sklearn import GPRegressor

    X, y = _data(120)
    est = GPRegressor(method="auto", max_iter=20).fit(X, y)
    assert est.predictor_.choice.method == "exact"
    assert est.score(X, y) > 0.8


def test_the_command_line_takes_method_auto_and_a_budget(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("gpscale")
    if not exe.exists():
        pytest.skip("no gpscale console script next to this Python")
    X, y = _data(80)
    lines = ["a,b,c,y"] + [",".join(f"{v:.6g}" for v in (*row, t)) for row, t in zip(X, y)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(Path(gpscale.__file__).resolve().parents[1])}

    def run(*args):
        return subprocess.run([str(exe), *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)

    fit = run("fit", "--data", "t.csv", "--target", "y", "--method", "auto", "--budget", "30",
              "--max-iter", "20", "--out", "m.pt")
    assert fit.returncode == 0, fit.stderr
    assert "--method auto picked exact" in fit.stderr
    back = gpscale.load(tmp_path / "m.pt")
    assert back.method == "exact" and back.choice.method == "exact"  # saved with the model
    assert "picked by method='auto': exact" in back.summary()
    shown = run("info", "m.pt", "--json")
    assert shown.returncode == 0, shown.stderr
    import json
    assert json.loads(shown.stdout)["picked_by_auto"]["method"] == "exact"
    assert "auto     picked exact: n=80" in run("info", "m.pt").stdout
    wrong = run("fit", "--data", "t.csv", "--target", "y", "--method", "exact", "--budget",
                "30", "--out", "m2.pt")
    assert wrong.returncode == 2 and "--budget sizes the model" in wrong.stderr
    assert not (tmp_path / "m2.pt").exists()
    # an option the picked method does not take is a usage error that names the pick
    bad = run("fit", "--data", "t.csv", "--target", "y", "--method", "auto", "--option",
              "num_features=64", "--out", "m3.pt")
    assert bad.returncode == 2 and "num_features" in bad.stderr, bad.stderr


def test_the_iterative_estimate_counts_the_slower_contraction_of_other_kernels():
    """A Matérn kernel's refinement contracts by float64 vjp slabs: its evaluations cost
    more, fewer of them fit refine="auto"'s budget, and either way the refinement stays
    within that budget in the estimate auto reads."""
    from gpscale.methods.cost import REFINE_SECONDS, refine_evaluations, refine_seconds

    for n, d in ((7_373, 32), (14_940, 18), (25_600, 8)):
        assert refine_seconds(n, d, rbf=False) > refine_seconds(n, d)
        assert refine_evaluations(n, d, rbf=False) <= refine_evaluations(n, d)
        for rbf in (True, False):
            assert refine_evaluations(n, d, rbf) * refine_seconds(n, d, rbf) <= REFINE_SECONDS
    assert refine_evaluations(14_940, 18, rbf=False) < refine_evaluations(14_940, 18)


def test_a_table_with_gaps_is_estimated_as_the_fit_runs_it(monkeypatch):
    """Where the iterative path would take an RBF's fit but the gaps' kernel (no tiled
    form) keeps the fit on Cholesky, auto's estimate and reason are Cholesky's, one
    more evaluation included (the leave-one-out pass); where that Cholesky fit is over
    the budget but the iterative one is not, auto asks for solver="cg" (no gap term),
    as estimated."""
    import gpscale.methods.auto as auto
    from gpscale.methods.cost import EXACT_EVALS

    monkeypatch.setattr(auto, "available_memory", lambda: None)
    d, k = 60, make_kernel("rbf-ard", 60)
    n = next(n for n in range(2000, 20000, 50)
             if too_large(n, d, rbf=True) and not too_large(n, d, rbf=False))
    plain, gapped = choose_method(n, d, k), choose_method(n, d, k, gaps=True)
    assert plain.reason.endswith("no inducing-point approximation")  # iterative
    assert gapped.method == "exact" and gapped.options == {}
    assert "by Cholesky" in gapped.reason
    assert gapped.seconds == pytest.approx(exact_seconds(n, EXACT_EVALS + 1))
    between = (iterative_seconds(n, d, True) + gapped.seconds) / 2
    assert iterative_seconds(n, d, True) < between < gapped.seconds
    squeezed = choose_method(n, d, k, budget=between, gaps=True)
    assert squeezed.method == "exact" and squeezed.options == {"solver": "cg"}
    assert squeezed.seconds == pytest.approx(iterative_seconds(n, d, True))
