"""``precond`` bench: a tiny run on real rows (θ fixed to skip the fit; no timings asserted)."""

import argparse
import json

import torch

from benchmarks import Recorder
from benchmarks import precond as bench


def test_precond_bench_records_every_kind_rank_and_noise(data_dir, monkeypatch, capsys):
    theta = {"lengthscale": torch.full((8,), 1.5, dtype=torch.float64),
             "outputscale": torch.tensor(1.0, dtype=torch.float64),
             "noise": torch.tensor(0.01, dtype=torch.float64)}
    monkeypatch.setattr(bench, "_theta", lambda X, y: theta)
    args = argparse.Namespace(datasets=["kin40k"], n=[150, 300], ranks=[10, 40],
                              small_noise=1e-4, tol=1e-6, max_iter=3000, quick=True,
                              device=torch.device("cpu"))
    rec = Recorder("precond", None, "cpu")
    bench.run(args, rec)
    rec.finish()
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    solves = [r for r in lines if r.get("kind") == "solve"]
    # 2 sizes x 2 noise levels x (none + 2 ranks x 2 kinds)
    assert len(solves) == 2 * 2 * 5 and all(r["converged"] for r in solves)
    summary = lines[-1]
    assert summary["summary"] and summary["iters_none_kin40k_small"] >= \
        summary["iters_pivchol_kin40k_small"]
    assert {r["preconditioner"] for r in solves} == {"none", "pivchol", "grief"}
