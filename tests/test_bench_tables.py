"""Smoke test of ``gpscale bench tables --quick`` on one table, subsampled, into a tmp dir
(the full benchmark is a timing run, not a test)."""

import json

import pytest

import benchmarks.tables  # noqa: F401  (registers tables)
from benchmarks import main
from gpscale.data.sources import data_dir


def test_tables_quick(tmp_path):
    if not (data_dir() / "tables" / "txhousing.csv").exists():
        pytest.skip(f"tables/txhousing.csv not found under {data_dir()}")
    pytest.importorskip("sklearn")
    rc = main(["tables", "--quick", "--tables", "txhousing", "--rows", "300",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "tables.jsonl").read_text().splitlines()]
    fits = [r for r in lines if r.get("kind") == "fit"]
    assert {r["method"] for r in fits} == {"gpscale-auto", "hgb", "ols-onehot"}
    assert all("error" not in r and r["rmse"] > 0 and r["peak_rss_mib"] > 0 for r in fits)
    gp = next(r for r in fits if r["method"] == "gpscale-auto")
    assert 0 <= gp["coverage95"] <= 1 and gp["picked"] == "exact"
    summary = lines[-1]
    assert summary["summary"] is True and summary["tables_fitted"] == 1
    assert "## Targets" in (tmp_path / "tables.md").read_text()


def test_tables_rejects_an_unknown_table(tmp_path):
    assert main(["tables", "--quick", "--tables", "nope", "--out", str(tmp_path)]) == 1
