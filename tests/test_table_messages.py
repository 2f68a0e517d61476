"""Issue 59, items 6, 7 and 9: integer id columns are refused as string ids are; the
no-skill check judges a fit with category inputs against the per-level means; the
messages of item 9 say what is wrong and what to do (exit codes as the README classes
them). Each case failed (or gave a misleading message) before."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import gpscale
from gpscale.io import open_source

pd = pytest.importorskip("pandas")

FIT = {"method": "exact", "max_iter": 5, "seed": 0}


# -- item 6: integer ids -----------------------------------------------------------------
def _with_ids(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    return pd.DataFrame({
        "row": np.arange(1, n + 1),  # a row counter
        "customer": rng.permutation(n) + 10_000,  # ids handed out, rows shuffled
        "hashed": rng.integers(0, 2**40, n),  # hashed ids
        "x": x, "y": np.sin(x) + 0.1 * rng.standard_normal(n)})


@pytest.mark.parametrize("column, why", [("row", "rising with the row order"),
                                         ("customer", "spread evenly"),
                                         ("hashed", "spread evenly")])
def test_an_integer_id_column_is_refused_naming_exclude(tmp_path, column, why):
    df = _with_ids()[[column, "x", "y"]]
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        with pytest.raises(ValueError) as err:
            open_source(data, target="y")
        msg = str(err.value)
        assert "look like ids" in msg and why in msg
        assert f"--exclude {column}" in msg and f"exclude=[{column!r}]" in msg
        assert "--columns" in msg  # how to keep one that is a real input
    open_source(df, target="y", exclude=[column])


def test_a_row_counter_split_over_files_is_refused(tmp_path):
    df = _with_ids()[["row", "x", "y"]]
    df[:100].to_csv(tmp_path / "a.csv", index=False)
    df[100:].to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="'row'.*rising with the row order"):
        open_source(str(tmp_path / "*.csv"), target="y")
    # the files out of order: no longer monotone, but a permutation of a range
    with pytest.raises(ValueError, match="'row'.*spread evenly"):
        open_source([str(tmp_path / "b.csv"), str(tmp_path / "a.csv")], target="y")


def test_an_id_like_column_named_in_columns_or_alone_is_kept():
    df = _with_ids()
    src = open_source(df, target="y", columns=["row", "x"])  # the user asked for it
    assert src.feature_names == ["row", "x"]
    src = open_source(df[["row", "y"]], target="y")  # a series: nothing else to fit on
    assert src.feature_names == ["row"]


def test_integer_measurements_are_not_ids():
    rng = np.random.default_rng(1)
    n = 400
    df = pd.DataFrame({
        "year": np.sort(rng.integers(1990, 2020, n)),  # sorted, but few distinct values
        "money": np.round(np.exp(rng.normal(10, 1, n))).astype(np.int64),  # skewed
        "count": rng.poisson(30, n), "few": np.arange(n) % 7,
        "y": rng.standard_normal(n)})
    assert open_source(df, target="y").feature_names == ["year", "money", "count", "few"]
    small = df[:40].assign(row=np.arange(40))  # too few rows to tell
    open_source(small, target="y")


def test_the_distinct_count_merges_pieces_in_any_split():
    from gpscale.io.survey import DISTINCT_KEEP, DistinctSample

    rng = np.random.default_rng(0)
    values = rng.integers(0, 10**12, 5 * DISTINCT_KEEP)
    whole = DistinctSample().add(np.unique(values))
    pieces = DistinctSample()
    for piece in np.array_split(values, 7):
        pieces = pieces.merge(DistinctSample().add(np.unique(piece)))
    assert pieces == whole and whole.level > 0
    assert abs(whole.count / len(np.unique(values)) - 1) < 0.05
    small = DistinctSample().add(np.unique(values[:1000]))
    assert small.count == len(np.unique(values[:1000])) and small.level == 0


# -- item 7: the no-skill check and categories -------------------------------------------
def _levels(effect_sd: float, n: int = 600, levels: int = 6, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    code = rng.integers(0, levels, n)
    effect = effect_sd * rng.standard_normal(levels)
    return pd.DataFrame({"c": [f"L{i}" for i in code],
                         "y": effect[code] + 0.1 * rng.standard_normal(n)})


def _skill_warnings(df: pd.DataFrame) -> tuple[list[str], dict]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = gpscale.fit(df, target="y", method="exact", kernel="rbf-ard", seed=0)
    return [str(w.message) for w in caught if "predictive skill" in str(w.message)], \
        model.result.skill


def test_a_table_of_categories_fitted_to_the_noise_has_skill():
    """Every row is a copy of its level's others: leaving all copies out left the level
    out, and the fit always 'had no skill' (R² < 0) while its RMSE was the noise."""
    found, skill = _skill_warnings(_levels(1.9))
    assert not found
    assert skill["loo_r2"] > 0.95 and skill["loo_rows"] == 600
    assert skill["rows_r2"] >= skill["levels_r2"] - 0.01


def test_categories_that_explain_nothing_still_warn():
    found, skill = _skill_warnings(_levels(0.0))
    assert found and "explain" in found[0]
    assert skill["loo_r2"] <= 0.05


def test_a_fit_worse_than_the_per_level_means_warns():
    """A model that shrinks each level's mean halfway to 0 explains most of y (so the
    check on the overall mean passed) but less than the levels' own means."""
    import torch

    from gpscale.models.skill import sample_skill

    class Levels(torch.nn.Module):  # one-hot X: k(x, x') = a when the levels agree
        def forward(self, X, Z=None):
            return 0.01 * X @ (X if Z is None else Z).mT

    df = _levels(1.0, n=1200)
    X = torch.tensor(pd.get_dummies(df["c"]).to_numpy(np.float64))
    y = torch.tensor(df["y"].to_numpy() - df["y"].mean())
    model = torch.nn.Module()  # what the check reads of a fitted model
    model.kernel, model.noise, model.mean_constant = Levels(), torch.tensor(1.0), None
    skill = sample_skill(model, X, y)
    assert skill["loo_r2"] > 0.3  # not 'no skill' against the overall mean ...
    assert skill["levels_r2"] > 0.95  # ... but the levels' means do far better
    assert "worse than the means of its category levels" in skill["problem"]
    assert "rbf-ard-cat" in skill["problem"]


def test_the_row_loo_of_merged_copies_equals_the_loo_of_every_row():
    """Leaving one row out of merged copies (the others stay), from ȳ, c and S alone,
    against the dense LOO on every row."""
    import torch

    from gpscale.models.skill import levels_loo, loo_residuals, row_residuals

    g = torch.Generator().manual_seed(0)
    counts = torch.tensor([1.0, 3.0, 2.0, 5.0, 1.0, 4.0])
    x = torch.randn(6, 1, generator=g, dtype=torch.float64)
    K, noise = 2.0 * torch.exp(-(x - x.T) ** 2), torch.tensor(0.3, dtype=torch.float64)
    at = torch.repeat_interleave(torch.arange(6), counts.long())
    y = torch.randn(len(at), generator=g, dtype=torch.float64) + x[at, 0]
    inv = torch.linalg.inv(K[at][:, at] + noise * torch.eye(len(at), dtype=torch.float64))
    dense = torch.zeros(6, dtype=torch.float64).index_add_(
        0, at, ((inv @ y) / inv.diagonal()).square())
    c = counts.to(y)
    ybar = torch.zeros(6, dtype=torch.float64).index_add_(0, at, y) / c
    spread = torch.zeros(6, dtype=torch.float64).index_add_(0, at, (y - ybar[at]) ** 2)
    L = torch.linalg.cholesky(K + torch.diag(noise / c))
    r, v = loo_residuals(L, torch.cholesky_solve(ybar[:, None], L)[:, 0])
    assert torch.allclose(row_residuals(r, v, ybar, c, spread, noise), dense)
    onehot = torch.tensor([[1.0, 0], [1, 0], [0, 1], [0, 1], [1, 0], [0, 1]],
                          dtype=torch.float64)
    cell = onehot[at, 0].long()
    by_hand = sum(float((y[j] - y[(cell == cell[j]) & (torch.arange(len(at)) != j)].mean())
                        ** 2) for j in range(len(at)))
    assert levels_loo(onehot, ybar, c, spread) == pytest.approx(by_hand)


# -- item 9: messages that sent users the wrong way --------------------------------------
SRC = Path(gpscale.__file__).resolve().parents[1]
GPSCALE = Path(sys.executable).with_name("gpscale")


def _gpscale(*args, cwd):
    """The installed command on this checkout's sources: (exit status, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    env.pop("GPSCALE_DEBUG", None)
    proc = subprocess.run([str(GPSCALE), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr


def _table(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    return pd.DataFrame({"city": rng.choice(["Zürich", "Genève", "Bâle"], n), "x": x,
                         "y": x + 0.1 * rng.standard_normal(n)})


def test_true_false_text_is_a_number_column_as_booleans_are(tmp_path):
    """Before: refused as 'non-numeric ... encode these columns as numbers'."""
    df = _table().assign(flag=lambda d: np.where(d["x"] > 0, "True", "False"))
    df.to_csv(tmp_path / "t.csv", index=False)
    src = open_source(str(tmp_path / "t.csv"), target="y", exclude=["city"])
    assert src.feature_names == ["x", "flag"]
    X = src.to_arrays()[0]
    np.testing.assert_array_equal(X[:, 1], (df["x"] > 0).to_numpy(np.float64))
    bools = df.assign(flag=df["x"] > 0).drop(columns="city")  # as pandas holds booleans
    np.testing.assert_array_equal(open_source(bools, target="y").to_arrays()[0], X)


def test_a_latin1_file_is_named_as_not_utf8(tmp_path):
    """Before: 'column 'city' has type binary, which gpscale cannot use'."""
    path = tmp_path / "t.csv"
    _table().to_csv(path, index=False, encoding="latin-1")
    with pytest.raises(ValueError) as err:
        open_source(str(path), target="y")
    msg = str(err.value)
    assert "not UTF-8" in msg and "Latin-1" in msg and "iconv" in msg
    assert "type binary" not in msg


def test_a_semicolon_separated_file_gets_a_delimiter_hint(tmp_path):
    path = tmp_path / "t.csv"
    _table().to_csv(path, index=False, sep=";")
    with pytest.raises(ValueError, match=r"separated by semicolons, not commas.*sep=';'"):
        open_source(str(path), target="y")


def test_a_category_empty_in_the_first_file_of_a_glob_is_read_from_the_next(tmp_path):
    """Before: read as a number column from the first file, then 'non-numeric column in
    the second file', blaming the file that was right."""
    df = _table(80)
    first = df[:40].assign(city=np.nan)
    first.to_csv(tmp_path / "a.csv", index=False)
    df[40:].to_csv(tmp_path / "b.csv", index=False)
    src = open_source(str(tmp_path / "*.csv"), target="y")
    code = src.encoding.code("city")
    assert code.kind == "category" and code.missing
    assert set(code.levels) == set(df["city"][40:])


def test_fit_of_a_frame_with_text_columns_and_y_names_target():
    df = _table()
    with pytest.raises(ValueError, match=r"gpscale.fit\(df.assign\(y=y\), target='y'\)"):
        gpscale.fit(df.drop(columns="y"), df["y"], **FIT)


@pytest.mark.skipif(not GPSCALE.exists(), reason=f"no gpscale next to {sys.executable}")
def test_out_of_range_date_features_and_the_target_in_columns_exit_2(tmp_path):
    """Usage errors (the command line itself, whatever the file holds): exit 2, as the
    README classes them; before, exit 1."""
    df = _table().assign(when=pd.date_range("2020-01-01", periods=60).strftime("%Y-%m-%d"))
    df.to_csv(tmp_path / "t.csv", index=False)
    common = ["fit", "--data", "t.csv", "--target", "y", "--out", "m.pt"]
    code, err = _gpscale(*common, "--date-features", "monthly", cwd=tmp_path)
    assert code == 2 and "['monthly'] is not one of" in err
    code, err = _gpscale(*common, "--columns", "x,y", cwd=tmp_path)
    assert code == 2 and "--columns lists the target 'y'" in err
    assert not (tmp_path / "m.pt").exists()


def test_rows_left_out_are_not_called_a_column_and_info_json_lists_levels(tmp_path):
    from gpscale.commands.info import info_text, model_info

    df = _table(80)
    df.loc[:19, "y"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = gpscale.fit(df, target="y", **FIT)
    text = model.summary()
    assert "column 20" not in text and "20 training row(s) left out" in text
    model.save(tmp_path / "m.pt")
    info = model_info(tmp_path / "m.pt")
    assert info["table"] == {
        "columns": [{"name": "city", "kind": "category", "missing": False,
                     "levels": sorted(set(df["city"][20:]))},
                    {"name": "x", "kind": "number", "missing": False,
                     "mean": pytest.approx(df["x"][20:].mean())}],
        "rows_left_out": 20}
    text = info_text(info)
    assert "column   20" not in text
    assert "rows     20 training row(s) left out: their target was missing" in text


def test_the_smallest_jitter_is_not_warned_of_and_the_cli_says_each_once():
    """sgpr factorises K_ZZ at every pass; with one-hot columns its inducing points
    repeat and it needs a jitter of 1e-10 x its mean diagonal (the factorisation's own
    rounding): 18 warning lines before, none now; a larger jitter is said once per level
    on the command line."""
    import io

    import torch

    from gpscale.commands.stdio import cli_warnings
    from gpscale.linalg import NumericalWarning, robust_cholesky

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        robust_cholesky(torch.ones(4, 4, dtype=torch.float64))  # rank 1: needs 1e-10
    out = io.StringIO()
    with cli_warnings(out):
        warnings.simplefilter("always")
        for scale in (1.0, 1.1, 1.2):
            warnings.warn(f"Cholesky needed jitter {scale * 1e-6:.3g} (1e-06 x mean "
                          "diagonal) on a 64x64 matrix", NumericalWarning, stacklevel=1)
        warnings.warn("Cholesky needed jitter 1e-05 (1e-05 x mean diagonal) on a 64x64 "
                      "matrix", NumericalWarning, stacklevel=1)
    assert out.getvalue().count("gpscale: warning:") == 2


def test_a_column_name_with_a_comma_can_be_named(tmp_path):
    from gpscale.commands.usage import names

    assert names('"a,b", c') == ["a,b", "c"] and names("a, b") == ["a", "b"]
    df = _table().drop(columns="city").assign(**{"p,q": 1.0 + np.arange(60) % 3})
    df.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=r"""in double quotes: --exclude '"p,q"'"""):
        open_source(str(tmp_path / "t.csv"), target="y", exclude=["p", "q"])
    from gpscale import cli

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for flag, value in (("--exclude", '"p,q"'), ("--columns", 'x,"p,q"')):
            out = tmp_path / f"m{flag}.pt"
            assert cli.main(["fit", "--data", str(tmp_path / "t.csv"), "--target", "y",
                             flag, value, "--method", "exact", "--max-iter", "2", "-q",
                             "--out", str(out)]) == 0
            want = ["x"] if flag == "--exclude" else ["x", "p,q"]
            assert gpscale.load(out).feature_names == want


def test_iso_datetimes_ending_z_or_an_offset_are_dates(tmp_path):
    """Before: refused as 'not an ISO date'. An offset is read as the UTC instant (as a
    Parquet timestamp with a zone is); a column that mixes zoned and plain values is
    refused saying so."""
    stamps = pd.date_range("2020-01-01", periods=60, freq="7h")
    base = _table().drop(columns="city")
    got = {}
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S+02:00"):
        path = tmp_path / "t.csv"
        base.assign(when=stamps.strftime(fmt)).to_csv(path, index=False)
        src = open_source(str(path), target="y")
        got[fmt] = (src.encoding.code("when"), src.to_arrays()[0][:, 1])
    plain, zulu, offset = got.values()
    assert plain[0].kind == zulu[0].kind == offset[0].kind == "date"
    np.testing.assert_allclose(zulu[1], plain[1])
    assert zulu[0].origin - offset[0].origin == pytest.approx(2 / 24)
    mixed = base.assign(when=stamps.strftime("%Y-%m-%dT%H:%M:%S"))
    mixed.loc[5, "when"] = "2020-01-02T11:00:00Z"
    with pytest.raises(ValueError, match=r"mixes date-times with a time zone.*at position 5"):
        open_source(mixed, target="y")
