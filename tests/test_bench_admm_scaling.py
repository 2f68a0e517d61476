"""``admm-scaling`` helpers and a tiny synthetic run (timings not asserted)."""

import argparse
import json
import math

import numpy as np
import pytest
import torch

from benchmarks import Recorder
from benchmarks.admm_scaling import run_scaling, slope


def test_slope_recovers_a_power_law_and_ignores_small_n():
    ns = [500, 1000, 2000, 4000, 8000]
    ts = [3e-7 * n**2.0 for n in ns]
    ts[0] = 1.0  # below n_min = 1000: must not count
    assert slope(ns, ts) == pytest.approx(2.0, abs=1e-12)
    assert slope(ns, [1e-9 * n**3 for n in ns], n_min=0) == pytest.approx(3.0, abs=1e-12)
    assert slope([500, 1000], [1.0, 2.0]) is None  # one point at n >= 1000


@pytest.mark.parametrize("tangent", [False, True])
def test_scaling_bench_on_tiny_synthetic_sets(tmp_path, capsys, tangent):
    args = argparse.Namespace(n=[40, 80], datasets=["synthetic"], exact_max_n=None,
                              synthetic_max_n=None, repeats=1, no_gpytorch=True,
                              quick=True, device=torch.device("cpu"), tangent=tangent)
    rec = Recorder("admm-scaling", None, "cpu")
    run_scaling(args, rec)
    rec.finish()
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    iters = [r for r in lines if r.get("kind") == "iteration"]
    assert {(r["n"], r["method"]) for r in iters} == {(40, "admm"), (80, "admm"),
                                                      (40, "exact"), (80, "exact")}
    assert all(r["median_s"] > 0 for r in iters)
    factors = [r for r in lines if r.get("kind") == "scaling_factor"]
    assert {r["method"] for r in factors} == {"admm", "exact"}
    for r in factors:
        t = {x["n"]: x["median_s"] for x in iters if x["method"] == r["method"]}
        assert r["factor"] == pytest.approx((t[80] / t[40]) / 2.0)
    summary = lines[-1]
    assert summary["summary"] is True and summary["n_max"] == 80
    assert summary["slope_admm_synthetic"] is None  # no n >= 1000: no fit
    assert math.isfinite(summary["admm_iter_s_at_80_synthetic"])
    assert any("tangent steps" in note for note in rec.notes) == tangent


def test_holdout_cv_reference_minimises_the_dense_cv_loss():
    from benchmarks.admm_scaling import _rbf_ard, holdout_cv_reference
    from gpscale.train.admm import holdout_split

    g = torch.Generator().manual_seed(0)
    X = torch.rand(80, 2, generator=g, dtype=torch.float64) * 4
    y = torch.sin(X.sum(1)) + 0.1 * torch.randn(80, generator=g, dtype=torch.float64)
    model = _rbf_ard(X, y)
    iT, iV = holdout_split(80, 0.5, 0)

    def cv(m):
        with torch.no_grad():
            C = m.kernel(X[iT]) + m.noise * torch.eye(len(iT), dtype=torch.float64)
            e = y[iV] - m.kernel(X[iV], X[iT]) @ torch.linalg.solve(C, y[iT])
            return float(e @ e) / len(iV)

    def cv_grad(m):  # gradient of the dense CV loss in the raw parameters
        params = [q for q in m.parameters() if q.requires_grad]
        C = m.kernel(X[iT]) + m.noise * torch.eye(len(iT), dtype=torch.float64)
        e = y[iV] - m.kernel(X[iV], X[iT]) @ torch.linalg.solve(C, y[iT])
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(e @ e, params)])

    start, g0 = cv(model), cv_grad(model).norm()
    out = holdout_cv_reference(model, seed=0)
    assert out["cv_loss"] < 0.8 * start
    assert cv_grad(model).norm() < 1e-4 * g0  # a stationary point of the CV loss
    # the ML rescaling afterwards leaves the CV loss (a function of the mean) unchanged
    assert cv(model) == pytest.approx(out["cv_loss"], rel=1e-6)


def test_synthetic_bench_tangent_variant_converges_on_the_paper_eps(capsys):
    """``admm-synthetic --tangent``: the tangent θ-step stops on the paper's ε = 1e-2
    (converged, not max_iter) and the summary says which variant ran."""
    from benchmarks.admm import run as run_synthetic

    args = argparse.Namespace(kernels=["se"], n=[60], trials=1,
                              methods=["admm-hocv", "exact"], noise=0.1, init_scale=1.2,
                              init_noise=0.2, rho=5.0, eps=1e-4, max_iter=50,
                              adaptive_rho=False, tangent=True, quick=True,
                              device=torch.device("cpu"))
    rec = Recorder("admm-synthetic", None, "cpu")
    run_synthetic(args, rec)
    rec.finish()
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    trials = {r["method"]: r for r in lines if r.get("kind") == "trial"}
    assert trials["admm-hocv"]["reason"] == "converged"
    assert trials["admm-hocv"]["iterations"] < 50
    summary = lines[-1]
    assert summary["tangent"] is True and summary["eps"] == 1e-2


def test_paper_table1_matches_the_paper_and_its_own_z():
    """PAPER_TABLE1 equals Table 1 of ../shared/papers/gpcv_admm.txt (all 9 rows, both
    methods, both MSE columns), and the target's statistic on the paper's own
    GPCV-ADMM rows is as computed by hand: ≤ 2 only in the three SE cells."""
    import re
    from pathlib import Path

    from benchmarks.admm import PAPER_TABLE1, paper_z

    paper = Path(__file__).resolve().parents[2] / "shared" / "papers" / "gpcv_admm.txt"
    if not paper.exists():
        pytest.skip(f"paper text not found at {paper}")
    lines = paper.read_text().splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith("Kernel Setting Size"))
    rows = lines[start + 1:start + 10]
    kernels = ["se"] * 3 + ["lp"] * 3 + ["se+lp"] * 3
    for kernel, row in zip(kernels, rows):
        n = int(re.search(r"(?:^| )(500|1000|2000) \[", row).group(1))
        groups = re.findall(r"\[([^\]]*)\]", row)
        cells = [[tuple(map(float, m)) for m in re.findall(r"([\d.]+)\(([\d.]+)\)", g)]
                 for g in groups]
        mses = tuple(map(float, row.rsplit("]", 1)[1].split()))
        assert (cells[0], cells[1], *mses) == PAPER_TABLE1[kernel][n], row
    assert paper_z("se", 500) == pytest.approx(0.04 / 0.054)
    assert paper_z("lp", 500) == pytest.approx(0.16 / 0.023)
    assert paper_z("se+lp", 2000) == pytest.approx(0.94 / 0.075)
    ok = sorted((k, n) for k in PAPER_TABLE1 for n in PAPER_TABLE1[k] if paper_z(k, n) <= 2)
    assert ok == [("se", 500), ("se", 1000), ("se", 2000)]
    assert paper_z("se", 4000) is None


@pytest.mark.parametrize("dense_gib,blocks", [(1.0, "dense"), (0.0, "chunked")])
def test_memory_bench_runs_every_path_with_dense_and_chunked_blocks(capsys, dense_gib, blocks):
    """``admm-memory`` at a tiny n: one capped fit in a child process, with the kernel
    blocks held densely or recomputed by row blocks; a finite prediction and a peak
    RSS at least the data-only RSS."""
    from benchmarks.admm_memory import run as run_memory

    args = argparse.Namespace(n=[300], d=3, iters=1, cg_cap=2, dense_gib=dense_gib,
                              quick=True, device=torch.device("cpu"))
    rec = Recorder("admm-memory", None, "cpu")
    run_memory(args, rec)
    rec.finish()
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    row = next(r for r in lines if r.get("n") == 300 and "peak_mem_gib" in r
               and not r.get("summary"))
    assert row["blocks"] == blocks and row["finite"] is True and row["admm_iters"] == 1
    assert row["peak_mem_gib"] >= row["rss_data_gib"] > 0
    assert lines[-1]["summary"] and lines[-1]["blocks"] == blocks


def test_co2_quick_reports_both_criteria_and_their_dense_references(tmp_path, data_dir):
    """``admm-co2 --quick``: every row finite; the time-ordered hold-out and the two
    dense CV references are there, and the references are not counted as ADMM
    variants."""
    from benchmarks import main

    rc = main(["admm-co2", "--quick", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "admm-co2.jsonl").read_text().splitlines()]
    fits = {r["method"]: r for r in lines if r.get("kind") == "fit"}
    assert {"admm-hocv (tangent θ-step, last 20 % validates)",
            "hold-out CV optimum, random ½ (dense reference)",
            "hold-out CV optimum, last 20 % (dense reference)"} <= set(fits)
    assert all(math.isfinite(r["smse"]) and r["detrended_sd"] >= 0 for r in fits.values())
    assert lines[-1]["test_detrended_sd"] > 1.0  # ppm: the seasonal cycle of the test years
    assert not lines[-1]["best_variant"].startswith("hold-out")
    assert fits["hold-out CV optimum, last 20 % (dense reference)"]["reason"] == \
        "L-BFGS (dense)"


def test_detrended_sd_removes_a_line_and_measures_the_rest():
    from benchmarks.admm_scaling import _detrended_sd

    x = np.linspace(2009, 2016, 85)
    assert _detrended_sd(x, 3.0 + 2.0 * x) == pytest.approx(0.0, abs=1e-9)
    wave = np.sin(2 * np.pi * x)  # whole periods: nearly orthogonal to the line
    assert _detrended_sd(x, 1.0 - x + wave) == pytest.approx(np.std(wave), rel=0.02)


def test_quality_quick_runs_the_tangent_hold_out_and_k_fold_variants(tmp_path, data_dir):
    """``admm-quality`` on 300 kin40k rows with the two tangent variants and the dense
    reference: finite metrics for every row, and the summary's ratios are the rows'."""
    from benchmarks import main

    rc = main(["admm-quality", "--quick", "--n", "300", "--test-n", "200", "--max-iter", "3",
               "--variants", "admm-hocv (tangent θ-step)", "admm-kfold (tangent θ-step)",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in
             (tmp_path / "admm-quality.jsonl").read_text().splitlines()]
    fits = {r["method"]: r for r in lines if r.get("kind") == "fit" and r["fit_s"] > 0}
    assert {"admm-hocv (tangent θ-step)", "admm-kfold (tangent θ-step)",
            "exact ML-II (L-BFGS)"} <= set(fits)
    assert all(math.isfinite(r["rmse"]) and math.isfinite(r["nlpd"]) for r in fits.values())
    s = lines[-1]
    assert s["admm_rmse"] == fits[s["best_variant"]]["rmse"]
    assert s["exact_s"] == fits["exact ML-II (L-BFGS)"]["fit_s"]
    assert any(r.get("kind") == "reference" for r in lines)
