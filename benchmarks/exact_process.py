"""``gpscale bench exact-process``: ``gpscale fit --method exact`` as users meet it, a
whole process, against GPyTorch's tutorial recipe as a whole process.

For each UCI set (fold ``--fold``; a seeded random subset of at most ``--n`` training
rows and ``--max-test`` test rows, the rows of :mod:`benchmarks.uci_exact`), the raw
rows are written to CSV files in a temporary folder (outside the repository). Then, per
repeat and interleaved so that the machine's load falls on both alike:

* ``gpscale fit --method exact --threads T -q --data train.csv --target y --out m.pt``
  (the console script: imports, CSV in, the fit, the model file out);
* ``python _gpytorch_process.py fit train.csv g.pt --threads T`` (numpy reads the CSV,
  standardises it, ConstantMean + ScaleKernel(RBF ARD) + GaussianLikelihood, Adam lr 0.1
  for ``--gpytorch-iters`` steps, GPyTorch's default solver, float64, ``torch.save``);
* with ``--baseline-src DIR`` (the ``src`` folder of another checkout, e.g. a git worktree
  of an earlier commit) that checkout's ``gpscale fit`` too, so before and after are
  measured in the same run.

Each is timed from start to exit (wall time, and CPU time from ``getrusage``: the
ratio that other work on shared cores disturbs least). Then, untimed, each model
predicts the test rows (``gpscale predict``; the recipe's ``predict``, Cholesky) and the
test RMSE and NLPD of y are computed in y's standardised units (divided by the training
rows' standard deviation), so that speed is never bought with accuracy. Every subprocess gets
OMP_NUM_THREADS = MKL_NUM_THREADS = T and inherits this process's CPU affinity.

``--quick``: autompg only, 200 rows, 20 Adam steps, one repeat.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .harness import register

#: sets of the default run: 2000-row subsets with 18, 32 and 8 columns, and a tiny one
SETS = ("elevators", "pumadyn32nm", "kin40k", "autompg")
#: the recipe script, run by path so that it imports no gpscale
RECIPE = Path(__file__).with_name("_gpytorch_process.py")
#: a set is "tiny" (start-up dominates; reported, not held to the target) below this n
TINY_N = 1000
TARGET = 0.5


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=None, help=f"UCI sets (default {SETS})")
    p.add_argument("--n", type=int, default=None, help="training rows cap (2000; quick 200)")
    p.add_argument("--max-test", type=int, default=2000, help="test rows cap (2000)")
    p.add_argument("--fold", type=int, default=0, help="fold 0..9 (0)")
    p.add_argument("--repeats", type=int, default=None,
                   help="interleaved runs of each tool per set (default 2; quick 1)")
    p.add_argument("--gpytorch-iters", type=int, default=None,
                   help="Adam steps of the recipe (default 150, as bench uci-exact; quick 20)")
    p.add_argument("--baseline-src", default=None,
                   help="src folder of another gpscale checkout, run as 'gpscale-baseline'")


def _write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    header = ",".join([f"x{i}" for i in range(X.shape[1])] + ["y"])
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header=header, comments="",
               fmt="%.17g")


def _gpscale_cmd() -> list[str]:
    """The console script beside this interpreter (what a user runs), else ``-m``."""
    script = Path(sys.executable).with_name("gpscale")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpscale.cli"]


def _env(threads: int, src: str | None = None) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    env.pop("GPSCALE_DEBUG", None)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


class _Tool:
    """One way to fit: how to run its fit and its prediction as subprocesses."""

    def __init__(self, name: str, threads: int, iters: int, src: str | None = None):
        self.name, self.threads, self.iters, self.src = name, threads, iters, src

    def fit_cmd(self, train: Path, model: Path) -> list[str]:
        if self.name == "gpytorch":
            return [sys.executable, str(RECIPE), "fit", str(train), str(model),
                    "--iters", str(self.iters), "--threads", str(self.threads)]
        return [*_gpscale_cmd(), "fit", "--method", "exact", "--threads", str(self.threads),
                "-q", "--data", str(train), "--target", "y", "--out", str(model)]

    def predict_cmd(self, model: Path, test: Path, out: Path) -> list[str]:
        if self.name == "gpytorch":
            return [sys.executable, str(RECIPE), "predict", str(model), str(test), str(out),
                    "--threads", str(self.threads)]
        return [*_gpscale_cmd(), "predict", "--threads", str(self.threads), "-q", "--model",
                str(model), "--data", str(test), "--out", str(out)]

    def run(self, cmd: list[str]) -> tuple[float, float]:
        """Wall time and CPU time (user + system, of the process and its children)."""
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=_env(self.threads, self.src), capture_output=True,
                              text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{self.name} failed (exit {done.returncode}): "
                               f"{' '.join(cmd)}\n{done.stderr[-2000:]}")
        return wall, _children_cpu() - cpu0

    def fit_info(self, model: Path) -> dict:
        """Evaluations, objective and in-process fit time from ``gpscale info --json``."""
        if self.name == "gpytorch":
            return {"evaluations": self.iters}
        done = subprocess.run([*_gpscale_cmd(), "info", "--json", str(model)],
                              env=_env(self.threads, self.src), capture_output=True,
                              text=True, check=True)
        info = json.loads(done.stdout)
        fit = info.get("fit") or {}
        hp = info.get("hyperparameters") or {}
        trained = {k: v.get("trained") for k, v in hp.items() if isinstance(v, dict)}
        return {"evaluations": fit.get("evaluations"), "objective": fit.get("objective"),
                "fit_s_in_process": fit.get("time_s"), "stop": fit.get("reason"),
                "theta": trained}


def _metrics(pred: Path, y: np.ndarray, sy: float, tool: str) -> dict[str, float]:
    cols = np.loadtxt(pred, delimiter=",", skiprows=1, ndmin=2)
    mean = cols[:, 0]
    var = cols[:, 1] if tool == "gpytorch" else cols[:, 1] ** 2  # gpscale writes std
    var = np.maximum(var, 1e-300)
    r = (y - mean) / sy
    v = var / sy**2
    return {"rmse": float(np.sqrt(np.mean(r * r))),
            "nlpd": float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * r * r / v))}


def _children_cpu() -> float:
    """CPU seconds used by the waited-for child processes so far (0 where unknown)."""
    try:
        import resource
    except ImportError:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else []


def _one_set(name: str, order: list[_Tool], args, n: int, repeats: int, tmp: Path,
             rec) -> dict:
    """Fit each tool ``repeats`` times in ``order`` (a tool may appear more than once),
    then predict once with each."""
    from .uci_exact import _split

    Xtr, ytr, Xte, yte = _split(name, args.fold, n, args.max_test)
    train, test = tmp / f"{name}-train.csv", tmp / f"{name}-test.csv"
    _write_csv(train, Xtr, ytr)
    _write_csv(test, Xte, yte)
    sy = float(np.std(ytr))
    tools = list({t.name: t for t in order}.values())
    walls: dict[str, list[float]] = {t.name: [] for t in tools}
    cpus: dict[str, list[float]] = {t.name: [] for t in tools}
    for r in range(repeats):
        for tool in order:
            model = tmp / f"{name}-{tool.name}.pt"
            before = _load()
            wall, cpu = tool.run(tool.fit_cmd(train, model))
            walls[tool.name].append(wall)
            cpus[tool.name].append(cpu)
            rec.record(kind="run", set=name, n=len(ytr), d=Xtr.shape[1], tool=tool.name,
                       repeat=r, wall_s=wall, cpu_s=cpu, load_before=before,
                       load_after=_load())
    row: dict = {"kind": "set", "set": name, "n": len(ytr), "d": Xtr.shape[1],
                 "test_n": len(yte)}
    for tool in tools:
        model, out = tmp / f"{name}-{tool.name}.pt", tmp / f"{name}-{tool.name}-pred.csv"
        tool.run(tool.predict_cmd(model, test, out))
        m = _metrics(out, yte, sy, tool.name)
        info = tool.fit_info(model)
        row.update({f"{tool.name}_s": statistics.median(walls[tool.name]),
                    f"{tool.name}_min_s": min(walls[tool.name]),
                    f"{tool.name}_cpu_s": statistics.median(cpus[tool.name]),
                    f"{tool.name}_rmse": m["rmse"], f"{tool.name}_nlpd": m["nlpd"],
                    f"{tool.name}_evals": info.get("evaluations")})
        if "theta" in info:
            row[f"{tool.name}_theta"] = info["theta"]
            row[f"{tool.name}_objective"] = info["objective"]
    for tool in tools:
        if tool.name != "gpytorch":
            row[f"{tool.name}_over_gpytorch"] = row[f"{tool.name}_s"] / row["gpytorch_s"]
            if row["gpytorch_cpu_s"] > 0:
                row[f"{tool.name}_cpu_over_gpytorch"] = (row[f"{tool.name}_cpu_s"]
                                                         / row["gpytorch_cpu_s"])
    return rec.record(**row)


@register("exact-process", help="whole-process `gpscale fit --method exact` vs GPyTorch's "
          "tutorial recipe as a script, interleaved, same threads", add_arguments=_arguments,
          plot=lambda *a: _plot(*a))
def run(args, rec) -> None:
    from gpscale.data.sources import data_dir

    sets = args.sets or (["autompg"] if args.quick else list(SETS))
    n = args.n or (200 if args.quick else 2000)
    repeats = args.repeats or (1 if args.quick else 2)
    iters = args.gpytorch_iters or (20 if args.quick else 150)
    threads = args.threads or 1
    if n < 10 or repeats < 1 or iters < 1:
        raise ValueError("--n must be >= 10, --repeats and --gpytorch-iters >= 1")
    try:
        import gpytorch  # noqa: F401
    except ImportError as err:
        raise RuntimeError(f"exact-process needs gpytorch: {err} (install the 'bench' "
                           "extra)") from None
    found = [s for s in sets if (data_dir() / "uci" / f"{s}.npz").exists()]
    if len(found) < len(sets):
        rec.note(f"sets not found under {data_dir()}: {sorted(set(sets) - set(found))}")
    ours = [_Tool("gpscale", threads, iters)]
    if args.baseline_src:
        ours.append(_Tool("gpscale-baseline", threads, iters, args.baseline_src))
    recipe = _Tool("gpytorch", threads, iters)
    order = [t for tool in ours for t in (tool, recipe)]  # gpscale, gpytorch, baseline, ...
    rec.summary(sets=found, n=n, fold=args.fold, repeats=repeats, gpytorch_iters=iters,
                threads=threads, affinity=sorted(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity") else None,
                baseline_src=args.baseline_src)
    rec.note(f"Whole processes, timed from start to exit, interleaved per repeat "
             f"({', '.join(t.name for t in order)}); {threads} thread(s) each "
             "(--threads / torch.set_num_threads and OMP/MKL_NUM_THREADS). Times are the "
             "median over repeats. RMSE and NLPD of y on the test rows in y's standardised "
             "units; gpscale's defaults; the recipe: ConstantMean, ScaleKernel(RBF ARD), "
             f"GaussianLikelihood, Adam(lr=0.1) x {iters}, GPyTorch's default solver.")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpscale-exact-process-") as tmp:
        for name in found:
            rows.append(_one_set(name, order, args, n, repeats, Path(tmp), rec))
    _summarise(rec, rows, [t.name for t in ours])


def _summarise(rec, rows: list[dict], names: list[str]) -> None:
    big = [r for r in rows if r["n"] >= TINY_N]
    for name in names:
        for key in (f"{name}_over_gpytorch", f"{name}_cpu_over_gpytorch"):
            rec.summary(**{f"{key}_{r['set']}": r.get(key) for r in rows})
            rec.summary(**{f"{key}_max": max((r[key] for r in big if r.get(key)),
                                             default=None)})
        rec.summary(**{f"{name}_rmse_over_gpytorch_max": max(
            (r[f"{name}_rmse"] / r["gpytorch_rmse"] for r in rows), default=None)})
    worst = rec.summary_fields.get("gpscale_over_gpytorch_max")
    rec.target("gpscale_over_gpytorch_max", worst, TARGET,
               what=f"whole-process wall time of gpscale fit / GPyTorch recipe, every set "
                    f"of >= {TINY_N} rows")
    rec.note("CPU time (user + system of each process, from getrusage) is the ratio to "
             "trust when other work shares the cores: wall time then depends on each "
             "process's share of them, which changes within a run.")
    if any(math.isfinite(r.get("gpscale_rmse", math.nan)) for r in rows):
        rec.note("Accuracy: see the gpscale_rmse / gpytorch_rmse and _nlpd columns of the "
                 "'set' rows.")


def _plot(fig, records: list[dict], summary: dict) -> None:
    rows = [r for r in records if r.get("kind") == "set"]
    if not rows:
        return
    names = [k[: -len("_over_gpytorch")] for k in rows[0] if k.endswith("_over_gpytorch")]
    ax = fig.subplots(1, 1)
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        ax.bar([j + i * width for j in range(len(rows))],
               [r[f"{name}_over_gpytorch"] for r in rows], width, label=name)
    ax.axhline(TARGET, color="k", ls="--", lw=1, label=f"target {TARGET}")
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(rows))],
                  [f"{r['set']}\n{r['n']}x{r['d']}" for r in rows])
    ax.set(ylabel="whole-process time / GPyTorch recipe's", title="gpscale fit --method exact")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
