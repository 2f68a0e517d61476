"""What the ``gpscale`` command line calls a usage error (exit status 2): the command
line itself is wrong, whatever the files hold — argparse's own errors (including the
argument types here), an unknown method, kernel or option name, an option value of the
wrong type, flags that do not go together. Everything found while running (files,
columns, data, numerics) is a failure at run time (exit status 1); see
:mod:`gpscale.cli`."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from .. import api
from ..io import file_format
from ..kernels import KERNELS
from ..methods.options import parse_option
from .stdio import STDIO

__all__ = ["UsageError", "PREDICT_COLUMNS", "count", "quantiles", "quantile_column",
           "method_help", "check_usage", "fit_options"]

#: output columns of ``gpscale predict`` besides ``--keep`` and ``--quantiles``
PREDICT_COLUMNS = ("mean", "std")


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
    if args.command == "fit" and args.method != "auto":  # auto's options: once it has picked
        fit_options(args)
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


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The method's options from the fit flags; UsageError for unknown names and bad
    values."""
    if args.method not in api.METHODS:
        raise UsageError(f"unknown method {args.method!r}; choose one of "
                         f"{sorted(api.METHODS)} (gpscale methods lists them)")
    method = api.METHODS[args.method]
    if args.kernel is not None and args.kernel.lower() not in KERNELS:
        raise UsageError(f"unknown kernel {args.kernel!r}; choose one of {sorted(KERNELS)}")
    if (args.scheduler is not None or args.workers is not None) and not (
            method.streams or method.cluster):
        uses = sorted(n for n, m in api.METHODS.items() if m.streams or m.cluster)
        raise UsageError(f"method {method.name!r} trains in this process; --scheduler and "
                         f"--workers apply to the methods that use a cluster: {uses}")
    options: dict[str, Any] = {}
    if method.options is None or "progress" in method.options:
        options["progress"] = False if args.quiet else True if args.progress else None
    options.update((k, v) for k, v in (("max_iter", args.max_iter),
                                       ("restarts", args.restarts), ("seed", args.seed))
                   if v is not None)
    try:
        method.check_options(options)
        options.update(parse_option(method, text) for text in args.option)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return options
