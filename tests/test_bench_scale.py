"""Smoke test of ``gpscale bench scale`` at a tiny size: data written by a real cluster's
workers, passes in process and on 2 worker processes, JSON lines and a report."""

import json

import pytest

from benchmarks import main as bench_main

pytest.importorskip("distributed")


def test_scale_quick_smoke(tmp_path, capsys):
    out = tmp_path / "out"
    code = bench_main(["scale", "--quick", "--n", "3000", "--methods", "rff", "--workers",
                       "0", "2", "--p", "32", "--max-iter", "2", "--reference-rows", "1000",
                       "--test-rows", "500", "--data-dir", str(tmp_path / "data"),
                       "--out", str(out)])
    assert code in (0, None)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    rows = [r for r in lines if r.get("method") == "rff" and "stats_pass_s" in r]
    assert {r["workers"] for r in rows} == {0, 2}
    here, there = (next(r for r in rows if r["workers"] == w) for w in (0, 2))
    assert abs(there["nlml_theta0"] - here["nlml_theta0"]) <= 1e-10 * abs(here["nlml_theta0"])
    assert len(there["worker_peak_rss_gib"]) == 2 and there["client_peak_rss_gib"] > 0
    assert there["test_rmse"] < 1.0 and "fit_s" in there
    ref = next(r for r in lines if r.get("workers") == "in memory")
    assert ref["ref_rows"] == 1000
    assert (out / "scale.md").exists() and (out / "scale.jsonl").exists()
    profile = next(r for r in lines if r.get("workers") == "profile")
    assert profile["profile_rows"] == 3000 and profile["profile_gemm_gflops"] > 0
    stages = ("read", "scale", "features", "gram", "proj")
    assert profile["cpu_pass_over_floor"] == pytest.approx(
        sum(profile[f"cpu_{s}_over_floor"] for s in stages))
    assert "thread CPU time" in (out / "scale.md").read_text()
