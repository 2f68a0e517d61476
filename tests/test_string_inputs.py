"""Inputs made from one string column (gpscale.io.inputs): SMILES, reactions and
sequences, read from files and data frames, saved with the model."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import gpscale
from gpscale.data import morgan_counts, reaction_counts
from gpscale.io import StringInputs, open_strings, prediction_source
from gpscale.kernels import Tanimoto

pd = pytest.importorskip("pandas")

SMILES = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CC(=O)O", "CCC(=O)O",
          "C1CCCCC1", "CCOCC", "CCCCCC", "Nc1ccccc1", "Oc1ccccc1"]
V1 = Path(__file__).parent / "data" / "format_v1"


@pytest.fixture
def chem():
    pytest.importorskip("rdkit", reason="RDKit not installed (pip install 'gpscale[chem]')")


def test_reaction_counts_are_both_sides_side_by_side(chem):
    X = reaction_counts(["CCO.CC(=O)O>>CCOC(C)=O", "CCO>[Na+].[OH-]>CC=O"], n_bits=256)
    assert X.shape == (2, 512) and bool((X >= 0).all())
    left = morgan_counts(["CCO", "CC(=O)O"], n_bits=256).sum(0)
    torch.testing.assert_close(X[0, :256], left)  # reactants summed
    torch.testing.assert_close(X[0, 256:], morgan_counts(["CCOC(C)=O"], n_bits=256)[0])
    torch.testing.assert_close(X[1, :256], morgan_counts(["CCO.[Na+].[OH-]"], n_bits=256)[0])
    K = Tanimoto()(X)  # non-negative counts: the MinMax kernel applies, PSD
    assert torch.linalg.eigvalsh(K).min() > -1e-12 and K[0, 0] == 1
    with pytest.raises(ValueError, match=r"reactions\[1\] = 'CCO' is not a reaction"):
        reaction_counts(["CCO>>CC=O", "CCO"])
    with pytest.raises(ValueError, match=r"reactions\[0\] = 'CCO>>C1CC': RDKit cannot parse"):
        reaction_counts(["CCO>>C1CC"])
    with pytest.raises(ValueError, match=r"smiles\[1\] = 'CCO>>CC=O' is a reaction SMILES"):
        morgan_counts(["CCO", "CCO>>CC=O"])  # instead of RDKit's parse error


def test_fit_on_a_frame_and_predict_from_strings(tmp_path, chem):
    frame = pd.DataFrame({"smiles": SMILES, "y": [len(s) for s in SMILES],
                          "other": np.arange(len(SMILES)) * 1e6})  # ignored
    source = open_strings(frame, "smiles", "smiles", target="y", n_bits=512)
    assert source.num_features == 512 and source.inputs.encoding == "morgan"
    model = gpscale.fit(source, kernel="tanimoto", max_iter=10)
    np.testing.assert_array_equal(model.scaler.x_scale, 1.0)
    expected = model.predict(morgan_counts(["CCCCCO"], n_bits=512).numpy())
    np.testing.assert_array_equal(model.predict(["CCCCCO"]), expected)
    np.testing.assert_array_equal(model.predict(pd.DataFrame({"smiles": ["CCCCCO"]})),
                                  expected)
    model.save(tmp_path / "m.pt")
    again = gpscale.load(tmp_path / "m.pt")
    assert again.inputs == model.inputs
    np.testing.assert_array_equal(again.predict(["CCCCCO"]), expected)
    with pytest.raises(ValueError, match=r"X\[1\] = 'C1CC' cannot be parsed"):
        again.predict(["CCO", "C1CC"])
    with pytest.raises(ValueError, match="single string"):
        again.predict("CCO")


def test_parquet_string_column_and_missing_values(tmp_path, chem):
    table = pa.table({"smiles": SMILES, "y": np.arange(len(SMILES), dtype=float)})
    pq.write_table(table, tmp_path / "m.parquet", row_group_size=5)  # 3 row groups
    source = open_strings(str(tmp_path / "m.parquet"), "smiles", "smiles", target="y",
                          n_bits=128)
    X, y = source.to_arrays()
    np.testing.assert_array_equal(X, morgan_counts(SMILES, n_bits=128).numpy())
    np.testing.assert_array_equal(y, np.arange(len(SMILES)))
    holes = pa.table({"smiles": ["CCO", None, "CCN"] * 3, "y": np.arange(9.0)})
    pq.write_table(holes, tmp_path / "holes.parquet", row_group_size=4)
    with pytest.raises(ValueError, match=r"column 'smiles' in row 2 of .*holes.parquet' is "
                                         r"empty \(a missing value\)"):
        open_strings(str(tmp_path / "holes.parquet"), "smiles", "smiles", target="y")
    late = pa.table({"smiles": ["CCO", "CCN", "CCC", "CCCC", None], "y": np.arange(5.0)})
    pq.write_table(late, tmp_path / "late.parquet", row_group_size=4)  # in row group 2
    with pytest.raises(ValueError, match="column 'smiles' in row 5 .*a missing value"):
        open_strings(str(tmp_path / "late.parquet"), "smiles",
                     spec=source.inputs).to_arrays()


def test_spectrum_sequences_from_a_csv(tmp_path):
    rng = np.random.default_rng(0)
    seqs = ["".join(rng.choice(list("ACGT"), int(rng.integers(6, 12)))) for _ in range(25)]
    pd.DataFrame({"seq": seqs, "y": [s.count("AC") for s in seqs]}).to_csv(
        tmp_path / "s.csv", index=False)
    source = open_strings(str(tmp_path / "s.csv"), "seq", "sequence", target="y",
                          kernel="spectrum", k=2)
    assert source.inputs.encoding == "kmers" and source.inputs.k == 2
    model = gpscale.fit(source, kernel="spectrum", max_iter=10)
    assert np.isfinite(model.predict(["ACACGTTT", "NNNN"])).all()
    with pytest.raises(ValueError, match="equal length"):  # unaligned: not for Hamming
        open_strings(str(tmp_path / "s.csv"), "seq", "sequence", target="y")
    with pytest.raises(ValueError, match="neither"):
        open_strings(str(tmp_path / "s.csv"), "seq", "sequence", target="y", kernel="rbf")


def test_string_inputs_state_round_trip_and_old_files():
    spec = StringInputs("sequence", "seq", "codes", length=4, alphabet=list("ACGT"))
    assert StringInputs.from_state(spec.state()) == spec
    codes = spec.transform(["ACGT", "AXGT"], lambda i: f"row {i}")
    np.testing.assert_array_equal(codes, [[0, 1, 2, 3], [0, 4, 2, 3]])  # X: a new code
    with pytest.raises(ValueError, match="row 0 has length 3"):
        spec.transform(["ACG"], lambda i: f"row {i}")
    for path in sorted(V1.glob("*.pt")):  # files without string inputs load as before
        assert gpscale.load(path).inputs is None


def test_prediction_source_of_a_numeric_model_matches_columns_by_name(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=20), "b": rng.normal(size=20)})
    model = gpscale.fit(frame, frame["a"] * 2 + frame["b"], max_iter=5)
    frame[["b", "a"]].to_csv(tmp_path / "new.csv", index=False)
    X, _ = prediction_source(model, str(tmp_path / "new.csv")).to_arrays()
    np.testing.assert_array_equal(X, frame[["a", "b"]].to_numpy())
