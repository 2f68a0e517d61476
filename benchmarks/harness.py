"""Benchmark harness: a registry of runners, a JSON-lines recorder that also writes a
markdown report and a plot, and a timing helper.

A runner is ``run(args, rec)``: it reads its options from ``args`` (argparse), calls
``rec.record(**fields)`` once per measurement, ``rec.summary(**fields)`` and
``rec.target(...)`` for the headline numbers; :func:`benchmarks.main` then calls
:meth:`Recorder.finish`, which prints the summary as the last JSON line and writes
``NAME.jsonl``, ``NAME.md`` and ``NAME.png`` under ``--out`` (each atomically).
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import io
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from gpscale import files

Runner = Callable[[Any, "Recorder"], None]
Plotter = Callable[[Any, list[dict], dict], None]


@dataclass
class Benchmark:
    """A registered benchmark: ``run(args, rec)``, its extra CLI options and its plot."""

    name: str
    run: Runner
    help: str = ""
    add_arguments: Callable[[Any], None] | None = None
    plot: Plotter | None = None


#: name -> Benchmark; filled by :func:`register` when a runner module is imported
REGISTRY: dict[str, Benchmark] = {}
#: modules of the benchmarks package that hold no runner
NOT_RUNNERS = frozenset({"harness", "peers", "uci_large_report"})
#: runner modules that failed to import, with the error (reported by ``--list``)
LOAD_ERRORS: dict[str, str] = {}


def register(name: str, help: str = "", add_arguments: Callable[[Any], None] | None = None,
             plot: Plotter | None = None) -> Callable[[Runner], Runner]:
    """Decorator: ``@register("exact", help=..., add_arguments=f, plot=g)`` on ``run``."""

    def deco(run: Runner) -> Runner:
        REGISTRY[name] = Benchmark(name, run, help, add_arguments, plot)
        return run

    return deco


def load_builtin() -> dict[str, Benchmark]:
    """Import every runner module of the ``benchmarks`` package (each registers its
    benchmarks) and return the registry. A module that fails to import is left out and
    its error kept in :data:`LOAD_ERRORS`, so one broken runner does not hide the rest."""
    import importlib
    import pkgutil

    package = importlib.import_module(__package__)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.name in NOT_RUNNERS:
            continue
        try:
            importlib.import_module(f"{__package__}.{info.name}")
        except Exception as err:  # noqa: BLE001 - reported, not hidden
            LOAD_ERRORS[info.name] = f"{type(err).__name__}: {err}"
    return REGISTRY


# -- devices and timing ----------------------------------------------------------------
def resolve_device(name: str | torch.device) -> torch.device:
    """``cpu`` or ``cuda[:k]`` as a torch.device; ValueError if CUDA is asked for but absent."""
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but torch.cuda.is_available() is False; "
                         "use --device cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {name!r}")
    return dev


def device_label(device: torch.device) -> str:
    """``"cpu"``, or the CUDA device's name (e.g. ``"NVIDIA H100 80GB HBM3"``)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def synchronize(device: torch.device | None) -> None:
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Timing:
    """Wall-clock seconds of repeated calls (after warm-up)."""

    times: list[float] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return float(np.median(self.times)) if self.times else math.nan

    @property
    def min_s(self) -> float:
        return min(self.times) if self.times else math.nan

    def as_dict(self) -> dict[str, float | int]:
        return {"median_s": self.median_s, "min_s": self.min_s,
                "max_s": max(self.times) if self.times else math.nan,
                "repeats": len(self.times)}


def warm_up() -> None:
    """Pay torch's one-time lazy imports before anything is timed: the first
    ``torch.optim`` optimiser built in a process imports ``torch._dynamo`` (a one-time
    cost large enough to distort a timing), which would otherwise be charged to
    whichever fit a benchmark happens to time first."""
    torch.optim.LBFGS([torch.zeros(1, requires_grad=True)])


def time_calls(fns: dict[str, Callable[[], Any]], repeats: int = 5, warmup: int = 1,
               device: torch.device | None = None) -> dict[str, Timing]:
    """Time each callable: ``warmup`` untimed calls, then ``repeats`` timed ones
    (``time.perf_counter``, CUDA synchronised before and after). The callables are
    interleaved round by round so that a change in machine load hits all of them."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    out = {name: Timing() for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            synchronize(device)
            t0 = time.perf_counter()
            fn()
            synchronize(device)
            out[name].times.append(time.perf_counter() - t0)
    return out


def time_call(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1,
              device: torch.device | None = None) -> Timing:
    """:func:`time_calls` for one callable."""
    return time_calls({"fn": fn}, repeats, warmup, device)["fn"]


# -- machine description -----------------------------------------------------------------
def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: torch.device) -> dict[str, Any]:
    """CPU, memory, load, device and library versions, for the report."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    if hasattr(os, "getloadavg"):
        info["load_avg_1_5_15"] = [round(v, 2) for v in os.getloadavg()]
    info["device"] = device_label(device)
    if device.type == "cuda":
        info["cuda"] = torch.version.cuda
    for pkg in ("torch", "numpy", "scipy", "gpytorch", "linear_operator", "scikit-learn"):
        info[pkg] = _version(pkg)
    return info


# -- recorder ------------------------------------------------------------------------------
def _jsonable(v: Any) -> Any:
    """Plain JSON types; non-finite floats become None (JSON has no NaN)."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu()
        v = v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` (its folder created if missing) through
    :func:`gpscale.files.atomic_write`."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return files.atomic_write(path, data)


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v == 0.0 or 1e-3 <= abs(v) < 1e5:
            return f"{v:.4g}"
        return f"{v:.3e}"
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return str(v).replace("|", "\\|")


def _table(rows: Sequence[dict], keys: Sequence[str] | None = None) -> list[str]:
    if keys is None:
        keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_fmt(r.get(k)) for k in keys) + " |" for r in rows]
    return lines


class Recorder:
    """Collects the measurements of one benchmark run and writes its report.

    Every JSON line carries ``bench``, ``device``, ``torch`` and ``threads``; the
    summary (``"summary": true``) is printed last, by :meth:`finish`.
    """

    COMMON = ("bench", "device", "torch", "threads")

    def __init__(self, bench: str, out_dir: str | os.PathLike | None = "benchmarks/results",
                 device: str | torch.device = "cpu", command: str | None = None,
                 stream: TextIO | None = None) -> None:
        self.bench = bench
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.device = torch.device(device)
        self.command = command if command is not None else " ".join(sys.argv)
        self.stream = stream
        self.started = _dt.datetime.now(_dt.timezone.utc)
        self.machine = machine_info(self.device)
        self.common = {"bench": bench, "device": device_label(self.device),
                       "torch": torch.__version__, "threads": torch.get_num_threads()}
        self.records: list[dict] = []
        self.summary_fields: dict[str, Any] = {}
        self.targets: list[dict] = []
        self.notes: list[str] = []
        self.finished = False

    def _emit(self, obj: dict) -> None:
        print(json.dumps(obj, allow_nan=False), file=self.stream or sys.stdout, flush=True)

    def record(self, **fields: Any) -> dict:
        """One measurement: printed as a JSON line now, kept for the report."""
        if self.finished:
            raise RuntimeError("record() after finish(): the summary must be the last line")
        row = {**self.common, **_jsonable(fields)}
        self.records.append(row)
        self._emit(row)
        return row

    def summary(self, **fields: Any) -> dict:
        """Add headline fields to the summary (printed last by :meth:`finish`)."""
        self.summary_fields.update(_jsonable(fields))
        return self.summary_fields

    def target(self, name: str, value: float | None, threshold: float, op: str = "<=",
               what: str = "") -> bool:
        """A goal stated up front; ``met`` is whether ``value op threshold`` holds."""
        if op not in ("<=", ">="):
            raise ValueError(f"op must be '<=' or '>=', got {op!r}")
        ok = value is not None and math.isfinite(value) and (
            value <= threshold if op == "<=" else value >= threshold)
        self.targets.append({"target": f"{name} {op} {threshold:g}", "value": _jsonable(value),
                             "met": bool(ok), "what": what})
        return bool(ok)

    def note(self, text: str) -> None:
        """A sentence for the report's Notes section."""
        self.notes.append(text)

    def summary_row(self) -> dict:
        row = {**self.common, "summary": True, **self.summary_fields}
        if self.targets:
            row["targets"] = {t["target"]: {"value": t["value"], "met": t["met"]}
                              for t in self.targets}
            row["all_targets_met"] = all(t["met"] for t in self.targets)
        row["wall_s"] = (_dt.datetime.now(_dt.timezone.utc) - self.started).total_seconds()
        return row

    def finish(self, plot: Plotter | None = None, title: str | None = None) -> dict[str, Path]:
        """Print the summary line and write NAME.jsonl, NAME.md and NAME.png."""
        row = self.summary_row()
        self._emit(row)
        self.finished = True
        if hasattr(os, "getloadavg"):
            self.machine["load_avg_at_end"] = [round(v, 2) for v in os.getloadavg()]
            load = max(self.machine["load_avg_1_5_15"][0], self.machine["load_avg_at_end"][0])
            cpus = self.machine.get("logical_cpus") or 1
            if load > 0.75 * cpus:
                self.note(f"the machine was busy with other work (1-minute load average up to "
                          f"{load:.1f} on {cpus} logical CPUs): CPU timings are noisy; "
                          "compare the min_s columns too.")
        if self.out_dir is None:
            return {}
        stem = self.out_dir / self.bench
        lines = [json.dumps(r, allow_nan=False) for r in [*self.records, row]]
        paths = {"jsonl": atomic_write(stem.with_suffix(".jsonl"), "\n".join(lines) + "\n")}
        if importlib.util.find_spec("matplotlib") is not None:  # plots are an extra
            paths["png"] = atomic_write(stem.with_suffix(".png"), self._png(plot, row))
        else:
            print("gpscale bench: matplotlib is not installed, so no plot was drawn: "
                  "pip install 'gpscale[plot]'", file=sys.stderr)
        paths["md"] = atomic_write(stem.with_suffix(".md"), self.markdown(row, title))
        return paths

    def _png(self, plot: Plotter | None, row: dict) -> bytes:
        from matplotlib.figure import Figure  # no pyplot: no global backend state

        fig = Figure(figsize=(11, 4.2), dpi=110, layout="constrained")
        fig.suptitle(f"gpscale bench {self.bench} — {self.common['device']}, "
                     f"{self.common['threads']} threads", fontsize=10)
        if plot is not None:
            plot(fig, self.records, row)
        else:
            ax = fig.add_subplot(111)
            ax.axis("off")
            text = "\n".join(f"{k}: {_fmt(v)}" for k, v in row.items() if k not in self.COMMON)
            ax.text(0.01, 0.99, text, va="top", family="monospace", fontsize=8)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()

    def markdown(self, row: dict, title: str | None = None) -> str:
        out = [f"# {title or 'Benchmark `' + self.bench + '`'}", "",
               f"- date: {self.started.strftime('%Y-%m-%d %H:%M:%S UTC')}",
               f"- command: `{self.command}`",
               f"- device: {self.common['device']}; torch {self.common['torch']}, "
               f"{self.common['threads']} threads; wall time {row['wall_s']:.1f} s", ""]
        if self.targets:
            out += ["## Targets", ""]
            out += _table([{**t, "met": "**MET**" if t["met"] else "**NOT MET**"}
                           for t in self.targets], ["target", "value", "met", "what"])
            out.append("")
        skip = set(self.COMMON) | {"summary", "targets", "all_targets_met"}
        out += ["## Summary", ""]
        out += _table([{"field": k, "value": v} for k, v in row.items() if k not in skip])
        out.append("")
        groups: dict[str, list[dict]] = {}
        for r in self.records:
            groups.setdefault(str(r.get("kind", "measurements")), []).append(
                {k: v for k, v in r.items() if k not in self.COMMON and k != "kind"})
        for kind, rows in groups.items():
            out += [f"## {kind}", "", *_table(rows), ""]
        if self.notes:
            out += ["## Notes", "", *[f"- {n}" for n in self.notes], ""]
        out += ["## Machine", "", *_table([{"key": k, "value": v}
                                          for k, v in self.machine.items()]), ""]
        out += [f"![{self.bench}]({self.bench}.png)", ""]
        return "\n".join(out)
