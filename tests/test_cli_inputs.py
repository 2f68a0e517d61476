"""``gpscale fit --smiles / --sequence / --device / --dtype`` and ``gpscale predict`` on
what the model was trained with: the installed command in a subprocess, real files."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpscale

SRC = Path(gpscale.__file__).resolve().parents[1]
GPSCALE = str(Path(sys.executable).parent / "gpscale")

#: small molecules with a made-up target (number of heavy atoms, roughly)
MOLECULES = [
    ("CCO", 3), ("CCCO", 4), ("CCCCO", 5), ("CC(C)O", 4), ("CCN", 3), ("CCCN", 4),
    ("c1ccccc1", 6), ("Cc1ccccc1", 7), ("CCc1ccccc1", 8), ("Oc1ccccc1", 7),
    ("CC(=O)O", 4), ("CCC(=O)O", 5), ("CCCC(=O)O", 6), ("CC(=O)OC", 5), ("C1CCCCC1", 6),
    ("C1CCCC1", 5), ("CCOCC", 5), ("CCCCCC", 6), ("CCCCCCC", 7), ("Nc1ccccc1", 7),
]


def _gpscale(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([GPSCALE, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def chem():
    pytest.importorskip("rdkit", reason="RDKit not installed (pip install 'gpscale[chem]')")


def test_smiles_fit_then_predict_featurises_the_same_column(tmp_path, chem):
    _write(tmp_path / "molecules.csv", ["name", "smiles", "y"],
           [(f"m{i}", s, v) for i, (s, v) in enumerate(MOLECULES)])
    # predict's file: other columns in another order, no target
    _write(tmp_path / "new.csv", ["smiles", "id"], [("CCCCCO", "a"), ("CCc1ccccc1", "b")])
    fit = _gpscale("fit", "--data", "molecules.csv", "--target", "y", "--smiles", "smiles",
                   "--kernel", "tanimoto", "--method", "cholqr-vfe", "--option", "m=8",
                   "--max-iter", "1", "--out", "m.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    assert "Morgan count fingerprints (radius 2, 2048 bits) of column 'smiles'" in fit.stdout
    model = gpscale.load(tmp_path / "m.pt")
    assert model.inputs.column == "smiles" and model.n_features == 2048
    np.testing.assert_array_equal(model.scaler.x_scale, 1.0)  # counts kept as counts
    pred = _gpscale("predict", "--model", "m.pt", "--data", "new.csv", "--out", "p.csv",
                    cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    rows = _read(tmp_path / "p.csv")
    mean = np.array([float(r["mean"]) for r in rows])
    # the same numbers as the library on the same strings
    np.testing.assert_allclose(mean, model.predict(["CCCCCO", "CCc1ccccc1"]), rtol=1e-12)
    assert len(rows) == 2 and np.isfinite(mean).all()
    assert all(float(r["std"]) > 0 for r in rows)


def test_invalid_smiles_names_the_row(tmp_path, chem):
    _write(tmp_path / "bad.csv", ["smiles", "y"],
           [("CCO", 1.0), ("CCN", 2.0), ("C1CC", 3.0), ("CC", 4.0)])
    out = _gpscale("fit", "--data", "bad.csv", "--target", "y", "--smiles", "smiles",
                   "--out", "m.pt", cwd=tmp_path)
    assert out.returncode != 0 and not (tmp_path / "m.pt").exists()
    assert "column 'smiles' on line 4" in out.stderr and "'C1CC'" in out.stderr
    assert "Traceback" not in out.stderr


def test_reaction_smiles_get_a_reaction_fingerprint(tmp_path, chem):
    acids = ["CC(=O)O", "CCC(=O)O", "CCCC(=O)O", "OC(=O)c1ccccc1"]
    alcohols = ["CO", "CCO", "CCCO"]
    rows = []
    for i, a in enumerate(acids):
        for j, b in enumerate(alcohols):
            product = b + a.replace("O", "", 1) if a.startswith("O") else a[:-1] + b
            rows.append((f"{a}.{b}>>{product}", 0.1 * i + 0.3 * j))
    _write(tmp_path / "reactions.csv", ["rxn", "yield"], rows)
    fit = _gpscale("fit", "--data", "reactions.csv", "--target", "yield", "--smiles", "rxn",
                   "--max-iter", "3", "--out", "r.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    model = gpscale.load(tmp_path / "r.pt")
    assert model.inputs.encoding == "reaction" and model.n_features == 2 * 2048
    assert model.kernel_name == "tanimoto"  # the default for --smiles
    _write(tmp_path / "mixed.csv", ["rxn"], [("CCO.CC(=O)O>>CCOC(C)=O",), ("CCO",)])
    pred = _gpscale("predict", "--model", "r.pt", "--data", "mixed.csv", "--out", "p.csv",
                    cwd=tmp_path)
    assert pred.returncode != 0 and "column 'rxn'" in pred.stderr
    assert "'CCO' is not a reaction SMILES" in pred.stderr and not (tmp_path / "p.csv").exists()


def test_sequences_for_hamming(tmp_path):
    rng = np.random.default_rng(0)
    seqs = ["".join(rng.choice(list("ACGT"), 10)) for _ in range(30)]
    _write(tmp_path / "seqs.csv", ["seq", "y"], [(s, s.count("A")) for s in seqs])
    _write(tmp_path / "new.csv", ["seq"], [(seqs[0],), ("ACGTNACGTA",)])  # N never seen
    fit = _gpscale("fit", "--data", "seqs.csv", "--target", "y", "--sequence", "seq",
                   "--max-iter", "5", "--out", "h.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    model = gpscale.load(tmp_path / "h.pt")
    assert model.kernel_name == "hamming" and model.inputs.encoding == "codes"
    pred = _gpscale("predict", "--model", "h.pt", "--data", "new.csv", "--out", "p.csv",
                    cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    mean = [float(r["mean"]) for r in _read(tmp_path / "p.csv")]
    np.testing.assert_allclose(mean, model.predict([seqs[0], "ACGTNACGTA"]), rtol=1e-12)


def test_device_and_dtype_flags(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    _write(tmp_path / "d.csv", ["a", "b", "y"],
           [(*x, v) for x, v in zip(X, np.sin(X[:, 0]))])
    fit = _gpscale("fit", "--data", "d.csv", "--target", "y", "--method", "svgp",
                   "--dtype", "float32", "--device", "cpu", "--option", "epochs=1",
                   "--out", "m.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    assert {p.dtype.__str__() for p in gpscale.load(tmp_path / "m.pt").model.parameters()} \
        == {"torch.float32"}
    pred = _gpscale("predict", "--model", "m.pt", "--data", "d.csv", "--out", "p.csv",
                    "--device", "cpu", cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    for args, message in [
        (["--method", "admm-hocv", "--dtype", "float32"],
         "method 'admm-hocv' computes in float64 only: --dtype applies to"),
        (["--device", "gpu"], "accepted here: 'cpu'"),
    ]:
        bad = _gpscale("fit", "--data", "d.csv", "--target", "y", *args, "--out", "x.pt",
                       cwd=tmp_path)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
        assert not (tmp_path / "x.pt").exists()


def test_esol_slice_end_to_end(tmp_path, data_dir, chem):
    path = data_dir / "discrete" / "ESOL.csv"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, newline="") as f:
        rows = [r for r, _ in zip(csv.DictReader(f), range(60))]
    target = "measured log solubility in mols per litre"
    _write(tmp_path / "train.csv", ["smiles", "logS"],
           [(r["smiles"], r[target]) for r in rows[:45]])
    _write(tmp_path / "test.csv", ["Compound ID", "smiles"],
           [(r["Compound ID"], r["smiles"]) for r in rows[45:]])
    fit = _gpscale("fit", "--data", "train.csv", "--target", "logS", "--smiles", "smiles",
                   "--method", "exact", "--max-iter", "20", "--out", "m.pt", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    pred = _gpscale("predict", "--model", "m.pt", "--data", "test.csv", "--out", "p.csv",
                    cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr
    mean = np.array([float(r["mean"]) for r in _read(tmp_path / "p.csv")])
    truth = np.array([float(r[target]) for r in rows[45:]])
    assert np.sqrt(np.mean((mean - truth) ** 2)) < truth.std()  # better than the mean
