"""Smoke test of ``gpscale bench stochastic`` (tiny configuration, into a tmp dir)."""

import json
import math

import gpscale.bench.stochastic  # noqa: F401  (registers "stochastic")
from gpscale.bench import main


def test_stochastic_bench_tiny(tmp_path, data_dir):
    rc = main(["stochastic", "--quick", "--max-train", "150", "--epochs", "1",
               "--batch-sizes", "16", "32", "--fullbatch-iters", "3", "--threads", "1",
               "--out", str(tmp_path)])
    assert rc == 0
    lines = (tmp_path / "stochastic.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    assert row["summary"] is True
    assert (tmp_path / "stochastic.md").exists()
    assert (tmp_path / "stochastic.png").stat().st_size > 0
    assert row["dataset"] == "pumadyn32nm" and row["batch"] == 32
    for key in ("nlml_minimax", "nlml_scgd", "nlml_bsgd", "nlml_svgp", "nlml_fullbatch"):
        assert row[key] is not None and math.isfinite(row[key]), key
    fits = [json.loads(s) for s in lines[:-1]]
    assert {r["method"] for r in fits if r.get("kind") == "fit"} == {
        "minimax", "scgd", "bsgd", "svgp"}
    assert len(row["targets"]) == 4


def test_stochastic_bench_rff_kernel_rows(tmp_path, data_dir):
    """The rff kernel (RBF-ARD Fourier features on the raw inputs) runs beside the deep
    kernel: its summary fields carry a prefix and it gets its own four targets."""
    rc = main(["stochastic", "--quick", "--max-train", "120", "--epochs", "1",
               "--batch-sizes", "32", "--fullbatch-iters", "3", "--kernels", "nn-linear",
               "rff", "--rff-features", "16", "--methods", "minimax", "scgd",
               "--lr-schedule", "cosine", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = (tmp_path / "stochastic.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    assert math.isfinite(row["nlml_minimax"]) and math.isfinite(row["rff_nlml_minimax"])
    assert math.isfinite(row["rff_nlml_fullbatch"]) and row["rff_kernel"] == "rff"
    assert len(row["targets"]) == 8
    full = [json.loads(s) for s in lines[:-1] if json.loads(s).get("kind") == "fullbatch"]
    assert {r["kernel"] for r in full} == {"nn-linear", "rff"}
    assert all(math.isfinite(r["train_rmse"]) for r in full)
    fits = [json.loads(s) for s in lines[:-1] if json.loads(s).get("kind") == "fit"]
    assert fits and all(r["lr_schedule"] == "cosine" for r in fits)
