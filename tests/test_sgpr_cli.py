"""``gpscale fit --method sgpr`` on a Parquet directory through the installed command, in
this process and with ``--workers 2`` (a local dask cluster): the same model, saved with
its statistics, not its rows."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from parquet_data import make_data, write_parquet

import gpscale
from gpscale.models import StreamedSGPR

pytest.importorskip("distributed")
SRC = Path(gpscale.__file__).resolve().parents[1]


def _gpscale(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "gpscale.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_sgpr_on_a_parquet_directory_in_process_and_on_two_workers(tmp_path):
    X, y = make_data(900, seed=12)
    write_parquet(tmp_path / "train", X, y, parts=3, row_group=120)
    args = ["fit", "--data", "train", "--target", "y", "--method", "sgpr", "--kernel",
            "rbf-ard", "--max-iter", "10", "--seed", "2", "--option", "m=10", "--option",
            "subsample=250", "--option", "refine=3"]
    here = _gpscale(*args, "--out", "here.pt", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    there = _gpscale(*args, "--workers", "2", "--out", "there.pt", cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    a, b = gpscale.load(tmp_path / "here.pt"), gpscale.load(tmp_path / "there.pt")
    assert isinstance(a.model, StreamedSGPR) and a.model.n == 900 and a.model.m == 10
    assert [h["phase"] for h in a.result.history][-1] == "all rows"
    np.testing.assert_allclose(b.result.objective, a.result.objective, rtol=1e-9)
    Xt, yt = make_data(60, seed=13)
    for u, v in zip(b.predict(Xt, return_std=True), a.predict(Xt, return_std=True)):
        np.testing.assert_allclose(u, v, rtol=1e-7, atol=1e-9)
    rmse = float(np.sqrt(np.mean((a.predict(Xt) - yt) ** 2)))
    assert rmse < 0.3 * float(np.std(yt)), rmse
    state = torch.load(tmp_path / "here.pt", weights_only=True)["state_dict"]
    assert "stat_gram" in state and max(v.numel() for v in state.values()) == 100  # no rows
