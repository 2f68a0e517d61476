"""Issue 48's small cases: ``--budget`` out of range is a usage error (exit 2), a tiny
budget is reported honestly, unknown names list only public choices, and a CG model's
solver line is a header before the hyperparameter table."""

import numpy as np
import pytest

import gpscale
from gpscale import cli
from gpscale.kernels import make_kernel
from gpscale.kernels.base import kernel_class
from gpscale.methods.auto import choose_method
from gpscale.sklearn import GPRegressor


def _csv(tmp_path, n=30):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    path = tmp_path / "d.csv"
    np.savetxt(path, np.c_[X, np.sin(4 * X[:, 0])], delimiter=",", header="a,b,y",
               comments="")
    return path


@pytest.mark.parametrize("budget", ["0", "-1", "nan", "inf"])
def test_a_budget_out_of_range_is_a_usage_error(tmp_path, capsys, budget):
    path = _csv(tmp_path)
    status = cli.main(["fit", "--data", str(path), "--target", "y", "--method", "auto",
                       f"--budget={budget}", "--out", str(tmp_path / "m.pt")])
    assert status == 2
    assert "--budget must be a positive number of seconds" in capsys.readouterr().err
    assert not (tmp_path / "m.pt").exists()


def test_a_tiny_budget_is_said_to_be_below_what_any_method_needs():
    choice = choose_method(1000, 4, make_kernel("rbf-ard", 4), budget=1e-9)
    assert choice.method == "rff"
    assert "below what any method needs" in choice.reason
    assert " 0 s" not in choice.reason and "1e-09 s" in choice.reason


def test_unknown_names_list_public_choices_only():
    with pytest.raises(ValueError, match="known") as err:
        kernel_class("Nope")
    assert "_Budgeted" not in str(err.value) and "_Combination" not in str(err.value)
    assert "RBF" in str(err.value)
    with pytest.raises(ValueError, match="'auto'"):
        GPRegressor(method="nope").fit(np.zeros((4, 1)), np.arange(4.0))


def test_the_cg_solver_line_is_a_header_before_the_table():
    X = np.random.default_rng(0).uniform(size=(40, 2))
    p = gpscale.fit(X, np.sin(3 * X[:, 0]), method="exact", solver="cg", max_iter=5)
    lines = p.summary().splitlines()
    title = p.model.title
    assert f"model: {title}" in lines
    head = lines.index(f"model: {title}")
    assert lines[head + 1].startswith("hyperparameters")
    assert title not in lines[head + 2:]
