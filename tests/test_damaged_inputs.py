"""Messages, not tracebacks: damaged model files, data too large to use in its own units
(standardize=False), and Ctrl-C while the command is still starting."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import gpscale

SRC = Path(gpscale.__file__).resolve().parents[1]
GPSCALE = Path(sys.executable).with_name("gpscale")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (40, 2))
    path = tmp_path_factory.mktemp("model") / "m.pt"
    gpscale.fit(X, np.sin(X[:, 0]), max_iter=3).save(path)
    payload = torch.load(path, weights_only=True)
    payload.pop("checksum")  # edited files, as written before checksums (the deeper checks)
    return payload, X


@pytest.mark.parametrize("where, key", [(None, "scaler"), (None, "state_dict"),
                                        (None, "model_options"), ("scaler", "x_mean"),
                                        ("kernel_config", "type"), ("state_dict", "X")])
def test_model_file_with_a_missing_key(saved, tmp_path, where, key):
    payload, _ = saved
    payload = {k: dict(v) if isinstance(v, dict) else v for k, v in payload.items()}
    (payload if where is None else payload[where]).pop(key)
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=f"bad.pt' is damaged or not written by gpscale: "
                                         f"missing key '{key}'"):
        gpscale.load(tmp_path / "bad.pt")


def test_model_file_with_a_state_that_does_not_fit(saved, tmp_path):
    payload, _ = saved
    payload = {**payload, "state_dict": {**payload["state_dict"], "extra": torch.ones(2)}}
    torch.save(payload, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="damaged or not written by gpscale: RuntimeError"):
        gpscale.load(tmp_path / "bad.pt")


@pytest.mark.parametrize("sx, sy", [(1e300, 1.0), (1.0, 1e300), (1e200, 1e200)])
def test_own_units_too_large_is_a_value_error(sx, sy):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (30, 2))
    with pytest.raises(ValueError, match="standardize=False.*--no-standardize"):
        gpscale.fit(X * sx, np.sin(X[:, 0]) * sy, standardize=False, max_iter=3)


def test_own_units_numerical_failure_is_a_value_error():
    """A RuntimeError of a fit in the data's own units names the likely cause; with
    standardisation on it propagates unchanged."""
    def failing_fit(X, y, kernel):
        raise RuntimeError("Cholesky failed at every jitter")

    gpscale.register_method("always-fails", failing_fit, replace=True)
    try:
        X = np.arange(20.0).reshape(10, 2)
        with pytest.raises(ValueError, match="failed on the data in its own units.*Cholesky "
                                             "failed.*--no-standardize"):
            gpscale.fit(X, X[:, 0], method="always-fails", standardize=False)
        with pytest.raises(RuntimeError, match="Cholesky failed"):
            gpscale.fit(X, X[:, 0] + X[:, 1] ** 2, method="always-fails")
    finally:
        gpscale.METHODS.pop("always-fails", None)


def _libtorch_mapped(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_ctrl_c_while_starting_exits_130_without_a_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for _ in range(5):  # the import can finish before the signal lands: try again
        proc = subprocess.Popen([str(GPSCALE), "demo", "--help"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not _libtorch_mapped(proc.pid) and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGINT)  # torch is being imported: the command is starting
        out, err = proc.communicate(timeout=60)
        if not (proc.returncode == 0 and "usage:" in out):  # 0 + help: started too fast
            break
    else:
        pytest.skip("the command finished starting before SIGINT landed, five times")
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "gpscale: interrupted" in err
