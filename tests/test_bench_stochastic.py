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
    # pumadyn32nm is not in the paper's tables; RMSE in y's units is ours, always there
    assert all(r["paper_nlml"] is None and r["rmse_y"] > 0 for r in fits
               if r.get("kind") == "fit")
    assert "protocol:" not in (tmp_path / "stochastic.md").read_text()  # the paper's
    # NLML per point in y's units: the standardised one plus log sd(y), the same shift
    # for every row of a data set
    shifts = {round(r["nlml_y"] - r["nlml"], 12) for r in fits
              if r.get("kind") in ("fit", "fullbatch")}
    from gpscale.data import load_uci
    assert len(shifts) == 1
    assert math.isclose(shifts.pop(), math.log(load_uci("pumadyn32nm").scaler.y_scale),
                        rel_tol=1e-9, abs_tol=1e-12)


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
    assert ("protocol: every method ran adadelta with a cosine learning rate"
            in (tmp_path / "stochastic.md").read_text())


def test_paper_tables_are_copied_faithfully():
    """Every value of PAPER_NLML / PAPER_RMSE appears, in the paper's column order, on
    the paper's row for that set in the table block for that batch size."""
    import re
    from pathlib import Path

    import pytest

    from gpscale.bench.stochastic import PAPER_NLML, PAPER_RMSE, _paper_spread, paper_value

    paper = Path(__file__).resolve().parents[2] / "shared" / "papers" / "unbiased_stochastic.txt"
    if not paper.exists():
        pytest.skip(f"paper text not found at {paper}")
    lines = paper.read_text().splitlines()

    def block(title: str) -> list[str]:  # the title, two header lines, then rows
        start = next(i for i, s in enumerate(lines) if s.startswith(title)) + 3
        end = next(i for i in range(start, len(lines)) if "±" not in lines[i])
        return lines[start:end]

    blocks = [(PAPER_NLML, "nn-linear", block("Table 2:")),
              (PAPER_NLML, "nn-rbf", block("Table 3:")),
              (PAPER_RMSE, "nn-linear", block("Table 4:")),
              (PAPER_RMSE, "nn-rbf", block("Table 5:"))]
    checked = 0
    for table, kernel, rows in blocks:
        batch = None
        for row in rows:
            head = re.match(r"^(\d+) ", row)
            if head:
                batch, row = int(head.group(1)), row[head.end():]
            name = row.split(" ")[0]
            key = (kernel, name, batch)
            if key not in table:
                continue
            cells = re.findall(r"(-?\d*\.\d+)±\\pm(\d*\.\d+)", row)
            assert [(float(m), float(s)) for m, s in cells] == list(table[key]), key
            checked += 1
    assert checked == len(PAPER_NLML) + len(PAPER_RMSE) == 36
    assert paper_value(PAPER_NLML, "nn-linear", "kin40k", 32, "scgd") == "-1.760 ± 0.090"
    assert paper_value(PAPER_NLML, "nn-linear", "pumadyn32nm", 32, "scgd") is None
    # MINIMAX on kin40k, NN + linear: -1.713, -1.654, -1.590 at batch 32, 64, 128
    assert _paper_spread("nn-linear", "kin40k", [32, 64, 128, 512], "minimax").endswith(
        "its 3 of them: 0.123)")
    assert _paper_spread("nn-linear", "kin40k", [32, 512], "minimax") == ""
