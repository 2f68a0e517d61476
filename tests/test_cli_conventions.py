"""Command-line conventions through the installed ``gpscale`` command in a subprocess:
``gpscale methods``, exit statuses (2 usage, 1 run time), ``-`` for stdin / stdout,
``predict --keep / --quantiles``, progress bars only on a terminal, ``gpscale info``."""

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpscale
from gpscale import cli
from gpscale.commands.info import info_text, model_info
from gpscale.commands.methods import method_options
from gpscale.methods import METHODS
from gpscale.methods.options import option_defaults

SRC = Path(gpscale.__file__).resolve().parents[1]
GPSCALE = Path(sys.executable).with_name("gpscale")
FIXTURES = Path(__file__).parent / "data" / "format_v1"

pytestmark = pytest.mark.skipif(not GPSCALE.exists(),
                                reason=f"no gpscale console script next to {sys.executable}")


def _gpscale(*args, cwd, stdin: bytes | None = None):
    """The installed command; stdout as bytes (it may carry a model), stderr as text."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("GPSCALE_DEBUG", None)
    proc = subprocess.run([str(GPSCALE), *map(str, args)], cwd=cwd, env=env, input=stdin,
                          capture_output=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr.decode()


def _rows(n=40, seed=0):
    """Raw columns on different scales, so that the saved scaler matters."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0, 6, n), rng.uniform(100, 300, n)
    y = 10 * np.sin(a) + (b - 200) / 10 + 0.5 * rng.standard_normal(n)
    return a, b, y


def _csv_bytes(columns: dict) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(list(columns))
    w.writerows(zip(*columns.values()))
    return out.getvalue().encode()


# -- gpscale methods ------------------------------------------------------------------------
def test_methods_lists_every_method_with_its_options(tmp_path):
    code, out, err = _gpscale("methods", cwd=tmp_path)
    assert code == 0, err
    text = out.decode()
    for name, method in METHODS.items():
        assert f"\n{name} " in f"\n{text}", name
        assert method.description.split(":")[0][:40] in " ".join(text.split()), name
        for option in option_defaults(method):
            assert f"{option}=" in text, (name, option)

    code, out, err = _gpscale("methods", "--json", cwd=tmp_path)
    assert code == 0, err
    listed = {m["name"]: m for m in json.loads(out)}
    assert set(listed) == set(METHODS)
    for name, method in METHODS.items():
        assert set(listed[name]["options"]) == set(method_options(method)), name
    assert listed["exact"]["options"]["max_iter"] == 200
    assert listed["admm-hocv"]["options"]["rho"] == 5.0  # an ADMMOptions setting
    assert listed["minimax"]["options"]["batch_size"] == 32  # the trainer's default



def test_fit_help_for_a_method_lists_its_options(capsys):
    assert cli.main(["fit", "--method", "svgp", "--help"]) == 0
    out = capsys.readouterr().out
    assert "num_inducing" in out and "Hensman" in out and "--data DATA" in out


# -- exit status ----------------------------------------------------------------------------
def test_usage_errors_exit_2_and_failures_at_run_time_exit_1(tmp_path, capsys):
    a, b, y = _rows()
    (tmp_path / "t.csv").write_bytes(_csv_bytes({"a": a, "b": b, "y": y}))
    fit = ["fit", "--data", "t.csv", "--target", "y", "--out", "m.pt"]
    code, _, err = _gpscale(*fit, "--method", "rff", "--option", "num_features=many",
                            cwd=tmp_path)
    assert code == 2 and err == ("gpscale: error: option num_features of method 'rff' must "
                                 "be of type int (default 512), got 'many'\n"), err
    code, _, err = _gpscale("fit", "--data", "nope.csv", "--target", "y", "--out", "m.pt",
                            cwd=tmp_path)
    assert code == 1 and err == "gpscale: error: data file 'nope.csv' not found\n", err
    # the same boundary, in process
    os.chdir(tmp_path)
    cases = [  # (arguments, exit status, words of the message)
        (["predict", "--model", "m.pt", "--data", "t.csv", "--out", "p.csv",
          "--quantiles", "0.5,1"], 2, "strictly between 0 and 1"),
        (["predict", "--model", "-", "--data", "-", "--out", "p.csv"], 2, "both be '-'"),
        (["predict", "--model", "m.pt", "--data", "t.csv", "--out", "p.txt"], 2, ".parquet"),
        (fit + ["--method", "cholqr-vfe", "--workers", "2"], 2, "trains in this process"),
        (["methods", "nope"], 2, "unknown method 'nope'"),
        (["fit", "--data", "t.csv", "--target", "z", "--out", "m.pt"], 1, "available columns"),
        (["fit", "--data", "t.csv", "--target", "y", "--out", "t.csv"], 1, "is the input"),
        (["info", "t.csv"], 1, "not a gpscale model file"),
    ]
    for args, status, words in cases:
        assert cli.main(args) == status, args
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, (args, err)
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "p.csv").exists()


def test_an_error_from_torch_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    """Whatever fails at run time (here a RuntimeError such as torch raises) is a
    one-line message and status 1, not a traceback."""
    a, b, y = _rows()
    (tmp_path / "t.csv").write_bytes(_csv_bytes({"a": a, "b": b, "y": y}))

    def fails(*args, **kwargs):
        raise RuntimeError("linalg.cholesky: The factorization could not be completed")

    monkeypatch.setattr(gpscale.api, "run", fails)  # the fit itself
    code = cli.main(["fit", "--data", str(tmp_path / "t.csv"), "--target", "y",
                     "--out", str(tmp_path / "m.pt")])
    err = capsys.readouterr().err
    assert code == 1
    assert err == ("gpscale: error: RuntimeError: linalg.cholesky: The factorization could "
                   "not be completed\n")


# -- '-', --keep, --quantiles, progress -----------------------------------------------------
def test_stdin_and_stdout_keep_quantiles_and_no_progress_bars_in_pipes(tmp_path):
    a, b, y = _rows(40)
    train = _csv_bytes({"a": a, "b": b, "y": y})
    # the model itself to stdout: stdout carries only the model, messages go to stderr
    code, out, err = _gpscale("fit", "--data", "-", "--target", "y", "--max-iter", "15",
                              "--out", "-", stdin=train, cwd=tmp_path)
    assert code == 0, err
    assert "model saved to stdout" in err and "kernel.base.lengthscale" in err
    assert "\r" not in err and "%|" not in err and "it/s" not in err  # no progress bar
    (tmp_path / "m.pt").write_bytes(out)
    model = gpscale.load(tmp_path / "m.pt")
    assert model.feature_names == ["a", "b"] and model.target_name == "y"
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]  # no temporary file left here

    ta, tb, ty = _rows(30, seed=1)
    ids = [f"{i:03d}" for i in range(30)]  # text that a number parser would change
    new = _csv_bytes({"id": ids, "b": tb, "a": ta, "y": ty})
    code, out, err = _gpscale("predict", "--model", "m.pt", "--data", "-", "--out", "-",
                              "--keep", "id", "--keep", "y", "--quantiles", "0.05,0.5",
                              "--quantiles", "0.95", stdin=new, cwd=tmp_path)
    assert code == 0, err
    assert "wrote 30 predictions" in err
    rows = list(csv.reader(io.StringIO(out.decode())))
    assert rows[0] == ["id", "y", "mean", "std", "q0.05", "q0.5", "q0.95"]
    assert [r[0] for r in rows[1:]] == ids  # copied as written, not quoted
    got = np.array([r[1:] for r in rows[1:]], dtype=float)
    mean, std = model.predict(np.column_stack([ta, tb]), return_std=True)
    np.testing.assert_allclose(got[:, 0], ty, rtol=1e-15)
    np.testing.assert_allclose(got[:, 1], mean, rtol=1e-12)
    np.testing.assert_allclose(got[:, 2], std, rtol=1e-12)
    for j, q in zip((3, 4, 5), (0.05, 0.5, 0.95)):
        np.testing.assert_allclose(got[:, j], mean + NormalDist().inv_cdf(q) * std,
                                   rtol=1e-12, atol=1e-12)
    assert np.all(got[:, 3] < got[:, 1]) and np.all(got[:, 1] < got[:, 5])


def test_progress_only_when_asked_in_a_pipe_and_quiet_is_quiet(tmp_path):
    a, b, y = _rows(40)
    (tmp_path / "t.csv").write_bytes(_csv_bytes({"a": a, "b": b, "y": y}))
    code, _, err = _gpscale("fit", "--data", "t.csv", "--target", "y", "--max-iter", "3",
                            "--out", "p.pt", "--progress", cwd=tmp_path)
    assert code == 0 and "L-BFGS:" in err and "%|" in err, err
    code, out, err = _gpscale("fit", "--data", "t.csv", "--target", "y", "--max-iter", "3",
                              "--out", "q.pt", "--quiet", cwd=tmp_path)
    assert code == 0 and out == b"" and (tmp_path / "q.pt").is_file()
    assert all(line.startswith("gpscale: warning:") for line in err.splitlines()), err


def test_keep_columns_keep_their_type_in_parquet(tmp_path):
    a, b, y = _rows(40)
    model = gpscale.fit(np.column_stack([a, b]), y, max_iter=5)
    model.feature_names = ["a", "b"]
    model.save(tmp_path / "m.pt")
    pq.write_table(pa.table({"key": pa.array(np.arange(40) * 7, pa.int64()),
                             "name": [f"row {i}, ok" for i in range(40)], "a": a, "b": b}),
                   tmp_path / "new.parquet")
    code, out, err = _gpscale("predict", "--model", "m.pt", "--data", "new.parquet",
                              "--keep", "name", "--keep", "key", "--out", "p.parquet",
                              "--quiet", cwd=tmp_path)
    assert code == 0 and out == b"" and err == "", err
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.column_names == ["name", "key", "mean", "std"]
    assert table.schema.field("key").type == pa.int64()
    assert table["key"].to_pylist() == list(np.arange(40) * 7)
    assert table["name"].to_pylist()[3] == "row 3, ok"
    np.testing.assert_allclose(table["mean"].to_numpy(),
                               model.predict(np.column_stack([a, b])), rtol=1e-12)


def test_csv_text_is_quoted_only_where_it_must_be(tmp_path):
    from gpscale.io import write_table

    path = tmp_path / "o.csv"
    write_table(path, [{"id": pa.array(["a1", "b2"]), "m": np.array([1.0, 2.5])},
                       {"id": pa.array(['c,3', 'say "hi"']), "m": np.array([3.0, 4.0])}])
    assert path.read_text().splitlines()[:3] == ["id,m", "a1,1", "b2,2.5"]
    with open(path, newline="") as f:
        assert list(csv.reader(f))[3:] == [["c,3", "3"], ['say "hi"', "4"]]


# -- gpscale info ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["exact", "rff"])
def test_info_reports_hyperparameters_in_the_data_units(tmp_path, method):
    a, b, y = _rows(40)
    X = np.column_stack([a, b])
    options = {"max_iter": 25, "kernel": "rbf-ard"} if method == "exact" else {
        "max_iter": 15, "num_features": 64}  # the kernel the reported values rebuild below
    import pandas as pd

    pred = gpscale.fit(pd.DataFrame({"a": a, "b": b, "y": y}), target="y", method=method,
                       **options)
    pred.save(tmp_path / "m.pt")
    code, out, err = _gpscale("info", "m.pt", "--json", cwd=tmp_path)
    assert code == 0, err
    info = json.loads(out)
    assert (info["method"], info["kernel"], info["n"], info["d"]) == (method, "rbf-ard", 40, 2)
    assert info["inputs"] == ["a", "b"] and info["target"] == "y"
    assert info["format_version"] == 2 and info["written_by"] == f"gpscale {gpscale.__version__}"
    fit = info["fit"]
    assert fit["iterations"] == max(h["iter"] for h in pred.result.history)
    assert fit["evaluations"] == pred.result.n_evals and fit["reason"] == pred.result.reason
    assert fit["time_s"] == pytest.approx(pred.result.wall_s) and fit["time_s"] > 0
    hyper = info["hyperparameters"]
    s_x, s_y = pred.scaler.x_scale, pred.scaler.y_scale
    ls_name = "kernel.base.lengthscale" if method == "exact" else "features.lengthscale"
    ls = hyper[ls_name]
    assert ls["unit"] == "x" and ls["columns"] == ["a", "b"]
    np.testing.assert_allclose(ls["value"], np.array(ls["trained"]) * s_x, rtol=1e-12)
    np.testing.assert_allclose(hyper["noise"]["value"], hyper["noise"]["trained"] * s_y**2,
                               rtol=1e-12)
    if method == "exact":
        # a GP built in the data's units from the reported values predicts as the model
        from gpscale.kernels import RBF, Scale
        from gpscale.models import ExactGP

        kernel = Scale(RBF(ls["value"], ard_dims=2), hyper["kernel.outputscale"]["value"])
        mean0 = hyper["mean_constant"]["value"]
        raw = ExactGP(kernel, X, y - mean0, noise=hyper["noise"]["value"])
        Xt = np.column_stack(_rows(10, seed=3)[:2])
        m, v = raw.predict(Xt, include_noise=True)
        mean, std = pred.predict(Xt, return_std=True)
        np.testing.assert_allclose(m.detach().numpy() + mean0, mean, rtol=1e-7)
        np.testing.assert_allclose(np.sqrt(v.detach().numpy()), std, rtol=1e-6)
    text = info_text(model_info(tmp_path / "m.pt"))
    assert f"method   {method}" in text and "n = 40 rows, d = 2 inputs (a, b)" in text
    assert "format version 2" in text and f"a: {ls['value'][0]:.4g}" in text


def test_info_reads_format_version_1_files():
    for path in sorted(FIXTURES.glob("*.pt")):
        info = model_info(path)
        assert info["format_version"] == 1 and info["written_by"] is None, path
        assert info["n"] == 40 and info["hyperparameters"], path
        json.dumps(info)  # plain values only
