"""Ctrl-C on a local dask cluster (issue 48): the terminal's SIGINT reaches the whole
process group; the workers ignore it, the client cancels its tasks and closes the
cluster, and ``gpscale fit`` exits 130 with one line, leaving no process behind. The
pieces: the marker that makes a worker ignore SIGINT, and a fit stopped by Ctrl-C that
starts no further search or work on every row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

import gpscale  # noqa: E402
from gpscale.kernels import make_kernel  # noqa: E402
from gpscale.methods.exact import fit_exact  # noqa: E402
from gpscale.parallel.cluster import LOCAL_WORKER_ENV  # noqa: E402

SRC = Path(gpscale.__file__).resolve().parents[1]
GPSCALE = Path(sys.executable).with_name("gpscale")


def _default_sigint() -> None:
    """In the child: Ctrl-C's default action, whatever this test run inherited (a run
    started in the background by a non-interactive shell ignores SIGINT, and so would
    every process it starts)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _group(pgid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


@pytest.mark.skipif(not GPSCALE.exists(), reason="no installed gpscale command")
def test_ctrl_c_on_a_local_cluster_exits_130_in_one_line(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3000, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(3000)
    np.savetxt(tmp_path / "d.csv", np.c_[X, y], delimiter=",", header="a,b,c,y",
               comments="")
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    env.pop("GPSCALE_DEBUG", None)
    proc = subprocess.Popen(
        [str(GPSCALE), "fit", "-q", "--data", "d.csv", "--target", "y", "--method", "exact",
         "--workers", "2", "--option", "solver=cg", "--option", "subsample=300",
         "--option", "refine=100000", "--out", "m.pt"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 60
        while len(_group(proc.pid)) < 4 and proc.poll() is None:  # it, a tracker, 2 workers
            assert time.monotonic() < deadline, "the cluster did not start"
            time.sleep(0.2)
        time.sleep(3.0)  # fitting: the sample's fit, then the refinement on the cluster
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()  # stopped in the kernel's choice or in the fit itself
    assert len(lines) == 1 and lines[0].startswith("gpscale: interrupted;"), err
    assert "m.pt" not in os.listdir(tmp_path) or "as it was" in lines[0], err
    assert took < 15, took
    deadline = time.monotonic() + 10
    while (left := _group(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, [p.cmdline() for p in left]
    assert not (tmp_path / "m.pt").exists()


def test_the_marker_makes_an_importing_process_ignore_sigint():
    code = ("import os, signal, gpscale; os.kill(os.getpid(), signal.SIGINT); "
            "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)")
    env = {**os.environ, "PYTHONPATH": str(SRC), LOCAL_WORKER_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60, preexec_fn=_default_sigint)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert LOCAL_WORKER_ENV not in os.environ  # set only while a cluster runs


def test_ctrl_c_in_the_sample_fit_stops_the_iterative_path(monkeypatch):
    """The sample's fit stopped by Ctrl-C (L-BFGS keeps its best) starts neither a
    second search nor the work on every row: KeyboardInterrupt reaches the caller."""
    from gpscale.train import lbfgs

    calls = []
    real = lbfgs._Run.advance

    def interrupted(self, iters):
        calls.append(iters)
        real(self, 1)
        self.reason = "interrupted"

    monkeypatch.setattr(lbfgs._Run, "advance", interrupted)
    g = torch.Generator().manual_seed(0)
    X = torch.rand(400, 3, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0])
    with pytest.raises(KeyboardInterrupt):
        fit_exact(X, y, make_kernel("rbf-ard", 3), solver="cg", subsample=100, refine=0)
    assert len(calls) == 1
