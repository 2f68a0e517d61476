"""The kernel chosen from the data (``kernel="auto"``, the default): the leave-one-out
formula against conditioning on n − 1 rows, the criterion's discrimination, determinism
under a seed, the budget's bound, and every door with no kernel named."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import gpscale
from gpscale.kernels import make_kernel
from gpscale.methods.kernel_choice import (
    CANDIDATES,
    DEFAULT_KERNEL,
    SAMPLE_ROWS,
    choose_kernel,
    loo_predictions,
    sample_size,
)
from gpscale.models import ExactGP


def _smooth(n, d=2, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1]) + noise * rng.standard_normal(n)


def test_leave_one_out_equals_conditioning_on_the_other_rows():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(40, 3, generator=g, dtype=torch.float64)
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(40, generator=g, dtype=torch.float64)
    model = ExactGP(make_kernel("matern52-ard", 3), X, y, noise=0.05, mean="constant")
    with torch.no_grad():
        model.mean_constant.fill_(0.3)
    mean, var = loo_predictions(model)
    for i in (0, 17, 39):
        rest = torch.cat([torch.arange(i), torch.arange(i + 1, 40)])
        other = ExactGP(model.kernel, X[rest], y[rest], noise=0.05, mean="constant")
        with torch.no_grad():
            other.mean_constant.fill_(0.3)
        pred = other.predict(X[i:i + 1], include_noise=True)
        torch.testing.assert_close(mean[i], pred.mean[0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(var[i], pred.var[0], rtol=1e-10, atol=1e-12)


def test_the_criterion_tells_a_rough_function_from_a_smooth_one():
    """A Brownian path is as rough as Matérn-1/2's samples; a smooth function with little
    noise is not: the scores must rank Matérn-1/2 first on the one and last on the other."""
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 10, 400))
    walk = np.cumsum(rng.standard_normal(400) * np.sqrt(np.diff(x, prepend=0)))
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    rough, _ = choose_kernel(t(x[:, None]), t((walk - walk.mean()) / walk.std()), rows=300)
    assert rough.kernel == "matern12-ard", rough.scores
    X, y = _smooth(400, noise=0.01)
    smooth, _ = choose_kernel(t(X), t((y - y.mean()) / y.std()), rows=300)
    assert smooth.kernel != "matern12-ard"
    assert smooth.scores["matern12-ard"] == max(smooth.scores.values()), smooth.scores
    assert rough.criterion == smooth.criterion == "held-out NLPD"
    assert rough.scored_rows == 100 and rough.rows == 300


def test_the_choice_is_deterministic_under_a_seed_and_loo_without_rows_outside():
    X, y = _smooth(120)
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    a, _ = choose_kernel(t(X), t(y), seed=3)
    b, _ = choose_kernel(t(X), t(y), seed=3)
    assert (a.kernel, a.scores) == (b.kernel, b.scores)  # all but the seconds it took
    assert a.criterion == "leave-one-out NLPD" and a.rows == a.scored_rows == 120
    assert set(a.scores) == set(CANDIDATES)


def test_a_budget_bounds_the_candidates_sample():
    assert sample_size(None) == SAMPLE_ROWS
    assert sample_size(3600.0) == SAMPLE_ROWS
    small = sample_size(10.0)
    assert 100 <= small < SAMPLE_ROWS and sample_size(1e-6) == 100


def test_gpscale_fit_with_no_kernel_named_chooses_and_saves_the_choice(tmp_path):
    X, y = _smooth(150)
    pred = gpscale.fit(X, y, max_iter=20)
    chosen = pred.kernel_choice
    assert chosen is not None and pred.kernel_name == chosen.kernel in CANDIDATES
    assert f"kernel chosen from the data: {chosen.kernel}" in pred.summary()
    pred.save(tmp_path / "m.pt")
    back = gpscale.load(tmp_path / "m.pt")
    assert back.kernel_choice == chosen and back.kernel_name == chosen.kernel
    named = gpscale.fit(X, y, kernel="rbf-ard", max_iter=5)
    assert named.kernel_choice is None and named.kernel_name == "rbf-ard"


def test_on_every_row_the_chosen_candidate_is_the_exact_methods_own_fit():
    """Up to the sample's size the candidates are the exact method's own fits, with its
    options: the chosen one is kept, identical to naming its kernel."""
    X, y = _smooth(90, d=3)
    auto = gpscale.fit(X, y, max_iter=15, noise=0.2)
    named = gpscale.fit(X, y, kernel=auto.kernel_name, max_iter=15, noise=0.2)
    for (k, a), (_, b) in zip(auto.model.state_dict().items(),
                              named.model.state_dict().items()):
        assert torch.equal(a, b), k
    assert auto.result.n_evals == named.result.n_evals


def test_methods_that_do_not_choose_fit_the_default_family():
    X, y = _smooth(200)
    pred = gpscale.fit(X, y, method="rff", num_features=64, max_iter=5)
    assert pred.kernel_choice is None and pred.kernel_name == DEFAULT_KERNEL
    assert gpscale.METHODS["exact"].chooses_kernel and gpscale.METHODS["sgpr"].chooses_kernel
    assert not gpscale.METHODS["rff"].chooses_kernel
    # the exact GP declares itself (its candidates are fits of the method itself)
    assert [name for name, m in gpscale.METHODS.items() if m.exact] == ["exact"]


def test_the_estimator_and_the_command_line_choose_too(tmp_path):
    from gpscale.sklearn import GPRegressor

    X, y = _smooth(120)
    est = GPRegressor(max_iter=10).fit(X, y)
    assert est.predictor_.kernel_choice is not None
    lines = ["a,b,y"] + [f"{a!r},{b!r},{t!r}" for (a, b), t in zip(X.tolist(), y.tolist())]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "gpscale.cli", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)

    fit = run("fit", "--data", "t.csv", "--target", "y", "--max-iter", "10", "--out", "m.pt")
    assert fit.returncode == 0, fit.stderr
    info = json.loads(run("info", "m.pt", "--json").stdout)
    assert info["kernel_choice"]["kernel"] == info["kernel"] in CANDIDATES
    assert set(info["kernel_choice"]["scores"]) == set(CANDIDATES)
    assert "chosen from the data" in run("info", "m.pt").stdout


@pytest.mark.parametrize("bad", ["matern", 3])
def test_an_unknown_kernel_is_still_refused(bad):
    X, y = _smooth(30)
    with pytest.raises(ValueError, match="kernel"):
        gpscale.fit(X, y, kernel=bad)


def test_on_the_iterative_path_the_candidates_have_pathwise_variances():
    """Where the exact fit will be solved by CG, RQ (no spectral density: its variances
    would come from the Lanczos cache) is not a candidate, and the note says why; on
    rows the Cholesky fit takes, it is."""
    from gpscale.methods import METHODS
    from gpscale.methods.cost import too_large
    from gpscale.methods.kernel_choice import kernel_for

    g = torch.Generator().manual_seed(0)
    X = torch.rand(6000, 2, generator=g, dtype=torch.float64)
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(6000, generator=g, dtype=torch.float64)
    assert too_large(6000, 2, rbf=False)
    pick = kernel_for(METHODS["exact"], X, y, {"max_iter": 5, "seed": 0}, budget=1.0)
    assert "rq-ard" not in pick.choice.scores and len(pick.choice.scores) == 4
    assert "rq-ard not a candidate" in pick.choice.note
    small = kernel_for(METHODS["exact"], X[:300], y[:300], {"max_iter": 5, "seed": 0},
                       budget=1.0)
    assert "rq-ard" in small.choice.scores


def test_the_path_is_judged_on_distinct_inputs_as_the_fit_judges_it():
    """6 000 rows that are two copies each of 3 000 inputs: the exact fit merges them and
    solves by Cholesky, so RQ stays a candidate."""
    from gpscale.methods import METHODS
    from gpscale.methods.cost import too_large
    from gpscale.methods.kernel_choice import kernel_for

    g = torch.Generator().manual_seed(0)
    X = torch.rand(3000, 2, generator=g, dtype=torch.float64).repeat(2, 1)
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(6000, generator=g, dtype=torch.float64)
    assert too_large(6000, 2, rbf=False) and not too_large(3000, 2, rbf=False)
    pick = kernel_for(METHODS["exact"], X, y, {"max_iter": 5, "seed": 0}, budget=1.0)
    assert "rq-ard" in pick.choice.scores and "not a candidate" not in pick.choice.note


def test_the_lanczos_cache_says_its_variances_are_too_wide():
    from gpscale.models import ConjugateGradients, ExactGP

    g = torch.Generator().manual_seed(1)
    X = torch.randn(200, 2, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.05 * torch.randn(200, generator=g, dtype=torch.float64)
    model = ExactGP(make_kernel("rq-ard", 2), X, y, noise=0.01,
                    solver=ConjugateGradients(block_dtype="float64"))
    model.solve()
    assert "Lanczos cache" in model.solver.title and "too wide" in model.solver.title
    dense = ExactGP(make_kernel("rq-ard", 2), X, y, noise=0.01)
    Xs = torch.randn(50, 2, generator=g, dtype=torch.float64)
    assert (model.predict(Xs).var >= dense.predict(Xs).var - 1e-8).all()  # never narrower

