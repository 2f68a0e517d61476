"""Command line: ``gpscale demo | fit | predict | bench``.

``gpscale fit --data train.csv --target y --out model.pt`` learns a GP from a CSV with a
header (every column other than the target is an input); ``gpscale predict --model
model.pt --data new.csv --out preds.csv`` writes the predictive ``mean,std``.
Errors print ``gpscale: error: ...`` and exit with status 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import __version__, api
from .files import atomic_path
from .kernels import KERNELS
from .threads import thread_limit

__all__ = ["main", "build_parser", "read_csv", "csv_columns", "write_predictions"]


def build_parser() -> argparse.ArgumentParser:
    """The ``gpscale`` argument parser (``bench`` arguments are passed on untouched)."""
    parser = argparse.ArgumentParser(
        prog="gpscale", description="Gaussian-process hyperparameter learning at scale.")
    parser.add_argument("--version", action="version", version=f"gpscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch during this command (default: torch's)")

    demo = sub.add_parser("demo", parents=[common],
                          help="forecast Mauna Loa CO2 with an exact GP (seconds)",
                          description="Fit an exact GP with the co2 kernel to the Mauna "
                          "Loa CO2 record before 1990 (monthly means of the weekly record "
                          "that statsmodels ships) and forecast the weeks of 1990-2001.")
    demo.add_argument("--out", default="gpscale-output",
                      help="folder for the forecast plot (default: gpscale-output, created)")
    demo.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    demo.add_argument("--max-iter", type=int, default=200,
                      help="L-BFGS iterations (default: 200)")
    demo.add_argument("--weekly", action="store_true",
                      help="train on every weekly value instead of monthly means "
                      "(about 4x the points, much slower)")

    fit = sub.add_parser("fit", parents=[common], help="learn a GP from a CSV file and save it",
                         description="Learn a GP from a CSV with a header; every column "
                         "other than --target is an input.")
    fit.add_argument("--data", required=True, help="training CSV (with a header row)")
    fit.add_argument("--target", required=True, help="name of the column to predict")
    fit.add_argument("--method", default="exact",
                     help=f"training method: {', '.join(api.METHODS)} (default: exact)")
    fit.add_argument("--kernel", default="rbf-ard",
                     help=f"kernel: {', '.join(KERNELS)} (default: rbf-ard)")
    fit.add_argument("--max-iter", type=int, default=None, help="optimiser iterations")
    fit.add_argument("--restarts", type=int, default=None,
                     help="extra optimiser runs from perturbed starts")
    fit.add_argument("--seed", type=int, default=None, help="random seed")
    fit.add_argument("--no-standardize", action="store_true",
                     help="train on the raw columns (default: standardise X and y)")
    fit.add_argument("--out", required=True, help="model file to write (e.g. model.pt)")

    pred = sub.add_parser("predict", parents=[common], help="predict with a saved model",
                          description="Write the predictive mean and standard deviation "
                          "(noise included) for each row of a CSV.")
    pred.add_argument("--model", required=True, help="model file written by gpscale fit")
    pred.add_argument("--data", required=True,
                      help="CSV with the training input columns (a target column is ignored)")
    pred.add_argument("--out", required=True, help="CSV to write, columns mean,std")

    sub.add_parser("bench", help="run a benchmark (gpscale bench --help)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["bench"]:
            return _bench(argv[1:])
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as stop:  # --help, --version or a usage error (already printed)
            return stop.code if isinstance(stop.code, int) else 2
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        with thread_limit(args.threads):
            return {"demo": _demo, "fit": _fit, "predict": _predict}[args.command](args)
    except KeyboardInterrupt:
        print("gpscale: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as err:
        print(f"gpscale: error: {err}", file=sys.stderr)
        return 2


# -- commands -------------------------------------------------------------------------------
def _demo(args: argparse.Namespace) -> int:
    from . import demo

    demo.run(out=args.out, plot=not args.no_plot, max_iter=args.max_iter, weekly=args.weekly)
    return 0


def _fit(args: argparse.Namespace) -> int:
    _check_out_dir(args.out)
    method = api.get_method(args.method)
    header, rows = read_csv(args.data)
    if args.target not in header:
        raise ValueError(f"target column {args.target!r} is not in {args.data}; available "
                         f"columns: {', '.join(header)}")
    inputs = [c for c in header if c != args.target]
    if not inputs:
        raise ValueError(f"{args.data} has no input columns besides the target "
                         f"{args.target!r}")
    X = csv_columns(args.data, header, rows, inputs)
    y = csv_columns(args.data, header, rows, [args.target])[:, 0]
    options = {k: v for k, v in (("max_iter", args.max_iter), ("restarts", args.restarts),
                                 ("seed", args.seed)) if v is not None}
    if method.options is None or "progress" in method.options:
        options["progress"] = True
    predictor = api.fit(X, y, method=args.method, kernel=args.kernel,
                        standardize=not args.no_standardize, **options)
    predictor.feature_names, predictor.target_name = inputs, args.target
    predictor.save(args.out)
    print(predictor.summary())
    print(f"model saved to {args.out}")
    return 0


def _predict(args: argparse.Namespace) -> int:
    _check_out_dir(args.out)
    predictor = api.load(args.model)
    header, rows = read_csv(args.data)
    X = csv_columns(args.data, header, rows, predictor.match_columns(header, args.data))
    mean, std = predictor.predict(X, return_std=True)
    write_predictions(args.out, mean, std)
    print(f"wrote {len(mean)} predictions (mean,std) to {args.out}")
    return 0


def _bench(rest: list[str]) -> int:
    try:
        bench = importlib.import_module("gpscale.bench")
    except ImportError as err:
        raise ValueError(f"gpscale bench is unavailable ({err}); install the benchmark "
                         "extras: pip install 'gpscale[bench]'") from None
    bench_main = getattr(bench, "main", None)
    if bench_main is None:
        raise ValueError("gpscale bench is unavailable: gpscale.bench has no main()")
    status = bench_main(rest)
    return int(status) if status is not None else 0


# -- CSV in and out -------------------------------------------------------------------------
def _check_out_dir(out: str) -> None:
    parent = Path(out).parent
    if not parent.is_dir():
        raise FileNotFoundError(f"output directory {str(parent)!r} does not exist; "
                                "create it first")


def read_csv(path: str | Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, cells) rows of a CSV; blank lines are skipped."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"data file {str(path)!r} not found")
    try:
        with open(p, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            rows = [(reader.line_num, r) for r in reader if r and any(c.strip() for c in r)]
    except (UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"could not read {str(path)!r} as a CSV file ({err})") from None
    if not header or not any(h.strip() for h in header):
        raise ValueError(f"{str(path)!r} is empty; expected a header row of column names")
    header = [h.strip() for h in header]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes or "" in header:
        raise ValueError(f"{str(path)!r}: column names must be unique and non-empty "
                         f"(duplicated: {dupes})")
    if not rows:
        raise ValueError(f"{str(path)!r} has a header but no data rows")
    for line, r in rows:
        if len(r) != len(header):
            raise ValueError(f"{str(path)!r} line {line}: {len(r)} fields, but the header "
                             f"has {len(header)}")
    return header, rows


def csv_columns(path: str | Path, header: list[str],
                rows: list[tuple[int, list[str]]], names: list[str]) -> np.ndarray:
    """The named columns as a float64 (n, len(names)) array; ValueError naming each
    non-numeric column or missing value."""
    idx = [header.index(c) for c in names]
    out = np.empty((len(rows), len(names)))
    text: dict[str, tuple[int, str]] = {}
    missing: dict[str, int] = {}
    for i, (line, r) in enumerate(rows):
        for j, k in enumerate(idx):
            cell = r[k].strip()
            try:
                v = float(cell)
            except ValueError:
                if cell.lower() in ("", "na", "n/a", "null", "none"):
                    missing.setdefault(names[j], line)
                else:
                    text.setdefault(names[j], (line, cell))
                continue
            if not math.isfinite(v):
                missing.setdefault(names[j], line)
            out[i, j] = v
    if text:
        where = "; ".join(f"{c!r} (e.g. {v!r} on line {n})" for c, (n, v) in text.items())
        raise ValueError(f"non-numeric column(s) in {str(path)!r}: {where}. Every column "
                         "other than the target is used as an input: remove these columns "
                         "or encode them as numbers")
    if missing:
        where = "; ".join(f"{c!r} (first on line {n})" for c, n in missing.items())
        raise ValueError(f"missing or non-finite values in {str(path)!r}: {where}. Drop or "
                         "impute those rows")
    return out


def write_predictions(path: str | Path, mean: np.ndarray, std: np.ndarray) -> None:
    """Write ``mean,std`` rows to ``path`` via a temporary file and a rename."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mean", "std"])
        w.writerows((repr(float(m)), repr(float(s))) for m, s in zip(mean, std))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
