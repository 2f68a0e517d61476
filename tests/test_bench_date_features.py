"""Smoke test of ``gpscale bench date-features --quick`` into a tmp dir (the full
benchmark is an accuracy run, not a test)."""

import json

import pytest

import benchmarks.date_features  # noqa: F401  (registers date-features)
from benchmarks import main
from gpscale.data.sources import data_dir


def test_date_features_quick(tmp_path):
    for need in ("mauna_loa_co2_monthly_noaa.npz", "tables/txhousing.csv"):
        if not (data_dir() / need).exists():
            pytest.skip(f"{need} not found under {data_dir()}")
    rc = main(["date-features", "--quick", "--rows", "150", "--max-iter", "3",
               "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = [json.loads(x) for x in (tmp_path / "date-features.jsonl").read_text().splitlines()]
    fits = [r for r in lines if r.get("kind") == "fit"]
    assert {(r["set"], r["date_features"]) for r in fits} == {
        (s, f) for s in ("co2", "co2-interp", "txhousing", "txhousing-dateonly")
        for f in ("days", "yearly")}
    assert all(r["d"] == other["d"] + 2 for r in fits if r["date_features"] == "yearly"
               for other in fits if other["set"] == r["set"] and other["seed"] == r["seed"]
               and other["date_features"] == "days")
    assert all(r["rmse_std"] > 0 and 0 <= r["coverage95"] <= 1 for r in fits)


def test_date_features_rejects_an_unknown_set(tmp_path):
    assert main(["date-features", "--quick", "--sets", "nope", "--out", str(tmp_path)]) == 1
