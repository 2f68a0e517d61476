"""Command line: ``gpscale demo | fit | predict | bench``.

``gpscale fit --data train.csv --target y --out model.pt`` learns a GP from CSV or Parquet
files (a path, a glob such as ``'parts/*.parquet'`` or a directory; every column other
than the target is an input); ``gpscale predict --model model.pt --data new.csv --out
preds.csv`` streams the predictive ``mean,std`` to CSV or Parquet (by the extension).
``--scheduler ADDRESS`` / ``--workers N`` run the passes of the streaming methods on a
dask.distributed cluster. Errors print ``gpscale: error: ...`` and exit with status 2;
Ctrl-C exits with 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__, api
from .files import check_output
from .io import find_files, prediction_source, training_source, write_table
from .kernels import KERNELS
from .methods.options import parse_option, placement_options
from .threads import thread_limit

__all__ = ["main", "build_parser"]

#: rows predicted per chunk by ``gpscale predict`` (fewer for wide inputs: memory stays bounded)
PREDICT_ROWS = 65_536
#: ``gpscale fit`` says how much memory a method that loads every row will hold above this
NOTICE_BYTES = 64 * 2**20


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

    fit = sub.add_parser("fit", parents=[common],
                         help="learn a GP from CSV / Parquet files and save it",
                         description="Learn a GP from CSV (with a header) or Parquet files; "
                         "every column other than --target is an input.")
    fit.add_argument("--data", required=True,
                     help="training data: a CSV or Parquet file, a glob ('parts/*.parquet') "
                     "or a directory of them")
    fit.add_argument("--target", required=True, help="name of the column to predict")
    fit.add_argument("--method", default="exact",
                     help=f"training method: {', '.join(api.METHODS)} (default: exact)")
    fit.add_argument("--kernel", default=None,
                     help=f"kernel: {', '.join(KERNELS)} (default: rbf-ard; tanimoto with "
                     "--smiles, hamming with --sequence)")
    fit.add_argument("--max-iter", type=int, default=None, help="optimiser iterations")
    fit.add_argument("--restarts", type=int, default=None,
                     help="extra optimiser runs from perturbed starts")
    fit.add_argument("--seed", type=int, default=None, help="random seed")
    fit.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="an option of the method, e.g. --option num_features=1024 "
                     "(repeatable; parsed by the type of the method's default)")
    fit.add_argument("--smiles", metavar="COLUMN", default=None,
                     help="the inputs are Morgan count fingerprints of this column's SMILES "
                     "(reaction SMILES A.B>>C: reactant and product counts side by side); "
                     "other columns are ignored. Needs RDKit: pip install 'gpscale[chem]'")
    fit.add_argument("--sequence", metavar="COLUMN", default=None,
                     help="the inputs are this column's sequences: integer codes for "
                     "--kernel hamming (aligned, equal length), 3-mer counts for --kernel "
                     "spectrum; other columns are ignored")
    fit.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda:0")
    fit.add_argument("--dtype", default=None, help="float64 (default) or float32")
    fit.add_argument("--no-standardize", action="store_true",
                     help="train on the raw columns (default: standardise X and y)")
    fit.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="dask.distributed scheduler (e.g. tcp://127.0.0.1:8786) that runs "
                     "the statistics passes of the streaming methods (rff)")
    fit.add_argument("--workers", type=int, default=None, metavar="N",
                     help="start a local dask cluster of N worker processes for those passes")
    fit.add_argument("--out", required=True, help="model file to write (e.g. model.pt)")
    fit.add_argument("--save-partial", action="store_true",
                     help="when interrupted (Ctrl-C), save the model trained so far (the "
                     "command still exits 130); by default nothing is written")

    pred = sub.add_parser("predict", parents=[common], help="predict with a saved model",
                          description="Write the predictive mean and standard deviation "
                          "(noise included) for each row of a CSV.")
    pred.add_argument("--model", required=True, help="model file written by gpscale fit")
    pred.add_argument("--data", required=True,
                      help="CSV / Parquet file(s) with the training input columns (a glob or "
                      "a directory; a target column is ignored)")
    pred.add_argument("--out", required=True,
                      help="file to write, columns mean,std: .csv or .parquet")
    pred.add_argument("--device", default=None, help="torch device to predict on (e.g. cpu)")

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
        print("gpscale: interrupted; no output was written (earlier files are as they were)",
              file=sys.stderr)
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
    check_output(args.out, inputs=find_files(args.data))
    method = api.get_method(args.method)
    placement = placement_options(method, args.device, args.dtype)
    source, kernel = training_source(args.data, args.target, args.kernel, smiles=args.smiles,
                                     sequence=args.sequence)
    if not method.streams and (size := source.memory_bytes()) >= NOTICE_BYTES:
        print(f"gpscale: method {method.name!r} holds all rows in memory: "
              f"{size / 2**20:.0f} MiB of float64 for {source.num_rows()} rows x "
              f"{source.num_features} inputs (the streaming methods: "
              f"{', '.join(n for n, m in api.METHODS.items() if m.streams)})", file=sys.stderr)
    options = {k: v for k, v in (("max_iter", args.max_iter), ("restarts", args.restarts),
                                 ("seed", args.seed)) if v is not None}
    options.update(parse_option(method, text) for text in args.option)
    options.update(placement)
    if method.options is None or "progress" in method.options:
        options["progress"] = True
    predictor = api.fit(source, method=args.method, kernel=kernel,
                        standardize=not args.no_standardize, scheduler=args.scheduler,
                        workers=args.workers, **options)
    interrupted = predictor.result.reason == "interrupted"
    if interrupted and not args.save_partial:
        print(f"gpscale: interrupted; nothing was saved ({args.out} is as it was). "
              "--save-partial keeps the model trained so far", file=sys.stderr)
        return 130
    predictor.save(args.out)
    print(predictor.summary())
    print(f"{'partial ' if interrupted else ''}model saved to {args.out}")
    return 130 if interrupted else 0


def _predict(args: argparse.Namespace) -> int:
    check_output(args.out, inputs=[*find_files(args.data), args.model])
    predictor = api.load(args.model, device=args.device)
    source = prediction_source(predictor, args.data)  # read as the model was trained

    def rows():
        for X, _ in source.chunks(rows=min(PREDICT_ROWS, source.default_rows())):
            mean, std = predictor.predict(X, return_std=True)
            yield {"mean": mean, "std": std}

    n = write_table(args.out, rows(), columns=["mean", "std"])
    print(f"wrote {n} predictions (mean,std) to {args.out}")
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
