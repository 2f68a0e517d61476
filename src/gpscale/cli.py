"""Command line: ``gpscale demo | fit | predict | methods | info | bench``.

``gpscale fit --data train.csv --target y --out model.pt`` learns a GP from CSV or Parquet
files (a path, a glob such as ``'parts/*.parquet'`` or a directory; every column other
than the target is an input); ``gpscale predict --model model.pt --data new.csv --out
preds.csv`` streams the predictive ``mean,std`` (with ``--keep`` id columns first and
``--quantiles`` interval columns after) to CSV or Parquet (by the extension).
``gpscale methods [NAME]`` lists the training methods with their options and defaults;
``gpscale info MODEL`` describes a saved model in the data's own units.
``--scheduler ADDRESS`` / ``--workers N`` run the passes of the streaming methods on a
dask.distributed cluster.

Unix conventions:

- ``-`` is standard input for ``--data`` and ``--model`` (copied to a temporary file
  first, deleted at exit; CSV, gzipped CSV or Parquet, told from the first bytes) and
  standard output for ``--out`` (predictions as CSV; a model file only when stdout is not
  a terminal). When a result goes to stdout, every message goes to stderr.
- Exit status: 0 on success; **2 for usage errors** — the command line itself is wrong,
  whatever the files hold: argparse errors, an unknown method, kernel or option name, an
  option value of the wrong type, a quantile outside (0, 1), flags that do not go
  together (:class:`UsageError`); **1 for failures at run time** — the command line is
  well formed but running it failed: a missing or unreadable file, a column not in the
  data, a refused output path, a numerical failure, an error from torch; 130 on Ctrl-C
  (nothing written unless ``--save-partial``); 143 on SIGTERM (nothing written: an
  output's temporary file is removed, earlier files stay); 141 when the reader of stdout
  goes away (``| head``). A write that fails or falls short (a full disk) is a failure
  at run time, also on stdout. Errors print one line ``gpscale: error: ...`` and never a traceback
  (set ``GPSCALE_DEBUG=1`` to get one); warnings print ``gpscale: warning: ...``.
- Progress bars appear only when stderr is a terminal; ``--progress`` forces them,
  ``--quiet`` prints nothing but warnings and errors.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

from . import __version__, api
from .commands.stdio import STDIO, Spool, cli_warnings, explain, spool_stdin
from .commands.usage import (
    PREDICT_COLUMNS,
    UsageError,
    check_usage,
    count,
    fit_plan,
    method_help,
    names,
    quantile_column,
    quantiles,
)
from .files import Terminated, check_output, flush, sigterm_raises, write_all
from .io import find_files, prediction_source, training_data, training_source, write_table
from .kernels import KERNELS
from .parallel.cluster import connect, quiet_logs
from .plan import survey_cluster
from .threads import thread_limit

__all__ = ["main", "build_parser", "UsageError"]

#: rows predicted per chunk by ``gpscale predict`` (fewer for wide inputs: memory stays bounded)
PREDICT_ROWS = 65_536
#: exit status after SIGTERM (128 + 15, what a shell reports for a process it killed)
TERMINATED = 143
#: ``gpscale fit`` says how much memory a method that loads every row will hold above this
NOTICE_BYTES = 64 * 2**20
#: an editable install's repository root (src/gpscale/cli.py -> ../..), where the
#: ``benchmarks/`` package sits: ``gpscale bench`` run outside it runs them from there
CHECKOUT = Path(__file__).resolve().parents[2]


# -- parser ---------------------------------------------------------------------------------
def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The ``gpscale`` argument parser (``bench`` arguments are passed on untouched).
    ``argv``: with ``fit --method NAME --help`` in it, fit's help ends with that
    method's options."""
    parser = argparse.ArgumentParser(
        prog="gpscale", description="Gaussian-process hyperparameter learning at scale.",
        epilog="exit status: 0 success, 1 failure at run time, 2 usage error, 130 "
        "interrupted, 143 terminated. '-' as a file name is standard input / output.")
    parser.add_argument("--version", action="version", version=f"gpscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--threads", type=count(1), default=None,
                        help="CPU threads for torch during this command (default: torch's; at most "
                        "the CPU cores this process may use)")
    chatter = argparse.ArgumentParser(add_help=False)
    talk = chatter.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true",
                      help="no progress bars and no messages; only warnings and errors")
    talk.add_argument("--progress", action="store_true",
                      help="show progress bars even when stderr is not a terminal "
                      "(default: only on a terminal)")

    demo = sub.add_parser("demo", parents=[common, chatter],
                          help="forecast Mauna Loa CO2 with an exact GP (seconds)",
                          description="Fit an exact GP with the co2 kernel to the Mauna "
                          "Loa CO2 record before 1990 (monthly means of the weekly record "
                          "that statsmodels ships) and forecast the weeks of 1990-2001.")
    demo.add_argument("--out", default="gpscale-output",
                      help="folder for the forecast plot (default: gpscale-output, created)")
    demo.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    demo.add_argument("--max-iter", type=count(1), default=200,
                      help="L-BFGS iterations (default: 200)")
    demo.add_argument("--weekly", action="store_true",
                      help="train on every weekly value instead of monthly means "
                      "(about 4x the points, much slower)")

    method_help_text = method_help(argv)
    fit = sub.add_parser("fit", parents=[common, chatter],
                         help="learn a GP from CSV / Parquet files and save it",
                         description="Learn a GP from CSV (with a header) or Parquet files; "
                         "every column other than --target is an input.",
                         epilog=method_help_text or "the methods and their options: gpscale "
                         "methods; one method: gpscale fit --method NAME --help",
                         formatter_class=argparse.RawDescriptionHelpFormatter
                         if method_help_text else argparse.HelpFormatter)
    fit.add_argument("--data", required=True,
                     help="training data: a CSV or Parquet file, a glob ('parts/*.parquet') "
                     "or a directory of them; '-' reads CSV (or gzipped CSV, or Parquet) "
                     "from stdin, copied to a temporary file first")
    fit.add_argument("--target", required=True, help="name of the column to predict")
    fit.add_argument("--method", default="exact",
                     help=f"training method: {', '.join(api.METHODS)}, or auto: picked from "
                     "the data's size, the kernel and --budget (default: exact; see gpscale "
                     "methods)")
    fit.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                     help="with --method auto: the time the fit may take, which sizes the "
                     "model auto picks")
    fit.add_argument("--kernel", default=None,
                     help=f"kernel: auto, {', '.join(KERNELS)}; for tables with categorical "
                     "columns also rbf-ard-cat, matern52-ard-cat (ARD on the other columns "
                     "times an exchangeable kernel per categorical column) (default: auto, "
                     "the family chosen from the data by exact and sgpr, rbf-ard for other "
                     "methods; tanimoto with --smiles, hamming with --sequence)")
    fit.add_argument("--max-iter", type=count(1), default=None, help="optimiser iterations")
    fit.add_argument("--restarts", type=count(0), default=None,
                     help="extra optimiser runs from perturbed starts")
    fit.add_argument("--seed", type=int, default=None, help="random seed")
    fit.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="an option of the method, e.g. --option num_features=1024 "
                     "(repeatable; parsed by the type of the method's default; the "
                     "options: gpscale methods NAME)")
    fit.add_argument("--columns", type=names, default=None, metavar="A,B,...",
                     help="the input columns (default: every column but the target and "
                     "--exclude); text, category and date columns and missing values are "
                     "encoded (gpscale info shows how). In --columns, --exclude and "
                     "--categorical a name that holds a comma goes in double quotes, as in "
                     "a CSV header: --exclude '\"a,b\",c'")
    fit.add_argument("--exclude", type=names, default=[], metavar="A,B,...",
                     help="columns to leave out (e.g. an id; a name with a comma in double "
                     "quotes)")
    fit.add_argument("--categorical", type=names, default=[], metavar="A,B,...",
                     help="integer-coded columns to read as categories (text columns are)")
    fit.add_argument("--date-features", default="days", metavar="days|yearly|weekly,...",
                     help="a date column's inputs: its days since the first date (days, the "
                     "default), plus sin/cos of its day of the year (yearly) and weekday "
                     "(weekly), e.g. --date-features yearly,weekly")
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
    fit.add_argument("--workers", type=count(1), default=None, metavar="N",
                     help="start a local dask cluster of N worker processes for those passes")
    fit.add_argument("--out", required=True,
                     help="model file to write (e.g. model.pt); '-' writes it to stdout "
                     "(not to a terminal) and the messages to stderr")
    fit.add_argument("--save-partial", action="store_true",
                     help="when interrupted (Ctrl-C), save the model trained so far (the "
                     "command still exits 130); by default nothing is written")

    pred = sub.add_parser("predict", parents=[common, chatter],
                          help="predict with a saved model",
                          description="Write the predictive mean and standard deviation "
                          "(noise included) for each row of a CSV or Parquet input.")
    pred.add_argument("--model", required=True,
                      help="model file written by gpscale fit ('-': read from stdin)")
    pred.add_argument("--data", required=True,
                      help="CSV / Parquet file(s) with the training input columns (a glob or "
                      "a directory; a target column is ignored); '-' reads CSV (or gzipped "
                      "CSV, or Parquet) from stdin, copied to a temporary file first")
    pred.add_argument("--out", required=True,
                      help="file to write, columns mean,std: .csv, .csv.gz or .parquet; "
                      "'-' writes CSV to stdout (messages then go to stderr)")
    pred.add_argument("--device", default=None, help="torch device to predict on (e.g. cpu)")
    pred.add_argument("--keep", action="append", default=[], metavar="COLUMN",
                      help="copy this column of the input (e.g. an id) into the output, "
                      "before mean,std, as written (repeatable; in the order given)")
    pred.add_argument("--quantiles", action="append", default=[], type=quantiles,
                      metavar="Q[,Q...]",
                      help="add columns qQ (e.g. --quantiles 0.025,0.975 gives q0.025, "
                      "q0.975): quantiles of the Gaussian predictive distribution of a new "
                      "observation, mean + std * Phi^-1(Q), 0 < Q < 1")

    meth = sub.add_parser("methods", help="list the training methods and their options",
                          description="Every training method with what it is, when to use "
                          "it and its options (gpscale fit --option NAME=VALUE) with their "
                          "defaults; with NAME, that method in detail.")
    meth.add_argument("name", nargs="?", metavar="NAME", help="one method, in detail")
    meth.add_argument("--json", action="store_true", help="machine-readable output")

    info = sub.add_parser("info", help="describe a saved model",
                          description="Method, kernel, hyperparameters in the data's own "
                          "units, fit summary, training size and file format of a model "
                          "written by gpscale fit.")
    info.add_argument("model", metavar="MODEL", help="model file ('-': read from stdin)")
    info.add_argument("--json", action="store_true", help="machine-readable output")

    sub.add_parser("bench", help="run a benchmark (gpscale bench --help)", add_help=False)
    return parser


# -- running --------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # SIGTERM unwinds like Ctrl-C: temporary files go, earlier outputs stay
        with cli_warnings(), sigterm_raises(), spool_stdin() as spool:
            return _status(argv, spool)  # copies of stdin live until the message
    except Terminated:  # while cleaning up
        return TERMINATED


def _status(argv: list[str], spool: Spool) -> int:
    """Run and map what happened to the exit status (see the module docstring)."""
    try:
        return _run(argv, spool)
    except KeyboardInterrupt:
        print("gpscale: interrupted; no output was written (earlier files are as they were)",
              file=sys.stderr)
        return 130
    except Terminated:
        print("gpscale: terminated (SIGTERM); no output was written (earlier files are as "
              "they were)", file=sys.stderr)
        return TERMINATED
    except BrokenPipeError:  # the reader of stdout is gone (e.g. | head): not an error
        _silence_stdout()
        return 141
    except UsageError as err:
        print(f"gpscale: error: {explain(str(err))}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - every failure at run time is one line
        if os.environ.get("GPSCALE_DEBUG"):
            raise
        print(f"gpscale: error: {explain(_message(err))}", file=sys.stderr)
        return 1


def _run(argv: list[str], spool: Spool) -> int:
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version or a usage error (already printed)
        return stop.code if isinstance(stop.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    check_usage(args)
    for name in ("data", "model"):  # '-': standard input, copied to a file
        if getattr(args, name, None) == STDIO:
            setattr(args, name, spool.path())
    with thread_limit(args.threads if "threads" in args else None):
        return COMMANDS[args.command](args)


def _message(err: BaseException) -> str:
    """The one line that describes ``err`` (torch's messages run over several lines)."""
    text = " ".join(str(err).split())
    if isinstance(err, (ValueError, OSError, ImportError)) and text:
        return text
    if isinstance(err, MemoryError):
        return "out of memory (MemoryError); use fewer rows, a streaming method or a " \
               "smaller option (e.g. num_features)"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that Python's exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _say(args: argparse.Namespace, *lines: str, stderr: bool = False) -> None:
    """Print messages (to stderr when stdout carries a result, nowhere with --quiet)."""
    if args.quiet:
        return
    stream = sys.stderr if stderr or args.out == STDIO else sys.stdout
    for line in lines:
        print(line, file=stream)


def _check_out(out: str, inputs: list[str]) -> None:
    if out != STDIO:
        check_output(out, inputs=inputs)


# -- commands -------------------------------------------------------------------------------
def _demo(args: argparse.Namespace) -> int:
    from . import demo

    progress = False if args.quiet else True if args.progress else None
    demo.run(out=args.out, plot=not args.no_plot, max_iter=args.max_iter, weekly=args.weekly,
             progress=progress)
    return 0


def _fit(args: argparse.Namespace) -> int:
    _check_out(args.out, find_files(args.data))
    if args.out == STDIO and sys.stdout.isatty():
        raise ValueError("--out - would write a binary model file to the terminal; "
                         "redirect stdout (> model.pt) or give a file name")
    early = survey_cluster(args.method, args.scheduler, args.workers)
    with quiet_logs(early != (None, None)), connect(*early) as client:
        predictor = _fit_on(args, client)
    interrupted = predictor.result.reason == "interrupted"
    where = "stdout" if args.out == STDIO else args.out
    if interrupted and not args.save_partial:
        print(f"gpscale: interrupted; nothing was saved ({where} is as it was). "
              "--save-partial keeps the model trained so far", file=sys.stderr)
        return 130
    if args.out == STDIO:
        _model_to_stdout(predictor)
    else:
        predictor.save(args.out)
    _say(args, predictor.summary(), f"{'partial ' if interrupted else ''}model saved to {where}")
    return 130 if interrupted else 0


def _fit_on(args: argparse.Namespace, client: Any) -> api.Predictor:
    """``gpscale fit``'s model; ``client``: the cluster opened before the data for a
    named method that uses one (the survey pass runs there), else None."""
    source, kernel = training_source(args.data, args.target, args.kernel, smiles=args.smiles,
                                     sequence=args.sequence, columns=args.columns,
                                     exclude=args.exclude, categorical=args.categorical,
                                     date_features=args.date_features, client=client)
    data = training_data(source)
    k, kernel_name = api.resolve_kernel(kernel, data.num_features, data.inputs)
    plan = fit_plan(args, data, k, kernel_auto=kernel_name == "auto")
    if plan.choice is not None:
        _say(args, f"gpscale: --method auto picked {plan.choice}", stderr=True)
    for note in plan.notes:
        _say(args, f"gpscale: {note}", stderr=True)
    if not plan.method.streams and (size := source.memory_bytes()) >= NOTICE_BYTES:
        _say(args, f"gpscale: method {plan.method.name!r} holds all rows in memory: "
             f"{size / 2**20:.0f} MiB of float64 for {source.num_rows()} rows x "
             f"{source.num_features} inputs (the streaming methods: "
             f"{', '.join(n for n, m in api.METHODS.items() if m.streams)})", stderr=True)
    cluster = (args.scheduler, args.workers) if client is None else (client, None)
    with quiet_logs(plan.on_cluster):
        return api.run(plan, data, k, kernel_name, standardize=not args.no_standardize,
                       scheduler=cluster[0], workers=cluster[1])


def _model_to_stdout(predictor: api.Predictor) -> None:
    """The model file on stdout, every byte (a raw stdout under ``python -u`` may take
    part of it; see :func:`gpscale.files.write_all`)."""
    data = predictor.to_bytes()
    sys.stdout.flush()
    write_all(sys.stdout.buffer, data, "standard output")
    flush(sys.stdout.buffer, "standard output")


def _predict(args: argparse.Namespace) -> int:
    _check_out(args.out, [*find_files(args.data), args.model])
    predictor = api.load(args.model, device=args.device)
    keep = list(args.keep)
    source = prediction_source(predictor, args.data, keep=keep)  # read as it was trained
    quantiles = [(quantile_column(q), NormalDist().inv_cdf(q)) for q in args.quantiles]

    def rows():
        for b in source.batches(rows=min(PREDICT_ROWS, source.default_rows())):
            mean, std = predictor.predict_encoded(b.X, return_std=True)
            chunk: dict[str, Any] = {k: b.keep[k] for k in keep}
            chunk.update(mean=mean, std=std)
            chunk.update((name, mean + z * std) for name, z in quantiles)
            yield chunk

    out_columns = [*keep, *PREDICT_COLUMNS, *(name for name, _ in quantiles)]
    n = write_table(args.out, rows(), columns=out_columns)
    where = "stdout" if args.out == STDIO else args.out
    _say(args, f"wrote {n} predictions ({','.join(out_columns)}) to {where}")
    return 0


def _methods(args: argparse.Namespace) -> int:
    import json

    from .commands.methods import method_text, methods_json, methods_text

    if args.json:
        found = methods_json([args.name] if args.name else None)
        print(json.dumps(found[0] if args.name else found, indent=2))
    else:
        print(method_text(args.name) if args.name else methods_text())
    return 0


def _info(args: argparse.Namespace) -> int:
    import json

    from .commands.info import info_text, model_info

    found = model_info(args.model)
    found["file"] = explain(found["file"])
    print(json.dumps(found, indent=2) if args.json else info_text(found))
    return 0


def _bench(rest: list[str]) -> int:
    """``gpscale bench ...`` is ``python -m benchmarks ...`` in a child process, in the
    current folder (so ``--out`` and the reports land where they did). The benchmarks are
    a checkout's lab, not part of the package: the library neither imports them nor edits
    its own ``sys.path`` to reach them (both would change what this process, and the
    processes it spawns, import). The child finds them in the current folder (a checkout's
    root), installed, or, run from elsewhere, beside the ``src/`` of the editable checkout
    this gpscale comes from (:data:`CHECKOUT`, put on the child's PYTHONPATH)."""
    env = dict(os.environ)
    if importlib.util.find_spec("benchmarks") is None \
            and not Path("benchmarks", "__init__.py").is_file():
        if not (CHECKOUT / "benchmarks" / "__init__.py").is_file():
            raise ValueError("gpscale bench is unavailable (the benchmarks are not in the "
                             "installed package); run it from a gpscale checkout installed "
                             "with: pip install -e '.[bench]'")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"),
                                                          str(CHECKOUT)]))
    for stream in (sys.stdout, sys.stderr):  # what this process printed comes first
        stream.flush()
    return subprocess.run([sys.executable, "-m", "benchmarks", *rest], env=env).returncode


COMMANDS = {"demo": _demo, "fit": _fit, "predict": _predict, "methods": _methods,
            "info": _info}

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
