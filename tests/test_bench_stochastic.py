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
