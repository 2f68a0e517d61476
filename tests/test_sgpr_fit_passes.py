"""``method="sgpr"`` on rows read in passes: Parquet files in, a saved model out; the
model at the fitted θ and Z against today's in-memory SGPR; the refinement's steps
against the in-memory L-BFGS; the line past which rows held in memory are read in
passes; refusals."""

import numpy as np
import pytest
import torch
from parquet_data import make_data, write_parquet

import gpscale
from gpscale.io.rows import Rows, TensorPartition
from gpscale.kernels import Linear, make_kernel
from gpscale.methods import sgpr as sgpr_method
from gpscale.models import SGPR, StreamedSGPR
from gpscale.train import fit_lbfgs

SMALL = {"m": 12, "max_iter": 15, "subsample": 150, "refine": 3, "seed": 1,
         "kernel": "rbf-ard"}


def twin(pred, X, y):
    """Today's SGPR on the standardised rows in memory at the streamed model's θ, Z, σ²."""
    Xs = torch.as_tensor(pred.scaler.transform_x(X))
    ys = torch.as_tensor(pred.scaler.transform_y(y))
    m = pred.model
    held = SGPR(m.kernel, Xs, ys, m.Z.detach(), noise=float(m.noise.detach()))
    return held, Xs


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    X, y = make_data(600, seed=3)
    folder = write_parquet(tmp_path_factory.mktemp("rows") / "train", X, y, parts=3,
                           row_group=90)
    return gpscale.fit(folder, target="y", method="sgpr", **SMALL), X, y


def test_parquet_rows_fit_a_frozen_model_equal_to_in_memory_sgpr_at_its_theta(fitted):
    pred, X, y = fitted
    model = pred.model
    assert isinstance(model, StreamedSGPR) and model.rows is None and model.n == 600
    assert model.m == 12 and pred.method == "sgpr"
    phases = [h["phase"] for h in pred.result.history]
    assert phases[0] == "sample" and phases[-1] == "all rows"
    held, Xs = twin(pred, X, y)
    with torch.no_grad():
        torch.testing.assert_close(model.objective(), held.objective(), rtol=1e-10, atol=0)
    for a, b in zip(model.predict(Xs[:80], include_noise=True),
                    held.predict(Xs[:80], include_noise=True)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    rmse = float(np.sqrt(np.mean((pred.predict(X) - y) ** 2)))
    assert rmse < 0.3 * float(np.std(y)), rmse


def test_saved_model_keeps_statistics_not_rows_and_its_checksum_holds(fitted, tmp_path):
    pred, X, _ = fitted
    pred.save(tmp_path / "m.pt")
    back = gpscale.load(tmp_path / "m.pt")
    assert isinstance(back.model, StreamedSGPR) and back.model.n == 600
    for a, b in zip(back.predict(X[:50], return_std=True), pred.predict(X[:50], return_std=True)):
        np.testing.assert_array_equal(a, b)
    saved = torch.load(tmp_path / "m.pt", weights_only=True)
    assert sorted(k for k in saved["state_dict"] if k.startswith("stat_")) == [
        "stat_gram", "stat_n", "stat_proj", "stat_yy"]
    assert all(v.numel() <= 12 * 12 + 12 * 3 for v in saved["state_dict"].values())
    saved["state_dict"]["stat_proj"] = saved["state_dict"]["stat_proj"] * 1.001
    torch.save(saved, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="damaged"):
        gpscale.load(tmp_path / "bad.pt")


def test_refinement_takes_the_in_memory_lbfgs_steps():
    X, y = make_data(300, seed=5)
    Xt = torch.as_tensor((X - X.mean(0)) / X.std(0))
    yt = torch.as_tensor((y - y.mean()) / y.std())
    Z = Xt[::25].clone()
    held = SGPR(make_kernel("rbf-ard", 3), Xt, yt, Z, noise=0.2)
    parts = (TensorPartition(Xt[:170], yt[:170]), TensorPartition(Xt[170:], yt[170:]))
    rows = Rows(parts, 3, rows=64)  # two partitions read in chunks of 64 rows
    streamed = StreamedSGPR(make_kernel("rbf-ard", 3), Z, rows=rows, noise=0.2)
    r1 = fit_lbfgs(held, held.objective, max_iter=6, warn=False)
    r2 = fit_lbfgs(streamed, streamed.objective, max_iter=6, warn=False)
    assert r1.n_evals == r2.n_evals
    assert r2.objective == pytest.approx(r1.objective, rel=1e-9)
    torch.testing.assert_close(streamed.Z.detach(), held.Z.detach(), rtol=1e-7, atol=1e-8)


def test_held_rows_past_the_line_are_read_in_passes(monkeypatch):
    X, y = make_data(400, seed=6)
    Xt, yt = torch.as_tensor(X / X.std(0)), torch.as_tensor(y - y.mean())
    options = {k: v for k, v in SMALL.items() if k != "kernel"}
    today, _ = sgpr_method.fit_sgpr_method(Xt, yt, make_kernel("rbf-ard", 3), **options)
    assert type(today) is SGPR  # under the line: today's path, every row held
    monkeypatch.setattr(sgpr_method, "SGPR_HELD_ROWS", 399)
    past, result = sgpr_method.fit_sgpr_method(Xt, yt, make_kernel("rbf-ard", 3), **options)
    assert type(past) is StreamedSGPR and past.rows is not None
    assert result.history[-1]["phase"] == "all rows"
    kept, _ = sgpr_method.fit_sgpr_method(Xt, yt, make_kernel("rbf-ard", 3), passes=False,
                                          **options)
    assert type(kept) is SGPR


def test_refusals_before_any_pass(tmp_path):
    X, y = make_data(200, seed=7)
    folder = write_parquet(tmp_path / "train", X, y, parts=2)
    with pytest.raises(ValueError, match="needs a stationary kernel"):
        gpscale.fit(folder, target="y", method="sgpr", kernel=Linear(), m=8)
    with pytest.raises(ValueError, match="passes=False needs the rows in memory"):
        gpscale.fit(folder, target="y", method="sgpr", passes=False, m=8)
    with pytest.raises(ValueError, match="passes must be"):
        gpscale.fit(X, y, method="sgpr", passes="yes", m=8)
    with pytest.raises(ValueError, match="subsample"):
        gpscale.fit(folder, target="y", method="sgpr", subsample=0, m=8)
