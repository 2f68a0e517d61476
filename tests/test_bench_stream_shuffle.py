"""Smoke test of ``gpscale bench stream-shuffle`` (tiny configuration, into a tmp dir)."""

import json
import math

import benchmarks.stream_shuffle  # noqa: F401  (registers "stream-shuffle")
from benchmarks import main


def test_stream_shuffle_bench_tiny(tmp_path, data_dir):
    rc = main(["stream-shuffle", "--quick", "--max-train", "600", "--row-group", "100",
               "--buffers", "1", "full", "--num-features", "16", "--batch-size", "50",
               "--methods", "scgd", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = (tmp_path / "stream-shuffle.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    assert row["summary"] is True and row["n_train"] == 600
    assert (tmp_path / "stream-shuffle.md").exists()
    assert (tmp_path / "stream-shuffle.png").stat().st_size > 0
    recs = [json.loads(s) for s in lines[:-1]]
    fits = [r for r in recs if r["kind"] == "fit"]
    assert [(r["source"], r["buffer_rows"]) for r in fits] == [
        ("permutation", None), ("stream", 100), ("stream", 600)]
    assert all(math.isfinite(r["nlml"]) and 0 < r["test_rmse"] < 2 and r["epoch_s"] > 0
               for r in fits)
    assert len([r for r in recs if r["kind"] == "read"]) == 3
    for key in ("nlml_sorted_scgd_permutation", "dnlml_sorted_scgd_buffer_1",
                "dnlml_sorted_scgd_buffer_full"):
        assert math.isfinite(row[key]), key
    assert math.isclose(row["dnlml_sorted_scgd_buffer_full"],
                        fits[2]["nlml"] - fits[0]["nlml"], rel_tol=1e-12)
    assert list(row["targets"]) == ["|Δnlml| scgd sorted full buffer <= 0.01"]
    comp = [r for r in recs if r["kind"] == "comparison"]
    assert [r["buffer_groups"] for r in comp] == ["permutation", "1", "full"]
    assert "dnlml" not in comp[0] and math.isclose(comp[2]["dnlml"],
                                                   row["dnlml_sorted_scgd_buffer_full"])
    assert comp[1]["epoch_s_ratio"] > 0 and comp[1]["test_rmse"] == fits[1]["test_rmse"]
