"""Smoke tests of the CholQR continuous-input benchmarks (tiny configurations)."""

import json
import math

import benchmarks.cholqr  # noqa: F401  (registers cholqr-snelson / cholqr-kin40k)
from benchmarks import main


def _summary(out, name):
    lines = (out / f"{name}.jsonl").read_text().splitlines()
    row = json.loads(lines[-1])
    assert row["summary"] is True
    assert (out / f"{name}.md").exists() and (out / f"{name}.png").stat().st_size > 0
    return row, [json.loads(x) for x in lines[:-1]]


def test_snelson_quick(tmp_path, data_dir):
    rc = main(["cholqr-snelson", "--quick", "--m", "5", "--m-sub", "3", "--epochs", "2",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    row, recs = _summary(tmp_path, "cholqr-snelson")
    fits = [r for r in recs if r["kind"] == "fit"]
    assert {r["method"] for r in fits} >= {"cholqr-mle", "cholqr-var", "spgp", "spgp-uniform"}
    for r in fits:
        assert math.isfinite(r["value_nats"]) and len(r["inducing_x"]) == r["m"]
    assert math.isfinite(row["vfe_cholqr_var_sub"])
    clumps = [r for r in recs if r["kind"] == "spgp-clumps"]
    assert len(clumps) == 5 and all(math.isfinite(r["value_nats"]) for r in clumps)
    assert min(r["value_nats"] for r in clumps) <= row["fitc_spgp_clumps_median_sub"]


def test_kin40k_quick(tmp_path, data_dir):
    rc = main(["cholqr-kin40k", "--quick", "--n-train", "120", "--n-test", "200",
               "--m", "8", "--methods", "cholqr-vfe", "random", "gpytorch-sgpr",
               "--epochs", "1", "--adam-steps", "3", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    row, recs = _summary(tmp_path, "cholqr-kin40k")
    assert row["m"] == 8
    for k in ("smse_cholqr_vfe", "smse_gpytorch_sgpr", "s_cholqr_vfe", "s_gpytorch_sgpr"):
        assert row[k] is not None and math.isfinite(row[k]), k
    assert 0 < row["smse_cholqr_vfe"] < 2
    assert {r["method"] for r in recs if r.get("kind") == "fit"} == {
        "cholqr-vfe", "random", "gpytorch-sgpr"}


def test_kin40k_versus_titsias_quick(tmp_path, data_dir):
    """titsias-16 beside cholqr-vfe gives a ``versus`` row: bounds, times, and the time
    CholQR took to reach the greedy bound (equal m, equal objective)."""
    rc = main(["cholqr-kin40k", "--quick", "--n-train", "150", "--n-test", "100",
               "--m", "8", "--methods", "cholqr-vfe", "titsias-16", "--epochs", "3",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    _, recs = _summary(tmp_path, "cholqr-kin40k")
    (vs,) = [r for r in recs if r.get("kind") == "versus"]
    assert vs["m"] == 8 and vs["greedy"] == "titsias-16"
    assert math.isfinite(vs["bound_cholqr"]) and math.isfinite(vs["bound_greedy"])
    assert vs["speedup_equal_m"] > 0
    if vs["bound_cholqr"] <= vs["bound_greedy"]:
        assert 0 <= vs["s_cholqr_to_greedy_bound"] <= vs["s_cholqr"]


def test_reach_time():
    from benchmarks.cholqr import reach_time

    trace = [(0.0, 10.0), (1.5, 7.0), (3.0, 5.0)]
    assert reach_time(trace, 7.0) == 1.5 and reach_time(trace, 4.0) is None
