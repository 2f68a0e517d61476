"""Benchmarks: ``gpscale bench NAME [--quick] [--out DIR] [--device cpu|cuda] ...``.

Each benchmark prints one JSON object per measurement, then a summary object
(``"summary": true``) as the last line, and writes ``NAME.jsonl``, ``NAME.md`` and
``NAME.png`` under ``--out`` (default ``benchmarks/results``). ``gpscale bench --list``
lists them. Benchmarks are not tests: targets are reported (met / not met), never
asserted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from gpscale.threads import thread_limit

from .harness import (
    LOAD_ERRORS,
    REGISTRY,
    Benchmark,
    Recorder,
    Timing,
    atomic_write,
    device_label,
    load_builtin,
    machine_info,
    register,
    resolve_device,
    time_call,
    time_calls,
    warm_up,
)

__all__ = ["main", "build_parser", "run", "REGISTRY", "Benchmark", "Recorder", "Timing",
           "register", "load_builtin", "time_call", "time_calls", "resolve_device",
           "device_label", "machine_info", "atomic_write"]


def build_parser() -> argparse.ArgumentParser:
    """``gpscale bench`` parser: one sub-command per registered benchmark."""
    benches = load_builtin()
    parser = argparse.ArgumentParser(
        prog="gpscale bench", description="Run a benchmark; print JSON lines and write a "
        "markdown report and a plot.")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quick", action="store_true",
                        help="a small run (under a minute on 2 CPU cores)")
    common.add_argument("--out", default="benchmarks/results",
                        help="folder for NAME.jsonl / NAME.md / NAME.png "
                        "(default: benchmarks/results)")
    common.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    common.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch and the BLAS libraries "
                        "(default: torch's default)")
    sub = parser.add_subparsers(dest="name", metavar="NAME")
    for b in benches.values():
        p = sub.add_parser(b.name, parents=[common], help=b.help, description=b.help)
        if b.add_arguments is not None:
            b.add_arguments(p)
    return parser


def run(name: str, args: argparse.Namespace, command: str | None = None) -> Recorder:
    """Run benchmark ``name`` with parsed ``args``; return its finished Recorder."""
    bench = load_builtin().get(name)
    if bench is None:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {sorted(REGISTRY)}")
    device = resolve_device(args.device)
    args.device = device
    threads = getattr(args, "threads", None)
    with thread_limit(threads):
        warm_up()
        rec = Recorder(name, args.out, device, command=command)
        bench.run(args, rec)
        rec.finish(bench.plot)
    return rec


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gpscale bench``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse error or --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if args.list or args.name is None:
        for b in sorted(REGISTRY.values(), key=lambda b: b.name):
            print(f"{b.name:22s} {b.help}")
        for mod, err in LOAD_ERRORS.items():
            print(f"gpscale bench: runner module {mod!r} failed to import: {err}",
                  file=sys.stderr)
        return 0 if args.list else 2
    command = "gpscale bench " + shlex.join(argv)
    try:
        run(args.name, args, command)
    except (ValueError, FileNotFoundError, ImportError) as err:
        print(f"gpscale bench {args.name}: error: {err}", file=sys.stderr)
        return 1
    return 0
