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


def test_tables_kernel_forms(tmp_path):
    """The categorical kernel against ARD on one-hot codes, each the exact GP, with the
    ratio per table and the count of tables the categorical one wins."""
    if not (data_dir() / "tables" / "txhousing.csv").exists():
        pytest.skip(f"tables/txhousing.csv not found under {data_dir()}")
    rc = main(["tables", "--quick", "--tables", "txhousing", "--rows", "300", "--methods",
               "gpscale-onehot", "gpscale-cat", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "tables.jsonl").read_text().splitlines()]
    fits = {r["method"]: r for r in lines if r.get("kind") == "fit"}
    assert fits["gpscale-onehot"]["kernel"] == "matern52-ard"
    assert fits["gpscale-cat"]["kernel"] == "matern52-ard-cat"
    assert all("error" not in r and r["picked"] == "exact" for r in fits.values())
    table = next(r for r in lines if r.get("kind") == "table")
    ratio = fits["gpscale-cat"]["rmse"] / fits["gpscale-onehot"]["rmse"]
    assert table["cat_rmse/onehot"] == pytest.approx(ratio)
    assert lines[-1]["kernel_form_tables"] == 1
    assert lines[-1]["cat_better_tables"] == int(ratio < 1)


def test_tables_seed_list_runs_the_seeds_named(tmp_path):
    if not (data_dir() / "tables" / "txhousing.csv").exists():
        pytest.skip(f"tables/txhousing.csv not found under {data_dir()}")
    pytest.importorskip("sklearn")
    rc = main(["tables", "--tables", "txhousing", "--rows", "300", "--seed-list", "1", "2",
               "--methods", "ols-onehot", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "tables.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in lines if r.get("kind") == "fit"] == [1, 2]
