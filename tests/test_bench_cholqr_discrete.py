"""Smoke test of the ``cholqr-discrete`` benchmark (tiny configuration, tmp output)."""

import json
import math

import pytest

from benchmarks import main


def test_quick_tiny(tmp_path, data_dir):
    pytest.importorskip("rdkit", reason="RDKit not installed (pip install 'gpscale[chem]')")
    pytest.importorskip("gpscale.train.cholqr", reason="CholQR trainer not available")
    if not (data_dir / "discrete" / "ESOL.csv").exists():
        pytest.skip("discrete/ESOL.csv not in the shared data")
    import benchmarks.cholqr_discrete  # noqa: F401  (registers cholqr-discrete)

    rc = main(["cholqr-discrete", "--quick", "--subset", "60", "--m", "8", "--splits", "1",
               "--epochs", "1", "--cholqr-epochs", "2", "--threads", "1", "--out", str(tmp_path)])
    assert rc == 0
    lines = (tmp_path / "cholqr-discrete.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    runs = [r for r in rows if r.get("kind") == "run"]
    assert {r["method"] for r in runs} == {"cholqr", "cholqr-z128", "random", "titsias-16",
                                           "titsias-512", "ivm"}
    for r in runs:
        assert r["n_train"] == 54 and r["m"] == 8
        assert math.isfinite(r["smse"]) and math.isfinite(r["snlp"]) and r["fit_s"] > 0
    summary = rows[-1]
    assert summary["summary"] is True and len(summary["targets"]) == 6  # 3 per CholQR variant
    assert {"cholqr_beats_random_and_ivm", "cholqr_z128_reaches_titsias512"} <= set(summary)
    assert (tmp_path / "cholqr-discrete.md").exists()
    assert (tmp_path / "cholqr-discrete.png").stat().st_size > 0


def test_rejects_unknown_method(tmp_path, data_dir):
    pytest.importorskip("rdkit", reason="RDKit not installed")
    import benchmarks.cholqr_discrete  # noqa: F401

    assert main(["cholqr-discrete", "--quick", "--methods", "magic", "--threads", "1",
                 "--out", str(tmp_path)]) == 1
