"""``gpscale bench exact-process``: the recipe script in process (fast), and the whole
benchmark at a tiny size (slow: each tool is a fresh Python process)."""

import json
import math

import numpy as np
import pytest

import benchmarks.exact_process as ep
from benchmarks import _gpytorch_process as recipe
from benchmarks import main
from gpscale.data.sources import data_dir


def test_recipe_script_fits_saves_and_predicts(tmp_path):
    pytest.importorskip("gpytorch")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * [1.0, 10.0, 0.1] + 5.0
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40) + 3.0
    ep._write_csv(tmp_path / "train.csv", X, y)
    ep._write_csv(tmp_path / "test.csv", X[:7], y[:7])
    recipe.main(["fit", str(tmp_path / "train.csv"), str(tmp_path / "g.pt"),
                 "--iters", "3"])
    recipe.main(["predict", str(tmp_path / "g.pt"), str(tmp_path / "test.csv"),
                 str(tmp_path / "p.csv")])
    m = ep._metrics(tmp_path / "p.csv", y[:7], float(np.std(y)), "gpytorch")
    assert math.isfinite(m["rmse"]) and math.isfinite(m["nlpd"])
    pred = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    assert pred.shape == (7, 2) and np.all(pred[:, 1] > 0)
    assert abs(pred[:, 0].mean() - 3.0) < 1.0  # predictions in y's own units


def test_metrics_reads_std_for_gpscale(tmp_path):
    (tmp_path / "p.csv").write_text("mean,std\n1.0,2.0\n3.0,2.0\n")
    m = ep._metrics(tmp_path / "p.csv", np.array([1.0, 3.0]), 2.0, "gpscale")
    assert m["rmse"] == 0.0
    assert m["nlpd"] == pytest.approx(0.5 * math.log(2 * math.pi))


@pytest.mark.slow
def test_exact_process_tiny(tmp_path):
    if not (data_dir() / "uci" / "challenger.npz").exists():
        pytest.skip(f"UCI set challenger not found under {data_dir()}")
    pytest.importorskip("gpytorch")
    rc = main(["exact-process", "--sets", "challenger", "--n", "20", "--repeats", "1",
               "--gpytorch-iters", "2", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "exact-process.jsonl").read_text()
             .splitlines()]
    runs = [r for r in lines if r.get("kind") == "run"]
    assert [r["tool"] for r in runs] == ["gpscale", "gpytorch"]
    (row,) = [r for r in lines if r.get("kind") == "set"]
    assert row["gpscale_over_gpytorch"] > 0 and row["gpscale_evals"] >= 1
    assert row["gpscale_cpu_s"] > 0 and row["gpscale_cpu_over_gpytorch"] > 0
    assert all(math.isfinite(row[k]) for k in ("gpscale_rmse", "gpytorch_rmse",
                                               "gpscale_nlpd", "gpytorch_nlpd"))
    assert lines[-1]["summary"] is True
    assert (tmp_path / "exact-process.md").exists()
