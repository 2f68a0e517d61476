"""What the ``gpscale`` command line calls a usage error (exit status 2): the command
line itself is wrong, whatever the files hold — argparse's own errors (including the
argument types here), an unknown method, kernel or option name, an option value of the
wrong type, flags that do not go together. Everything found while running (files,
columns, data, numerics) is a failure at run time (exit status 1); see
:mod:`gpscale.cli`."""

from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Sequence
from typing import Any

from .. import api
from ..io import file_format
from ..io.dates import date_features
from ..io.inputs import TABLE_KERNELS
from ..kernels import KERNELS
from ..plan import AUTO, Plan, PlanError, make_plan
from .stdio import STDIO

__all__ = ["UsageError", "PREDICT_COLUMNS", "count", "names", "quantiles", "quantile_column",
           "method_help", "check_usage", "fit_plan"]

#: output columns of ``gpscale predict`` besides ``--keep`` and ``--quantiles``
PREDICT_COLUMNS = ("mean", "std")
#: the precisions the methods compute in (``--dtype``)
DTYPES = ("float64", "float32")
#: ``--seed`` seeds torch's generator, which takes 64-bit unsigned integers
SEED_LIMIT = 2**64


class UsageError(ValueError):
    """The command line itself is wrong (exit status 2), as opposed to a failure while
    running it (exit status 1)."""


# -- argument types -------------------------------------------------------------------------
def count(least: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
        return value

    parse.__name__ = "count"
    return parse


def names(text: str) -> list[str]:
    """``a,b`` -> ["a", "b"] (column names, stripped of spaces); a name that holds a
    comma is quoted as in a CSV header: ``"a,b",c`` -> ["a,b", "c"]."""
    try:
        out = [part.strip() for part in next(csv.reader([text], skipinitialspace=True))]
    except (csv.Error, StopIteration):
        out = []
    if not out or not all(out):
        raise argparse.ArgumentTypeError(f"expected column names separated by commas (a "
                                         f"name that holds a comma in double quotes: "
                                         f"'\"a,b\",c'), got {text!r}")
    return out


def quantiles(text: str) -> list[float]:
    """``0.025,0.975`` -> [0.025, 0.975], each strictly between 0 and 1."""
    out = []
    for part in text.split(","):
        try:
            q = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected numbers between 0 and 1 separated by commas (e.g. 0.025,0.975), "
                f"got {text!r}") from None
        if not (math.isfinite(q) and 0.0 < q < 1.0):
            raise argparse.ArgumentTypeError(f"a quantile must lie strictly between 0 and "
                                             f"1, got {part.strip()!r}")
        out.append(q)
    return out


def quantile_column(q: float) -> str:
    """Output column name of quantile ``q``: ``q0.025``."""
    return f"q{q!r}"


def method_help(argv: Sequence[str]) -> str | None:
    """The options of the method named in ``fit --method NAME --help``, else None."""
    argv = list(argv)
    if argv[:1] != ["fit"] or not {"-h", "--help"} & set(argv):
        return None
    name = None
    for i, a in enumerate(argv):
        if a == "--method" and i + 1 < len(argv):
            name = argv[i + 1]
        elif a.startswith("--method="):
            name = a.split("=", 1)[1]
    if name not in api.METHODS:
        return None
    from .methods import method_text

    return "method " + method_text(name)


def check_usage(args: argparse.Namespace) -> None:
    """UsageError for what is wrong on the command line itself, before any work."""
    if args.command == "methods" and args.name is not None and args.name not in api.METHODS:
        raise UsageError(f"unknown method {args.name!r}; choose one of {sorted(api.METHODS)}")
    if args.command == "fit":
        _check_fit_values(args)
        _check_fit_columns(args)
        if args.kernel is not None and args.kernel.lower() not in {*KERNELS, *TABLE_KERNELS}:
            raise UsageError(f"unknown kernel {args.kernel!r}; choose one of "
                             f"{sorted(KERNELS)}, or for tables with categorical columns "
                             f"{sorted(TABLE_KERNELS)}")
        if args.method != AUTO:  # auto's plan needs the data: made once they are open
            fit_plan(args)
    if args.command == "predict":
        if args.model == STDIO and args.data == STDIO:
            raise UsageError("--model and --data cannot both be '-' (standard input can be "
                             "read once); give one of them as a file")
        if args.out != STDIO and file_format(args.out) is None:
            raise UsageError(f"cannot tell the format of --out {args.out!r} from its "
                             "extension; name it .csv, .csv.gz, .parquet or .pq (or - for "
                             "CSV on stdout)")
        taken = list(args.keep)
        args.quantiles = [q for qs in args.quantiles for q in qs]
        names = taken + list(PREDICT_COLUMNS) + [quantile_column(q) for q in args.quantiles]
        dupes = sorted({c for c in names if names.count(c) > 1})
        if dupes:
            raise UsageError(f"output column(s) {dupes} would appear twice: give each "
                             "--keep column and quantile once, and do not --keep a column "
                             f"named {' or '.join(PREDICT_COLUMNS)}")


def _check_fit_values(args: argparse.Namespace) -> None:
    """UsageError for a ``--dtype`` no method computes in, a ``--seed`` torch cannot
    take and a ``--budget`` that is not a positive number of seconds: checked here,
    before any work, so they are not internal errors later."""
    if args.dtype is not None and args.dtype.strip().removeprefix("torch.") not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)} (the precisions the "
                         f"methods compute in), got {args.dtype!r}")
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        raise UsageError(f"--budget must be a positive number of seconds, got "
                         f"{args.budget:g}")
    if args.seed is not None and not 0 <= args.seed < SEED_LIMIT:
        raise UsageError(f"--seed must be a whole number from 0 to 2**64 - 1, got "
                         f"{args.seed}")


def _check_fit_columns(args: argparse.Namespace) -> None:
    """UsageError for column flags that contradict each other or a ``--date-features``
    value that is not one, whatever the data hold."""
    try:
        date_features(args.date_features)
    except ValueError as err:
        raise UsageError(str(err)) from None
    target = getattr(args, "target", None)
    if target is not None and args.columns is not None and target in args.columns:
        raise UsageError(f"--columns lists the target {target!r}; the inputs cannot include "
                         "the target: leave it out of --columns")


def fit_plan(args: argparse.Namespace, source: Any = None, kernel: Any = None,
             kernel_auto: bool = False) -> Plan:
    """The :class:`~gpscale.plan.Plan` of ``gpscale fit`` (:func:`gpscale.plan.make_plan`
    on its flags; ``kernel_auto``: the kernel family is chosen from the data); a refused
    request is a UsageError."""
    options = {k: v for k, v in (("max_iter", args.max_iter), ("restarts", args.restarts),
                                 ("seed", args.seed)) if v is not None}
    progress = False if args.quiet else True if args.progress else None
    try:
        return make_plan(source, args.method, kernel, options=options,
                         option_text=args.option, defaults={"progress": progress},
                         budget=args.budget, scheduler=args.scheduler, workers=args.workers,
                         device=args.device, dtype=args.dtype, door="cli",
                         kernel_auto=kernel_auto)
    except PlanError as err:
        raise UsageError(str(err)) from None
