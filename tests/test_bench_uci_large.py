"""Smoke tests of ``gpscale bench uci-large``: its quick run (on fewer training rows, to
stay fast), skip rows for the dense methods, error rows, and ``--resume``."""

import json
import math

import pytest

import benchmarks.uci_large as uci_large  # registers uci-large
from benchmarks import main
from gpscale.data.sources import data_dir

QUICK = ["uci-large", "--quick", "--threads", "1"]
FITTED = {"rff", "svgp", "auto", "gpytorch-sgpr", "gpytorch-svgp"}


def _need_data():
    if not (data_dir() / "uci" / "skillcraft.npz").exists():
        pytest.skip(f"UCI set skillcraft not found under {data_dir()}")


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run on 400 training rows: (its folder, its JSON lines)."""
    _need_data()
    pytest.importorskip("gpytorch")
    out = tmp_path_factory.mktemp("uci-large")
    assert main([*QUICK, "--max-train", "400", "--out", str(out)]) == 0
    return out, _lines(out / "uci-large.jsonl")


def test_quick_structure(quick):
    out, lines = quick
    summary = lines[-1]
    assert summary["summary"] is True and summary["sets"] == ["skillcraft"]
    assert summary["folds"] == [0] and summary["peers"] == ["gpytorch-sgpr", "gpytorch-svgp"]
    fits = [r for r in lines if r.get("kind") == "fit"]
    assert sorted(r["method"] for r in fits) == sorted(FITTED)  # one row per method
    assert all(r["n"] == 400 and r["set"] == "skillcraft" and r["fold"] == 0 for r in fits)
    assert all(math.isfinite(r[k]) and r[k] > 0 for r in fits for k in ("rmse", "fit_s"))
    assert all(math.isfinite(r["nlpd"]) for r in fits)
    auto = next(r for r in fits if r["method"] == "auto")
    assert auto["picked"] in ("exact", "rff", "cholqr-vfe") and auto["choice"]
    (row,) = [r for r in lines if r.get("kind") == "set"]
    assert row["best"] in ("rff", "svgp")
    assert row["best_rmse/sgpr"] > 0 and row["best_t/sgpr"] > 0 and row["auto_rmse/best"] > 0
    ranks = [r for r in lines if r.get("kind") == "rank"]
    assert [r["rank"] for r in ranks] == [1, 2, 3, 4, 5]
    assert [r["rmse"] for r in ranks] == sorted(r["rmse"] for r in ranks)
    for key in ("best_rmse/sgpr_max", "best_nlpd-sgpr_max", "best_t/sgpr_max",
                "auto_rmse/best_max"):
        assert math.isfinite(summary[key])
    assert len(summary["targets"]) == 4 and summary["best_per_set"] == {"skillcraft": row["best"]}
    md = (out / "uci-large.md").read_text()
    assert "## Targets" in md and "## rank" in md and "## set" in md
    assert (out / "uci-large.png").stat().st_size > 0


def test_resume_refits_nothing(quick, tmp_path, monkeypatch):
    src, lines = quick

    def refit(*a, **k):
        raise AssertionError("a resumed fit was run again")

    monkeypatch.setattr(uci_large, "_fit_gpscale", refit)
    monkeypatch.setattr(uci_large, "_fit_peer", refit)
    assert main([*QUICK, "--max-train", "400", "--out", str(tmp_path),
                 "--resume", str(src / "uci-large.jsonl")]) == 0
    again = _lines(tmp_path / "uci-large.jsonl")
    assert [r for r in again if r.get("kind") == "fit"] == \
        [r for r in lines if r.get("kind") == "fit"]  # fit_s included
    assert not [r for r in again if r.get("kind") == "error"]
    assert again[-1]["resumed_fits"] == len(FITTED)
    # a resume file from other caps is refused rather than mixed in
    assert main([*QUICK, "--max-train", "300", "--out", str(tmp_path),
                 "--resume", str(src / "uci-large.jsonl")]) == 1


def test_dense_methods_skipped_above_limit(tmp_path):
    _need_data()
    assert main([*QUICK, "--methods", "rff", "exact", "--dense-max-n", "100",
                 "--max-train", "200", "--peers", "--out", str(tmp_path)]) == 0
    lines = _lines(tmp_path / "uci-large.jsonl")
    (skip,) = [r for r in lines if r.get("kind") == "skip"]
    assert skip["method"] == "exact" and skip["n"] == 200 and "dense-max-n" in skip["reason"]
    assert skip["mem_gib"] > 0 and skip["est_s"] > 0
    assert [r["method"] for r in lines if r.get("kind") == "fit"] == ["rff"]
    ranks = {r["method"]: r for r in lines if r.get("kind") == "rank"}
    assert ranks["exact"]["rank"] is None and ranks["exact"]["note"].startswith("skip")
    assert lines[-1]["all_targets_met"] is False  # no SGPR: targets not evaluated


def test_failing_method_gives_error_row(tmp_path, monkeypatch, capsys):
    _need_data()
    real = uci_large._fit_gpscale

    def flaky(method, *a):
        if method == "svgp":
            raise RuntimeError("boom")
        return real(method, *a)

    monkeypatch.setattr(uci_large, "_fit_gpscale", flaky)
    assert main([*QUICK, "--methods", "svgp", "rff", "--max-train", "200", "--peers",
                 "--out", str(tmp_path)]) == 0
    lines = _lines(tmp_path / "uci-large.jsonl")
    (err,) = [r for r in lines if r.get("kind") == "error"]
    assert err["method"] == "svgp" and err["error"] == "RuntimeError: boom"
    assert [r["method"] for r in lines if r.get("kind") == "fit"] == ["rff"]
    assert "boom" in capsys.readouterr().err


def test_rejects_unknown_method(tmp_path):
    assert main([*QUICK, "--methods", "nope", "--out", str(tmp_path)]) == 1


def test_report_only_assembles_from_resume_and_marks_missing_fits(tmp_path):
    _need_data()
    first = tmp_path / "a"
    assert main(["uci-large", "--quick", "--max-train", "300", "--methods", "rff", "--peers",
                 "--threads", "1", "--out", str(first)]) == 0
    out = tmp_path / "b"
    assert main(["uci-large", "--quick", "--max-train", "300", "--methods", "rff", "svgp",
                 "--peers", "--threads", "1", "--resume", str(first / "uci-large.jsonl"),
                 "--report-only", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "uci-large.jsonl").read_text().splitlines()]
    fits = [r for r in rows if r.get("kind") == "fit"]
    skips = [r for r in rows if r.get("kind") == "skip"]
    assert [r["method"] for r in fits] == ["rff"]
    assert [r["method"] for r in skips] == ["svgp"] and "not run" in skips[0]["reason"]
    assert main(["uci-large", "--quick", "--report-only", "--out", str(tmp_path / "c")]) == 1
