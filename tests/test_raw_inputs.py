"""Kernels on counts, histograms and codes read X as given: gpscale.fit standardises y
but not their columns (issue 22, case 12)."""

import csv

import numpy as np
import pytest

import gpscale
from gpscale.data import kmer_counts, sequence_codes
from gpscale.kernels import RBF, Hamming, Scale, Tanimoto


def _esol(data_dir, n):
    path = data_dir / "discrete" / "ESOL.csv"
    if not path.exists():
        pytest.skip(f"{path} not present")
    with open(path, newline="") as f:
        rows = [r for r, _ in zip(csv.DictReader(f), range(n))]
    return ([r["smiles"] for r in rows],
            np.array([float(r["measured log solubility in mols per litre"]) for r in rows]))


@pytest.mark.parametrize("kernel", ["tanimoto", "tanimoto-dot", "intersection"])
def test_count_kernels_fit_with_defaults_on_esol(data_dir, kernel):
    pytest.importorskip("rdkit", reason="RDKit not installed (pip install 'gpscale[chem]')")
    smiles, y = _esol(data_dir, 160)
    X = gpscale.data.morgan_counts(smiles, n_bits=1024).numpy()
    train, test = slice(0, 120), slice(120, 160)
    model = gpscale.fit(X[train], y[train], kernel=kernel, max_iter=30)  # defaults otherwise
    # X untouched, y standardised
    np.testing.assert_array_equal(model.scaler.x_mean, 0.0)
    np.testing.assert_array_equal(model.scaler.x_scale, 1.0)
    assert model.scaler.y_mean == pytest.approx(y[train].mean())
    assert model.scaler.y_scale == pytest.approx(y[train].std())
    assert "X as given" in model.summary()
    mean, std = model.predict(X[test], return_std=True)
    rmse = float(np.sqrt(np.mean((mean - y[test]) ** 2)))
    assert np.isfinite(mean).all() and (std > 0).all()
    assert rmse < 0.8 * y[test].std()  # skill: well below predicting the mean


def test_sequence_kernels_keep_codes_and_counts():
    rng = np.random.default_rng(0)
    seqs = ["".join(rng.choice(list("ACGT"), 12)) for _ in range(40)]
    y = np.array([s.count("A") for s in seqs], dtype=float) * 10.0 + 100.0
    codes, _ = sequence_codes(seqs)
    model = gpscale.fit(codes, y, kernel="hamming", max_iter=20)
    np.testing.assert_array_equal(model.scaler.x_scale, 1.0)
    assert model.scaler.y_scale > 1.0
    pred = model.predict(codes)
    assert np.corrcoef(pred, y)[0, 1] > 0.9
    counts, _ = kmer_counts(seqs, k=2)
    model = gpscale.fit(counts, y, kernel="spectrum", max_iter=20)
    np.testing.assert_array_equal(model.scaler.x_mean, 0.0)


def test_raw_columns_follow_active_dims():
    k = Scale(RBF(1.0, active_dims=[0])) + Scale(Tanimoto(active_dims=[1, 2]))
    assert k.raw_columns(3) == [1, 2]
    assert Scale(RBF(1.0)).raw_columns(3) == []
    assert Scale(Hamming()).raw_columns(2) == [0, 1]


def test_mixed_kernel_standardises_only_vector_columns():
    rng = np.random.default_rng(1)
    n = 50
    t = rng.uniform(0, 100, n)
    counts = rng.integers(0, 4, size=(n, 3)).astype(float)
    X = np.column_stack([t, counts])
    y = np.sin(t / 20) + counts.sum(1) * 0.1
    kernel = Scale(RBF(1.0, active_dims=[0])) + Scale(Tanimoto(active_dims=[1, 2, 3]))
    model = gpscale.fit(X, y, kernel=kernel, max_iter=10)
    assert model.scaler.x_scale[0] == pytest.approx(t.std())
    np.testing.assert_array_equal(model.scaler.x_scale[1:], 1.0)
    np.testing.assert_array_equal(model.scaler.x_mean[1:], 0.0)
    assert np.isfinite(model.predict(X)).all()


def test_streamed_source_keeps_count_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    X = rng.integers(0, 5, size=(40, 6)).astype(float)
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=40)
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(6)]).assign(y=y)
    path = tmp_path / "counts.csv"
    frame.to_csv(path, index=False)
    # a method that loads the rows, and one that streams them (its scaler from one pass)
    model = gpscale.fit(str(path), target="y", kernel="tanimoto", max_iter=5)
    np.testing.assert_array_equal(model.scaler.x_scale, 1.0)
    assert np.isfinite(model.predict(frame)).all()
    model = gpscale.fit(str(path), target="y", kernel="spectrum", method="svgp",
                        epochs=1, num_inducing=5)
    np.testing.assert_array_equal(model.scaler.x_scale, 1.0)
    assert model.scaler.y_scale == pytest.approx(y.std())
    assert np.isfinite(model.predict(frame)).all()
