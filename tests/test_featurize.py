"""Featurisers: Morgan counts (RDKit, optional), sequence codes, k-mer counts."""

import builtins
import csv

import numpy as np
import pytest
import torch

from gpscale.data import kmer_counts, morgan_counts, sequence_codes
from gpscale.kernels import Spectrum, Tanimoto


def test_morgan_counts_known_molecules():
    pytest.importorskip("rdkit", reason="RDKit not installed (pip install 'gpscale[chem]')")
    X = morgan_counts(["CCO", "CCO", "c1ccccc1", "CC(=O)O"], n_bits=1024)
    assert X.shape == (4, 1024) and X.dtype == torch.float64
    # ethanol: 3 heavy atoms at radius 0 + environments at radius 1 = 6 counted features
    assert X[0].sum() == 6
    assert X[2].max() >= 2  # benzene: six identical carbons share bits (counts, not bits)
    torch.testing.assert_close(X[0], X[1])
    K = Tanimoto()(X)
    assert K[0, 1] == 1.0 and 0 < K[0, 3] < 1


def test_morgan_bad_smiles_names_row():
    pytest.importorskip("rdkit", reason="RDKit not installed")
    with pytest.raises(ValueError, match=r"smiles\[1\] = 'C1CC'"):
        morgan_counts(["CCO", "C1CC", "CC"])
    with pytest.raises(ValueError, match="single string"):
        morgan_counts("CCO")


def test_morgan_missing_rdkit_message(monkeypatch):
    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("rdkit"):
            raise ImportError("no rdkit")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r"pip install 'gpscale\[chem\]'"):
        morgan_counts(["CCO"])


def test_esol_file(data_dir):
    pytest.importorskip("rdkit", reason="RDKit not installed")
    path = data_dir / "discrete" / "ESOL.csv"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, newline="") as f:
        smiles = [r["smiles"] for r, _ in zip(csv.DictReader(f), range(50))]
    X = morgan_counts(smiles)
    assert X.shape == (50, 2048) and (X >= 0).all() and (X.sum(1) > 0).all()
    assert (X == X.round()).all()


def test_sequence_codes():
    X, alpha = sequence_codes(["ACGT", "AAGT", "TTTT"])
    assert alpha == ["A", "C", "G", "T"]
    np.testing.assert_array_equal(X.numpy(), [[0, 1, 2, 3], [0, 0, 2, 3], [3, 3, 3, 3]])
    Xt, _ = sequence_codes(["GGGA"], alphabet=alpha)
    np.testing.assert_array_equal(Xt.numpy(), [[2, 2, 2, 0]])
    with pytest.raises(ValueError, match=r"seqs\[1\] has length 3"):
        sequence_codes(["ACGT", "ACG"])
    with pytest.raises(ValueError, match=r"seqs\[0\] contains 'X'"):
        sequence_codes(["AXGT"], alphabet=alpha)


def test_kmer_counts_and_vocab_for_test_strings():
    X, vocab = kmer_counts(["ABAB", "BBB"], k=2)
    assert vocab == {"AB": 0, "BA": 1, "BB": 2}
    np.testing.assert_array_equal(X.numpy(), [[2, 1, 0, 0], [0, 0, 2, 0]])
    Xt, vocab2 = kmer_counts(["ABCC"], k=2, vocab=vocab)
    assert vocab2 == vocab
    # unseen BC, CC go into the residual-norm column: ‖φ‖ stays exact
    np.testing.assert_allclose(Xt.numpy(), [[1, 0, 0, np.sqrt(2)]])
    K = Spectrum()(Xt, X)
    # exact normalised spectrum kernel between "ABCC" and "ABAB": 1*2 / (√3 √5)
    np.testing.assert_allclose(K[0, 0].item(), 2 / np.sqrt(3 * 5), rtol=1e-14)
    with pytest.raises(ValueError, match="k must be"):
        kmer_counts(["AB"], k=0)
    with pytest.raises(ValueError, match="vocab must map"):
        kmer_counts(["AB"], k=1, vocab={"A": 3})
