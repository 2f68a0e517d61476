"""The command line when the world misbehaves (issue 31): a disk that fills up under a
result written to stdout or to a file, a scheduler that accepts connections and never
answers (or is not a scheduler, or dies mid-fit), absurd ``--threads``, damaged or
foreign model files, out-of-range ``--dtype`` / ``--seed``, and SIGTERM. The installed
``gpscale`` command in a subprocess, on real files, sockets, signals and file-size
limits; a real tmpfs where this machine lets the tests mount one."""

import io
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import gpscale
from gpscale import cli
from gpscale.files import write_all
from gpscale.io import write_table
from gpscale.threads import available_cores, thread_limit

SRC = Path(gpscale.__file__).resolve().parents[1]
GPSCALE = Path(sys.executable).with_name("gpscale")

pytestmark = pytest.mark.skipif(not GPSCALE.exists(),
                                reason=f"no gpscale console script next to {sys.executable}")


# -- helpers --------------------------------------------------------------------------------
def _csv(path, n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="a,b,y", comments="",
               fmt="%.6f")
    return path


def _env(**extra):
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", **extra}
    env.pop("GPSCALE_DEBUG", None)
    return env


def _file_size_limit(limit):
    """preexec_fn: the child may write files of at most ``limit`` bytes; beyond that
    write(2) takes what fits (a short write), then fails with EFBIG — what a disk that
    fills up does (ENOSPC), without root. Python ignores SIGXFSZ, so no signal kills it."""

    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _gpscale(*args, cwd, stdout=subprocess.PIPE, env=None, preexec_fn=None, timeout=180):
    """Run the installed command; (exit status, stdout bytes or None, stderr text)."""
    proc = subprocess.run([str(GPSCALE), *map(str, args)], cwd=cwd, env=env or _env(),
                          stdout=stdout, stderr=subprocess.PIPE, preexec_fn=preexec_fn,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr.decode()


def _one_error(err, *words):
    """stderr ends with exactly one ``gpscale: error: ...`` line holding ``words``."""
    errors = [line for line in err.splitlines() if line.startswith("gpscale: error: ")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    assert "Traceback" not in err, err
    for w in words:
        assert w in errors[0], (w, err)
    return errors[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A small model and prediction inputs of 5000 rows (about 190 kB of predictions)."""
    folder = tmp_path_factory.mktemp("model")
    _csv(folder / "train.csv")
    _csv(folder / "new.csv", n=5000, seed=1)
    code, _, err = _gpscale("fit", "--data", "train.csv", "--target", "y", "--max-iter", "5",
                            "-q", "--out", "m.pt", cwd=folder)
    assert code == 0, err
    return folder


def _mount_tmpfs(where, size):
    """Mount a tmpfs of ``size`` at ``where``; False where this machine does not allow
    it (not root, no mount namespace)."""
    if os.geteuid() != 0:
        return False
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture
def full_disk(tmp_path):
    """A real, nearly full file system: a 64 KiB tmpfs with 12 KiB left (room for a
    small CSV file, not for a model file or 5000 predictions)."""
    where = tmp_path / "disk"
    if not _mount_tmpfs(where, "64k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        free = os.statvfs(where)
        with open(where / "filler", "wb") as f:
            f.write(b"\0" * (free.f_bavail * free.f_frsize - 12 * 1024))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


# -- case 2: a result on stdout (python -u), the disk fills up ------------------------------
def test_predictions_on_stdout_cut_short_by_the_disk_fail_loudly(model):
    """A raw stdout (PYTHONUNBUFFERED) takes the first 20 000 bytes, then refuses: the
    command says the output is incomplete and exits 1, never "wrote 5000 predictions"."""
    out = model / "p.csv"
    with open(out, "wb") as sink:
        code, _, err = _gpscale("predict", "--model", "m.pt", "--data", "new.csv", "--out",
                                "-", cwd=model, stdout=sink, env=_env(PYTHONUNBUFFERED="1"),
                                preexec_fn=_file_size_limit(20_000))
    assert code == 1, err
    _one_error(err, "standard output", "incomplete")
    assert "wrote" not in err
    assert out.stat().st_size == 20_000


def test_a_model_on_stdout_cut_short_by_the_disk_fails_loudly(model):
    with open(model / "s.pt", "wb") as sink:
        code, _, err = _gpscale("fit", "--data", "train.csv", "--target", "y", "--max-iter",
                                "2", "-q", "--out", "-", cwd=model, stdout=sink,
                                env=_env(PYTHONUNBUFFERED="1"),
                                preexec_fn=_file_size_limit(4096))
    assert code == 1, err
    _one_error(err, "standard output", "incomplete")


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_stdout_on_dev_full_says_the_disk_is_full(model, unbuffered):
    with open("/dev/full", "wb") as sink:
        code, _, err = _gpscale("predict", "--model", "m.pt", "--data", "new.csv", "--out",
                                "-", cwd=model, stdout=sink,
                                env=_env(PYTHONUNBUFFERED=unbuffered))
    assert code == 1, err
    _one_error(err, "standard output", "disk is full")


def test_predictions_on_stdout_to_a_full_tmpfs(model, full_disk):
    with open(full_disk / "p.csv", "wb") as sink:
        code, _, err = _gpscale("predict", "--model", "m.pt", "--data", "new.csv", "--out",
                                "-", cwd=model, stdout=sink, env=_env(PYTHONUNBUFFERED="1"))
    assert code == 1, err
    _one_error(err, "standard output", "disk is full")


class _Trickle(io.RawIOBase):
    """A raw binary stream that takes at most ``most`` bytes per write, as a pipe or a
    terminal may (interrupted writes): correct output needs the caller to loop."""

    def __init__(self, most):
        self.most, self.data = most, bytearray()

    def writable(self):
        return True

    def write(self, b):
        taken = bytes(b[: self.most])
        self.data += taken
        return len(taken)


def test_short_writes_are_completed(monkeypatch):
    raw = _Trickle(most=777)
    write_all(raw, bytes(range(256)) * 40, "a trickle")
    assert bytes(raw.data) == bytes(range(256)) * 40
    raw = _Trickle(most=1000)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, write_through=True))
    mean = np.linspace(0, 1, 3000)
    n = write_table("-", [{"mean": mean, "std": mean + 1}])
    text = bytes(raw.data).decode().splitlines()
    assert n == 3000 and len(text) == 3001 and text[0] == "mean,std"
    assert np.array_equal(np.array([float(t.split(",")[0]) for t in text[1:]]), mean)


# -- case 8: a model file on a full disk ----------------------------------------------------
def _check_model_not_written(folder, err):
    line = _one_error(err, "m.pt", "incomplete")
    assert "unexpected pos" not in line and "inline_container" not in line
    assert (folder / "m.pt").read_bytes() == b"the previous model"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_saving_a_model_past_the_file_size_limit(model, tmp_path):
    _csv(tmp_path / "d.csv")
    (tmp_path / "m.pt").write_bytes(b"the previous model")
    code, _, err = _gpscale("fit", "--data", "d.csv", "--target", "y", "--max-iter", "2",
                            "-q", "--out", "m.pt", cwd=tmp_path,
                            preexec_fn=_file_size_limit(4096))
    assert code == 1, err
    _check_model_not_written(tmp_path, err)


def test_saving_a_model_on_a_full_tmpfs(full_disk):
    _csv(full_disk / "d.csv")
    (full_disk / "m.pt").write_bytes(b"the previous model")
    code, _, err = _gpscale("fit", "--data", "d.csv", "--target", "y", "--max-iter", "2",
                            "-q", "--out", "m.pt", cwd=full_disk)
    assert code == 1, err
    _check_model_not_written(full_disk, err)
    assert "disk is full" in err


def test_predictions_file_on_a_full_tmpfs(model, full_disk):
    (full_disk / "p.csv").write_bytes(b"old predictions")
    code, _, err = _gpscale("predict", "--model", model / "m.pt", "--data",
                            model / "new.csv", "--out", "p.csv", cwd=full_disk)
    assert code == 1, err
    _one_error(err, "p.csv")
    assert (full_disk / "p.csv").read_bytes() == b"old predictions"
    assert [p.name for p in full_disk.iterdir() if p.name.startswith(".")] == []


# -- case 5 and 8: schedulers that do not answer, are not schedulers, or die ----------------
class _Server:
    """A TCP server on 127.0.0.1 that accepts every connection and then sends ``reply``
    (nothing: it never answers), keeping the connections open until closed."""

    def __init__(self, reply=b""):
        self.reply, self.conns = reply, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply:
                conn.sendall(self.reply)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def fit_args(tmp_path):
    _csv(tmp_path / "d.csv", n=200)
    return ["fit", "--data", "d.csv", "--target", "y", "--method", "rff", "--option",
            "num_features=16", "--max-iter", "2", "-q", "--out", "m.pt"]


def _fit_against(server, tmp_path, fit_args):
    """``gpscale fit --scheduler`` at ``server`` with a 2 s connect timeout; the server
    is closed afterwards. Returns (exit code, stderr)."""
    try:
        code, _, err = _gpscale(*fit_args, "--scheduler", server.address, cwd=tmp_path,
                                env=_env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s"),
                                timeout=90)
    finally:
        server.close()
    return code, err


def test_a_scheduler_that_never_answers_times_out_with_a_message(tmp_path, fit_args):
    server = _Server()
    t0 = time.monotonic()
    code, err = _fit_against(server, tmp_path, fit_args)
    assert code == 1, err
    _one_error(err, server.address, "did not answer", "2 s",
               "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT")
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "m.pt").exists()


def test_a_server_that_is_not_a_dask_scheduler(tmp_path, fit_args):
    server = _Server(reply=b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 50)
    code, err = _fit_against(server, tmp_path, fit_args)
    assert code == 1, err
    line = _one_error(err, server.address, "not a dask scheduler")
    assert "out of memory" not in line


@pytest.mark.slow
def test_a_scheduler_killed_mid_fit(tmp_path, fit_args):
    """A real scheduler and worker (the ``dask`` command); the scheduler is killed once
    the fit's L-BFGS is running: a one-line error naming the lost scheduler."""
    dask = Path(sys.executable).with_name("dask")
    if not dask.exists():
        pytest.skip("no dask command")
    _csv(tmp_path / "d.csv", n=3000)
    env = _env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s")
    sched = subprocess.Popen([str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--no-dashboard"], env=env, stderr=subprocess.PIPE, text=True)
    worker = None
    try:
        address = _wait_for_address(sched)
        worker = subprocess.Popen([str(dask), "worker", address, "--nthreads", "1",
                                   "--no-dashboard"], env=env, stderr=subprocess.DEVNULL)
        args = [a for a in fit_args if a != "-q"]
        args[args.index("--max-iter") + 1] = "500"
        args[args.index("--data") + 1] = str(tmp_path / "d.csv")  # read on the worker
        fit = subprocess.Popen([str(GPSCALE), *args, "--scheduler", address, "--progress",
                                "--option", "num_features=256"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _read_until(fit, "objective=")
        sched.kill()
        _, err = fit.communicate(timeout=120)
    finally:
        for p in (worker, sched):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert fit.returncode == 1, err
    line = _one_error(err, address, "lost")
    assert "AttributeError" not in line and "NoneType" not in line
    assert not (tmp_path / "m.pt").exists()


def _read_until(proc, text, seconds=120):
    """What ``proc`` wrote to stderr until ``text`` appeared (an evaluation finished)."""
    seen, t0 = "", time.time()
    while text not in seen and time.time() - t0 < seconds:
        got = os.read(proc.stderr.fileno(), 4096).decode()
        if not got:
            break
        seen += got
    assert text in seen, seen
    return seen


def _wait_for_address(sched, seconds=60):
    t0, seen = time.time(), ""
    while time.time() - t0 < seconds:
        line = sched.stderr.readline()
        seen += line
        if "Scheduler at:" in line:
            return line.split("Scheduler at:")[1].strip()
    raise AssertionError(f"the scheduler did not start: {seen}")


# -- case 7: --threads beyond the machine ---------------------------------------------------
def test_threads_beyond_the_cores_are_capped_with_a_warning(tmp_path):
    _csv(tmp_path / "d.csv", n=20)
    code, _, err = _gpscale("fit", "--data", "d.csv", "--target", "y", "--max-iter", "2",
                            "--threads", "100000", "--out", "m.pt", cwd=tmp_path, timeout=120)
    assert code == 0, err
    cores = len(os.sched_getaffinity(0))
    warning = [line for line in err.splitlines() if "--threads" in line]
    assert warning == [f"gpscale: warning: --threads 100000 is more than the {cores} CPU "
                       f"core(s) this process may use; using {cores}"], err


def test_thread_limit_caps_at_the_cores_available():
    before, cores = torch.get_num_threads(), len(os.sched_getaffinity(0))
    with pytest.warns(UserWarning, match="more than the"), thread_limit(cores + 3):
        assert torch.get_num_threads() == cores
    assert torch.get_num_threads() == before
    assert available_cores() == len(os.sched_getaffinity(0))


# -- case 8: foreign and damaged model files, out-of-range flags ----------------------------
def test_a_csv_given_as_the_model_is_one_line(model):
    (model / "t.csv").write_text("x,y\n1,2\n")
    for args in (["predict", "--model", "t.csv", "--data", "new.csv", "--out", "p.csv"],
                 ["info", "t.csv"]):
        code, _, err = _gpscale(*args, cwd=model)
        assert code == 1, err
        _one_error(err, "'t.csv' is not a gpscale model file")
        assert "weights_only" not in err


def _edited(model_dir, tmp_path, name, edit):
    """The model file edited, without its checksum (as a file written before checksums):
    the edit then reaches the checks below the checksum's (test_model_checksum.py)."""
    saved = torch.load(model_dir / "m.pt", weights_only=True)
    saved.pop("checksum")
    edit(saved)
    torch.save(saved, tmp_path / name)
    return tmp_path / name


@pytest.mark.parametrize("version, words", [
    (None, "no format version"), ("2", "format version '2'"), (0, "format version 0"),
    (-1, "format version -1"), (True, "format version True"), (2.0, "format version 2.0"),
])
def test_format_versions_no_gpscale_writes_are_damage(model, tmp_path, version, words):
    def edit(saved):
        if version is None:
            del saved["format_version"]
        else:
            saved["format_version"] = version

    path = _edited(model, tmp_path, "v.pt", edit)
    with pytest.raises(ValueError, match="damaged") as err:
        gpscale.load(path)
    assert words in str(err.value) and "upgrade" not in str(err.value)


def test_a_newer_format_version_says_upgrade(model, tmp_path):
    path = _edited(model, tmp_path, "v.pt", lambda s: s.update(format_version=3))
    with pytest.raises(ValueError, match="upgrade gpscale"):
        gpscale.load(path)


@pytest.mark.parametrize("key", ["x_mean", "x_scale", "y_mean", "y_scale"])
def test_a_nan_in_the_saved_scaler_is_damage(model, tmp_path, key):
    def edit(saved):
        value = saved["scaler"][key]
        saved["scaler"][key] = [float("nan")] + value[1:] if isinstance(value, list) \
            else float("nan")

    path = _edited(model, tmp_path, "nan.pt", edit)
    with pytest.raises(ValueError, match="damaged") as err:
        gpscale.load(path)
    assert key in str(err.value)


def test_damaged_files_on_the_command_line(model, tmp_path):
    nan = _edited(model, tmp_path, "nan.pt",
                  lambda s: s["scaler"].update(x_mean=[float("nan")] * 2))
    two = _edited(model, tmp_path, "two.pt", lambda s: s.update(format_version="2"))
    for path in (nan, two):
        code, _, err = _gpscale("predict", "--model", path, "--data", "new.csv", "--out",
                                tmp_path / "p.csv", cwd=model)
        assert code == 1, err
        line = _one_error(err, "damaged")
        assert "before fitting" not in line and "upgrade" not in line


@pytest.mark.parametrize("flags, words", [
    (["--dtype", "float16"], "--dtype"),
    (["--seed", str(2**64)], "--seed"),
    (["--seed", "-1"], "--seed"),
])
def test_out_of_range_flags_are_usage_errors(tmp_path, flags, words):
    _csv(tmp_path / "d.csv", n=20)
    code, _, err = _gpscale("fit", "--data", "d.csv", "--target", "y", *flags, "--out",
                            "m.pt", cwd=tmp_path)
    assert code == 2, err
    _one_error(err, words)
    assert not (tmp_path / "m.pt").exists()


def test_the_largest_seed_is_accepted(tmp_path, capsys):
    _csv(tmp_path / "d.csv", n=20)
    assert cli.main(["fit", "--data", str(tmp_path / "d.csv"), "--target", "y", "--method",
                     "rff", "--option", "num_features=8", "--max-iter", "1", "-q",
                     "--seed", str(2**64 - 1), "--out", str(tmp_path / "m.pt")]) == 0, \
        capsys.readouterr().err


def test_every_error_is_one_line(capsys, monkeypatch, tmp_path):
    """Whatever text an error carries (torch's are paragraphs), one line comes out."""
    _csv(tmp_path / "d.csv", n=20)

    def fails(*args, **kwargs):
        raise RuntimeError("first line\n\nsecond line\n  third")

    monkeypatch.setattr(gpscale.api, "run", fails)
    assert cli.main(["fit", "--data", str(tmp_path / "d.csv"), "--target", "y",
                     "--out", str(tmp_path / "m.pt")]) == 1
    assert capsys.readouterr().err == ("gpscale: error: RuntimeError: first line second "
                                       "line third\n")


# -- case 9: SIGTERM ------------------------------------------------------------------------
def _dotfiles(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_sigterm_during_a_fit_exits_143_and_keeps_the_old_model(tmp_path):
    _csv(tmp_path / "d.csv", n=800)
    old = tmp_path / "m.pt"
    old.write_bytes(b"the previous model")
    fit = subprocess.Popen([str(GPSCALE), "fit", "--data", "d.csv", "--target", "y",
                            "--max-iter", "500", "--out", "m.pt", "--progress"],
                           cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    _read_until(fit, "objective=")
    fit.send_signal(signal.SIGTERM)
    _, err = fit.communicate(timeout=120)
    assert fit.returncode == 143, err
    assert "terminated" in err.splitlines()[-1]
    assert old.read_bytes() == b"the previous model"
    assert _dotfiles(tmp_path) == []


def test_sigterm_while_writing_predictions_leaves_no_temporary_file(model, tmp_path):
    """SIGTERM while the output's temporary file exists (the predictions are being
    written): it is removed, the earlier output stays, the status is 143."""
    _csv(tmp_path / "big.csv", n=300_000, seed=2)
    old = tmp_path / "p.csv"
    # the temporary file lives for the write, about 0.7 s here: a run whose poll never
    # saw it (a busy machine) is tried again; one that failed is reported as it failed
    for _ in range(3):
        old.write_bytes(b"old predictions")
        pred = subprocess.Popen([str(GPSCALE), "predict", "--model", model / "m.pt",
                                 "--data", "big.csv", "--out", "p.csv"], cwd=tmp_path,
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        t0 = time.time()
        while not _dotfiles(tmp_path) and pred.poll() is None and time.time() - t0 < 120:
            time.sleep(0.002)
        if _dotfiles(tmp_path):
            break
        _, err = pred.communicate(timeout=120)
        assert pred.returncode == 0, f"predict failed before writing: {err}"
    assert _dotfiles(tmp_path), "the temporary output never appeared in three runs"
    pred.send_signal(signal.SIGTERM)
    _, err = pred.communicate(timeout=120)
    assert pred.returncode == 143, err
    assert old.read_bytes() == b"old predictions"
    assert _dotfiles(tmp_path) == []
