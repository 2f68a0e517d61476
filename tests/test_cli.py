import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpscale
from gpscale import api, cli


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


@pytest.fixture
def train_csv(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 6, 40), rng.uniform(100, 300, 40)
    y = np.sin(a) + (b - 200) / 100 + 0.05 * rng.standard_normal(40)
    return _write_csv(tmp_path / "train.csv", ["a", "b", "y"], zip(a, b, y))


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _read_preds(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["mean", "std"]
    return np.array(rows[1:], dtype=float)


def test_fit_then_predict(tmp_path, train_csv, capsys):
    model = str(tmp_path / "model.pt")
    code, out, err = _run(capsys, "fit", "--data", train_csv, "--target", "y",
                          "--max-iter", "20", "--seed", "1", "--out", model)
    assert code == 0, err
    assert "model saved to" in out and "kernel.base.lengthscale" in out
    pred = gpscale.load(model)
    assert pred.feature_names == ["a", "b"] and pred.target_name == "y"

    # predicting on the training CSV: the target column is ignored
    code, out, err = _run(capsys, "predict", "--model", model, "--data", train_csv,
                          "--out", str(tmp_path / "p.csv"))
    assert code == 0, err
    got = _read_preds(tmp_path / "p.csv")
    data = np.loadtxt(train_csv, delimiter=",", skiprows=1)
    mean, std = pred.predict(data[:, :2], return_std=True)
    np.testing.assert_allclose(got[:, 0], mean, rtol=1e-12)
    np.testing.assert_allclose(got[:, 1], std, rtol=1e-12)
    assert np.sqrt(np.mean((got[:, 0] - data[:, 2]) ** 2)) < 0.2

    # columns in another order, no target
    new = _write_csv(tmp_path / "new.csv", ["b", "a"], [(150.0, 1.0), (250.0, 2.0)])
    assert cli.main(["predict", "--model", model, "--data", new,
                     "--out", str(tmp_path / "q.csv")]) == 0
    np.testing.assert_allclose(_read_preds(tmp_path / "q.csv")[:, 0],
                               pred.predict(np.array([[1.0, 150.0], [2.0, 250.0]])))


def _expect_error(capsys, argv, message, code=1):
    """A failure at run time exits 1, a usage error (the command line itself) 2."""
    got, out, err = _run(capsys, *argv)
    assert got == code, err
    assert err.startswith("gpscale: error: ") and message in err, err
    assert "Traceback" not in err


def test_fit_errors(tmp_path, train_csv, capsys):
    out = str(tmp_path / "m.pt")
    fit = ["fit", "--target", "y", "--out", out, "--max-iter", "3", "--data"]
    _expect_error(capsys, fit + [str(tmp_path / "nope.csv")], "not found")
    _expect_error(capsys, ["fit", "--data", train_csv, "--target", "z", "--out", out],
                  "available columns: a, b, y")
    bad = _write_csv(tmp_path / "text.csv", ["a", "name", "y"],
                     [(i, f"n{i}", i % 3) for i in range(30)])
    _expect_error(capsys, fit + [bad], "look like ids or free text, not categories: 'name' "
                  "(30 distinct values in 30 rows). Leave them out with --exclude name")
    gap = _write_csv(tmp_path / "gap.csv", ["a", "y"], [(1, 2), ("inf", 3), (3, 4)])
    _expect_error(capsys, fit + [gap], "missing or non-finite values")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x81garbage\n\x00\x9f")
    _expect_error(capsys, fit + [str(tmp_path / "bin.csv")], "could not read")
    (tmp_path / "empty.csv").write_text("")
    _expect_error(capsys, fit + [str(tmp_path / "empty.csv")], "is empty")
    (tmp_path / "ragged.csv").write_text("a,y\n1,2\n3\n")
    _expect_error(capsys, fit + [str(tmp_path / "ragged.csv")], "line 3")
    const = _write_csv(tmp_path / "const.csv", ["a", "y"], [(1, 5), (2, 5), (3, 5)])
    _expect_error(capsys, fit + [const], "constant")
    _expect_error(capsys, fit + [train_csv, "--method", "nope"], "unknown method 'nope'", 2)
    _expect_error(capsys, fit + [train_csv, "--kernel", "nope"], "unknown kernel 'nope'", 2)
    _expect_error(capsys, ["fit", "--data", train_csv, "--target", "y",
                           "--out", str(tmp_path / "no" / "m.pt")], "does not exist")
    assert not (tmp_path / "m.pt").exists()


def test_predict_errors(tmp_path, train_csv, capsys):
    model = str(tmp_path / "m.pt")
    assert cli.main(["fit", "--data", train_csv, "--target", "y", "--max-iter", "5",
                     "--out", model]) == 0
    capsys.readouterr()
    out = str(tmp_path / "p.csv")
    other = _write_csv(tmp_path / "other.csv", ["a", "c"], [(1, 2)])
    _expect_error(capsys, ["predict", "--model", model, "--data", other, "--out", out],
                  "missing ['b']")
    _expect_error(capsys, ["predict", "--model", train_csv, "--data", train_csv,
                           "--out", out], "not a gpscale model file")
    _expect_error(capsys, ["predict", "--model", str(tmp_path / "x.pt"), "--data",
                           train_csv, "--out", out], "not found")
    assert not (tmp_path / "p.csv").exists()


def test_usage(capsys):
    assert cli.main([]) == 2
    assert cli.main(["--help"]) == 0
    assert cli.main(["fit"]) == 2  # argparse: required arguments
    assert "--target" in capsys.readouterr().err
    assert cli.main(["--version"]) == 0
    assert gpscale.__version__ in capsys.readouterr().out


def test_ctrl_c_exits_130(train_csv, tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run", interrupted)  # the fit itself
    code, _, err = _run(capsys, "fit", "--data", train_csv, "--target", "y",
                        "--out", str(tmp_path / "m.pt"))
    assert code == 130 and "interrupted" in err


def test_bench_runs_the_benchmarks_in_a_child_process(monkeypatch, tmp_path):
    """``gpscale bench ARGS`` is ``python -m benchmarks ARGS`` in the current folder (the
    library never imports its benchmarks), its exit status gpscale's."""
    seen = []

    def child(cmd, env):
        seen.append((cmd, os.getcwd()))
        return subprocess.CompletedProcess(cmd, 7)

    monkeypatch.setattr(cli.subprocess, "run", child)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")  # a checkout's root
    assert cli.main(["bench", "exact", "--quick", "--out", "x"]) == 7
    assert seen == [([sys.executable, "-m", "benchmarks", "exact", "--quick", "--out", "x"],
                     str(tmp_path))]


def test_bench_unavailable_says_how_to_get_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "benchmarks", None)  # not importable
    monkeypatch.setattr(cli, "CHECKOUT", tmp_path)  # and no checkout around gpscale
    monkeypatch.chdir(tmp_path)  # nor in the current folder
    monkeypatch.setattr(cli.subprocess, "run", None)  # so no child is started
    _expect_error(capsys, ["bench", "--list"], "from a gpscale checkout installed with: "
                  "pip install -e '.[bench]'")


def _bench_list(cwd, *command):
    src = Path(gpscale.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, *command, "bench", "--list"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert {line.split()[0] for line in out.stdout.splitlines()} >= {"exact", "uci-large"}


def test_bench_runs_from_the_checkout_root(tmp_path):
    """As the console script runs it: the current folder (the checkout's root) is not on
    gpscale's sys.path, only the child's."""
    script = tmp_path / "gpscale_command.py"
    script.write_text("import sys\nfrom gpscale.cli import main\nsys.exit(main())\n")
    _bench_list(Path(gpscale.__file__).resolve().parents[2], str(script))


def test_bench_finds_the_benchmarks_of_the_checkout_it_runs_from(tmp_path):
    """``gpscale bench`` run outside the repository (``benchmarks`` not importable from
    there) takes the ``benchmarks/`` folder beside the checkout's ``src/``."""
    _bench_list(tmp_path, "-m", "gpscale.cli")


def test_demo_defaults_are_the_full_job():
    args = cli.build_parser().parse_args(["demo"])
    assert args.max_iter == 200 and not args.no_plot and not args.weekly
    assert args.out == "gpscale-output"


def test_demo_quick(tmp_path, capsys):
    pytest.importorskip("statsmodels")
    code, out, err = _run(capsys, "demo", "--max-iter", "4", "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert "RMSE" in out and "NLPD" in out and "seasonal cycle" in out
    png = tmp_path / "o" / "co2_forecast.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in out
    code, out, _ = _run(capsys, "demo", "--max-iter", "2", "--no-plot",
                        "--out", str(tmp_path / "p"))
    assert code == 0 and "plot" not in out and not (tmp_path / "p").exists()


def test_threads_option_is_scoped_to_the_command(tmp_path, train_csv, capsys):
    import torch

    before = torch.get_num_threads()
    assert cli.main(["fit", "--data", train_csv, "--target", "y", "--max-iter", "3",
                     "--threads", "1", "--out", str(tmp_path / "m.pt")]) == 0
    assert torch.get_num_threads() == before
    capsys.readouterr()
    code, _, err = _run(capsys, "fit", "--data", train_csv, "--target", "y", "--threads", "0",
                        "--out", str(tmp_path / "m.pt"))
    assert code == 2 and "--threads: must be >= 1, got 0" in err, err  # argparse usage error


def test_method_options_on_the_command_line(tmp_path, capsys):
    from gpscale.methods import get_method
    from gpscale.methods.options import parse_option

    rff = get_method("rff")
    assert parse_option(rff, "num_features=64") == ("num_features", 64)
    assert parse_option(rff, "subsample=None") == ("subsample", None)
    assert parse_option(rff, "subsample=auto") == ("subsample", "auto")
    assert parse_option(rff, "progress=false") == ("progress", False)
    assert parse_option(get_method("admm-hocv"), "rho=2.5") == ("rho", 2.5)
    with pytest.raises(ValueError, match="must be of type int"):
        parse_option(rff, "num_features=1.5")
    with pytest.raises(ValueError, match=r"no option 'bogus'; it takes: num_features=512"):
        parse_option(rff, "bogus=1")
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_option(rff, "num_features")
    train_csv = _write_csv(tmp_path / "t.csv", ["a", "y"],
                           [(x, np.sin(x)) for x in np.linspace(0, 3, 30)])
    out = str(tmp_path / "m.pt")
    _expect_error(capsys, ["fit", "--data", train_csv, "--target", "y", "--method", "rff",
                           "--option", "bogus=1", "--out", out], "no option 'bogus'", 2)
