"""The benchmark harness and a tiny run of ``gpscale bench exact`` (numbers not asserted)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import benchmarks as bench
from benchmarks import Recorder, time_call

SUMMARY_FIELDS = ("n", "ours_iter_s", "gpytorch_cholesky_iter_s", "gpytorch_cg_iter_s",
                  "nlml_ours", "nlml_sklearn_at_same_theta_rel_err",
                  "ours_over_gpytorch_cholesky", "ours_over_gpytorch_cg")


def _lines(text):
    return [json.loads(line) for line in text.strip().splitlines()]


def test_recorder_writes_json_lines_summary_last_and_files(tmp_path, capsys):
    rec = Recorder("demo", tmp_path, "cpu", command="gpscale bench demo")
    rec.record(kind="iteration", method="a", n=10, median_s=0.5)
    rec.record(kind="iteration", method="b", n=10, median_s=float("nan"),
               value=torch.tensor(2.0))
    rec.summary(n=10, ratio=0.25)
    assert rec.target("ratio", 0.25, 0.2) is False
    assert rec.target("ratio", 0.25, 1.0) is True
    rec.note("a note")
    paths = rec.finish(plot=lambda fig, records, summary: fig.add_subplot(111).plot([1, 2]))

    out = _lines(capsys.readouterr().out)
    assert len(out) == 3 and out[-1]["summary"] is True
    assert all("summary" not in r for r in out[:-1])
    for r in out:
        assert r["bench"] == "demo" and r["device"] == "cpu"
        assert r["torch"] == torch.__version__ and r["threads"] == torch.get_num_threads()
    assert out[1]["median_s"] is None and out[1]["value"] == 2.0  # NaN -> null; tensor -> float
    assert out[-1]["ratio"] == 0.25 and out[-1]["all_targets_met"] is False

    assert set(paths) == {"jsonl", "md", "png"}
    assert _lines((tmp_path / "demo.jsonl").read_text()) == out
    md = (tmp_path / "demo.md").read_text()
    assert "| method |" in md and "**NOT MET**" in md and "**MET**" in md
    assert "gpscale bench demo" in md and "a note" in md and "## Machine" in md
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.jsonl", "demo.md", "demo.png"]
    with pytest.raises(RuntimeError):
        rec.record(late=True)


def test_recorder_without_plot_or_out_dir(tmp_path, capsys):
    Recorder("plain", tmp_path).finish()
    assert (tmp_path / "plain.png").exists() and (tmp_path / "plain.md").exists()
    assert Recorder("none", None).finish() == {}
    assert _lines(capsys.readouterr().out)[-1]["summary"] is True


def test_time_call_counts_repeats_after_warmup():
    calls = []
    t = time_call(lambda: calls.append(1), repeats=3, warmup=2)
    assert len(calls) == 5 and len(t.times) == 3 and 0 <= t.min_s <= t.median_s
    with pytest.raises(ValueError, match="repeats"):
        time_call(lambda: None, repeats=0)


def test_main_lists_and_rejects(capsys):
    assert bench.main(["--list"]) == 0
    assert "exact" in capsys.readouterr().out
    assert bench.main(["no-such-bench"]) != 0
    if not torch.cuda.is_available():
        assert bench.main(["exact", "--device", "cuda", "--out", "unused"]) == 1
        assert "cuda" in capsys.readouterr().err


def test_exact_bench_tiny_run(tmp_path, capsys, data_dir):
    pytest.importorskip("gpytorch")
    pytest.importorskip("sklearn")
    if not (data_dir / "uci" / "kin40k.npz").exists():
        pytest.skip(f"kin40k not found under {data_dir / 'uci'}")
    argv = ["exact", "--quick", "--n", "80", "--test-n", "500", "--fit-iters", "3",
            "--repeats", "1", "--out", str(tmp_path)]
    assert bench.main(argv) == 0
    out = _lines(capsys.readouterr().out)
    summary = out[-1]
    assert summary["summary"] is True and summary["n"] == 80 and summary["test_n"] == 500
    for key in SUMMARY_FIELDS:
        assert isinstance(summary[key], (int, float)) and math.isfinite(summary[key]), key
    assert summary["nlml_sklearn_at_same_theta_rel_err"] < 1e-8  # same θ, same model
    kinds = {r.get("kind") for r in out[:-1]}
    assert {"iteration", "fit", "nlml_check"} <= kinds
    assert {r["method"] for r in out if r.get("kind") == "fit"} == {"gpscale", "gpytorch",
                                                                     "sklearn"}
    for ext in ("jsonl", "md", "png"):
        assert (tmp_path / f"exact.{ext}").stat().st_size > 0


def test_warm_up_pays_the_lazy_optimiser_import_before_timing():
    """``warm_up`` (called by every ``gpscale bench`` run before its first timing) leaves
    ``torch._dynamo`` imported, so the first timed fit does not pay for it."""
    code = ("import sys; from benchmarks.harness import warm_up; "
            "assert 'torch._dynamo' not in sys.modules; warm_up(); "
            "assert 'torch._dynamo' in sys.modules")
    root = Path(__file__).resolve().parents[1]  # where `benchmarks` is importable
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
