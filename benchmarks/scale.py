"""``gpscale bench scale``: feature-GP training (``rff``) from Parquet files that are not in
memory, in this process and on a dask.distributed ``LocalCluster`` of 1 and 2 worker
processes.

Synthetic data (10 columns uniform on [-2, 2], y = a known smooth function + N(0, 0.1²)
noise) are written as Parquet files by the workers of a cluster, one file per task. For
each n, method and worker count the runner records:

- the standardisation pass (per-partition moments, merged on the client);
- one statistics pass (ΦᵀΦ, Φᵀy, yᵀy, n with the feature parameters fixed) and its ratio
  to the floor n·p² multiply-adds at the GEMM rate measured here on the same threads;
- one NLML + gradient (trainable lengthscales: a statistics pass and a gradient pass);
- the NLML at the initial θ, so the distributed value can be checked against the
  in-process one;
- peak resident memory of the client and of each worker, read from the processes
  (``VmHWM`` of /proc/PID/status, reset through /proc/PID/clear_refs before each
  measurement; Linux only);
- where one in-process pass spends its time (reading, standardising, features, ΦᵀΦ,
  Φᵀy) in thread CPU time on one thread, relative to the full product Φᵀ @ Φ of the same
  chunks: a load-independent view of the pass / floor ratio on a shared machine;
- the whole fit through ``gpscale.fit`` (once per n, on the largest worker count unless
  ``--fit-all``) and its test RMSE, next to the same method trained in memory on the
  first 10⁶ rows (``--reference-rows``).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from .harness import register

D = 10
NOISE_SD = 0.1
ROW_GROUP = 1 << 17


def truth(X: np.ndarray) -> np.ndarray:
    """The known smooth function of the synthetic data."""
    return (np.sin(1.5 * X[:, 0]) + 0.5 * np.cos(X[:, 1] * X[:, 2]) + 0.3 * X[:, 3] * X[:, 4]
            + 0.2 * X[:, 5:].sum(1))


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, D))
    return X, truth(X) + NOISE_SD * rng.standard_normal(n)


def write_part(item: tuple[int, int], folder: str, seed: int) -> int:
    """Task: write part ``k`` (``rows`` rows) of the data set as one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    k, rows = item
    path = Path(folder) / f"part-{k:05d}.parquet"
    tmp = path.with_name(f".{path.name}.tmp")
    with pq.ParquetWriter(tmp, pa.schema([(f"x{j}", pa.float64()) for j in range(D)]
                                         + [("y", pa.float64())])) as writer:
        for s in range(0, rows, ROW_GROUP):
            X, y = _rows(min(ROW_GROUP, rows - s), seed=[seed, k, s])
            writer.write_table(pa.table({**{f"x{j}": X[:, j] for j in range(D)}, "y": y}))
    os.replace(tmp, path)
    return rows


def make_data(root: Path, n: int, client, seed: int = 0, part_rows: int = 1_000_000) -> Path:
    """The Parquet folder of n rows (written once by the cluster's workers, then reused)."""
    from gpscale.parallel.cluster import fold_map

    folder = root / f"n{n}-seed{seed}"
    done = folder / "_COMPLETE"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    sizes = [min(part_rows, n - s) for s in range(0, n, part_rows)]
    fold_map(client, write_part, list(enumerate(sizes)), folder=str(folder), seed=seed)
    done.write_text(f"{n}\n")
    return folder


# -- peak memory, read from the processes --------------------------------------------------
def reset_peak() -> int:
    """Reset this process's peak RSS (VmHWM) to its current RSS; returns the pid."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return os.getpid()


def peak_rss_gib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    return math.nan


def _reset(client) -> None:
    reset_peak()
    if client is not None:
        client.run(reset_peak)


def _peaks(client) -> dict:
    out = {"client_peak_rss_gib": peak_rss_gib()}
    if client is not None:
        workers = client.run(peak_rss_gib)
        out["worker_peak_rss_gib"] = [workers[k] for k in sorted(workers)]
    return out


def gemm_rate(p: int, threads: int, rows: int = 8192, repeats: int = 5) -> float:
    """Measured float64 GEMM rate (flop/s) of ΦᵀΦ for a (rows, p) block on ``threads``."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        A = torch.randn(rows, p, dtype=torch.float64)
        A.mT @ A
        best = math.inf
        for _ in range(repeats):
            t = time.perf_counter()
            A.mT @ A
            best = min(best, time.perf_counter() - t)
    finally:
        torch.set_num_threads(before)
    return 2.0 * rows * p * p / best


def _arguments(p) -> None:
    p.add_argument("--n", type=float, nargs="+", default=None,
                   help="row counts (default 1e6 1e7; --quick 2e4 1e5)")
    p.add_argument("--full", action="store_true", help="add n = 1e8 where the disk allows")
    p.add_argument("--p", type=int, default=512, help="random Fourier features (default 512)")
    p.add_argument("--methods", nargs="+", default=["rff"], choices=["rff"],
                   help="methods measured (the passes use their feature map; GRIEF's grid "
                   "pass is not measured by this runner yet)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2],
                   help="worker processes; 0 = in this process (default 0 1 2)")
    p.add_argument("--fit-all", action="store_true",
                   help="time the whole fit for every worker count, not only the largest")
    p.add_argument("--reference-rows", type=int, default=1_000_000,
                   help="the in-memory reference fit uses the first this many rows")
    p.add_argument("--data-dir", default=None,
                   help="where the Parquet data go (default: $TMPDIR/gpscale-scale)")
    p.add_argument("--test-rows", type=int, default=100_000)
    p.add_argument("--max-iter", type=int, default=None,
                   help="L-BFGS iterations of the whole fit (default: the method's; --quick 15)")


def _passes(method: str, folder: Path, p: int, client) -> dict:
    """Standardisation pass, one statistics pass, one NLML + gradient (RFF features)."""
    from gpscale.features import RandomFourierFeatures
    from gpscale.io import Rows, open_source
    from gpscale.io.scaling import source_scaler
    from gpscale.models import FeatureGP

    source = open_source(folder, target="y")
    parts = source.partitions()
    out: dict = {}
    _reset(client)
    t = time.perf_counter()
    scaler = source_scaler(parts, client)
    out["scaler_pass_s"] = time.perf_counter() - t
    feats = RandomFourierFeatures(D, p, seed=0)
    model = FeatureGP(feats, rows=Rows(tuple(parts), D, scaler, client), noise=0.1)
    feats.raw_lengthscale.requires_grad_(False)
    t = time.perf_counter()
    model.statistics()
    out["stats_pass_s"] = time.perf_counter() - t
    with torch.no_grad():
        out["nlml_theta0"] = float(model.nlml())
    feats.raw_lengthscale.requires_grad_(True)
    t = time.perf_counter()
    model.nlml().backward()
    out["nlml_grad_s"] = time.perf_counter() - t
    out.update(_peaks(client))
    return out


def _stage_profile(folder: Path, p: int, rows: int = 1 << 18) -> dict:
    """One pass over the first ``rows`` rows, one thread, each stage timed in thread CPU
    time and divided by the CPU time of the full products Φᵀ @ Φ of the same chunks."""
    from gpscale.features import RandomFourierFeatures
    from gpscale.io import open_source
    from gpscale.io.scaling import source_scaler
    from gpscale.linalg.gram import add_upper_gram_
    from gpscale.models.feature_stats import chunk_rows
    from gpscale.threads import thread_limit
    from gpscale.validation import as_matrix, as_vector

    parts = open_source(folder, target="y").partitions()
    scaler = source_scaler(parts)
    feats = RandomFourierFeatures(D, p, seed=0)
    chunk = chunk_rows(feats, None)
    spent = dict.fromkeys(("read", "scale", "features", "gram", "proj", "full_gram"), 0.0)
    gram = torch.zeros(p, p, dtype=torch.float64)
    proj = torch.zeros(p, dtype=torch.float64)
    done = 0
    with thread_limit(1), torch.no_grad():
        for part in parts:
            chunks = part.chunks(chunk)
            while done < rows:
                t0 = time.thread_time()
                X, y = next(chunks, (None, None))
                if X is None:
                    break
                t1 = time.thread_time()
                X = as_matrix(scaler.transform_x(X), "X", torch.float64)
                y = as_vector(scaler.transform_y(y), "y", torch.float64)
                t2 = time.thread_time()
                phi = feats(X)
                t3 = time.thread_time()
                add_upper_gram_(gram, phi)
                t4 = time.thread_time()
                proj.addmv_(phi.mT, y)
                t5 = time.thread_time()
                phi.mT @ phi
                t6 = time.thread_time()
                for key, a, b in zip(spent, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
                    spent[key] += b - a
                done += len(X)
            if done >= rows:
                break
    full = spent.pop("full_gram")
    out = {f"cpu_{k}_over_floor": v / full for k, v in spent.items()}
    out["cpu_pass_over_floor"] = sum(spent.values()) / full
    out["profile_rows"] = done
    out["profile_gemm_gflops"] = 2 * done * p**2 / full / 1e9
    return out


def _options(method: str, p: int, max_iter: int | None) -> dict:
    opts = {"num_features": p} if method == "rff" else {}
    return opts if max_iter is None else {**opts, "max_iter": max_iter}


def _fit(method: str, folder: Path, opts: dict, client, X_test, y_test) -> dict:
    import gpscale

    _reset(client)
    t = time.perf_counter()
    pred = gpscale.fit(folder, target="y", method=method, scheduler=client, **opts)
    fit_s = time.perf_counter() - t
    mean = pred.predict(X_test)
    return {"fit_s": fit_s, "test_rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
            "fit_evals": pred.result.n_evals, "fit_reason": pred.result.reason,
            **{f"fit_{k}": v for k, v in _peaks(client).items()}}


def _reference(method: str, folder: Path, opts: dict, rows: int, X_test, y_test) -> dict:
    """The same method trained in memory on the first ``rows`` rows."""
    import gpscale
    from gpscale.io import open_source

    xs, ys, got = [], [], 0
    for X, y in open_source(folder, target="y").chunks(rows=ROW_GROUP):
        xs.append(X[: rows - got])
        ys.append(y[: rows - got])
        got += len(xs[-1])
        if got >= rows:
            break
    t = time.perf_counter()
    pred = gpscale.fit(np.concatenate(xs), np.concatenate(ys), method=method, **opts)
    mean = pred.predict(X_test)
    return {"ref_rows": got, "ref_fit_s": time.perf_counter() - t,
            "ref_test_rmse": float(np.sqrt(np.mean((mean - y_test) ** 2)))}


def _plot(fig, records: list[dict], summary: dict) -> None:
    left, right = fig.subplots(1, 2)
    passes = [r for r in records if "stats_pass_s" in r]
    for key in sorted({(r["method"], r["workers"]) for r in passes}, key=str):
        rows = sorted((r for r in passes if (r["method"], r["workers"]) == key),
                      key=lambda r: r["n"])
        label = f"{key[0]}, {'in process' if key[1] == 0 else f'{key[1]} workers'}"
        left.plot([r["n"] for r in rows], [r["stats_pass_s"] for r in rows], "o-",
                  label=label)
        right.plot([r["n"] for r in rows], [r["client_peak_rss_gib"] for r in rows], "o-",
                   label=f"client, {label}")
        if key[1]:
            right.plot([r["n"] for r in rows], [max(r["worker_peak_rss_gib"]) for r in rows],
                       "s--", label=f"worker max, {label}")
    for ax, title in ((left, "one statistics pass (s)"), (right, "peak RSS (GiB)")):
        ax.set_xscale("log")
        ax.set_xlabel("rows n")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    left.set_yscale("log")


@register("scale", help="rff from Parquet files: in process and on dask workers",
          add_arguments=_arguments, plot=_plot)
def run(args, rec) -> None:
    from gpscale.methods import METHODS
    from gpscale.parallel.cluster import connect

    sizes = [int(v) for v in (args.n or ([2e4, 1e5] if args.quick else [1e6, 1e7]))]
    root = Path(args.data_dir or Path(os.environ.get("TMPDIR", "/tmp")) / "gpscale-scale")
    root.mkdir(parents=True, exist_ok=True)
    if args.full:
        need = 1e8 * (D + 1) * 8 * 1.1
        free = shutil.disk_usage(root).free
        if free > 2 * need:
            sizes.append(int(1e8))
        else:
            rec.note(f"--full: n = 1e8 skipped, {free / 2**30:.0f} GiB free at {root} and it "
                     f"needs about {need / 2**30:.0f} GiB")
    methods = []
    for m in args.methods:
        if METHODS[m].streams:
            methods.append(m)
        else:
            rec.note(f"{m} does not stream from a source yet (Method.streams is False): "
                     "left out, not measured")
    max_iter = args.max_iter if args.max_iter is not None else (15 if args.quick else None)
    opts = {m: _options(m, args.p, max_iter) for m in methods}
    X_test, y_test = _rows(args.test_rows, seed=12345)
    X_test_noise_free = truth(X_test)
    rec.note(f"noise sd {NOISE_SD}: the best possible test RMSE is about {NOISE_SD}")
    rates = {t: gemm_rate(args.p, t) for t in (1, 2)}
    rec.note(f"measured float64 GEMM rate (ΦᵀΦ, p = {args.p}): "
             f"{rates[1] / 1e9:.1f} GFLOP/s on 1 thread, {rates[2] / 1e9:.1f} on 2")
    with connect(workers=2) as writer:
        folders = {n: make_data(root, n, writer) for n in sizes}
    load = os.getloadavg()[0]
    for n in sizes:
        rec.record(n=n, method="rff", workers="profile", **_stage_profile(folders[n], args.p))
        for method in methods:
            for w in args.workers:
                with connect(workers=w or None) as client:
                    row = {"n": n, "method": method, "workers": w, "p": args.p,
                           "load_1min": os.getloadavg()[0]}
                    row.update(_passes(method, folders[n], args.p, client))
                    threads = torch.get_num_threads() if w == 0 else 1
                    rate = rates.get(threads, rates[1]) * (max(w, 1) if w else 1)
                    row["stats_floor_s"] = 2.0 * n * args.p**2 / rate
                    row["stats_over_floor"] = row["stats_pass_s"] / row["stats_floor_s"]
                    if args.fit_all or w == max(args.workers):
                        row.update(_fit(method, folders[n], opts[method], client, X_test,
                                        y_test))
                    rec.record(**row)
                    load = max(load, row["load_1min"])
        for method in methods:
            if n > args.reference_rows and args.reference_rows > 0:
                ref = _reference(method, folders[n], opts[method], args.reference_rows,
                                 X_test, y_test)
                rec.record(n=n, method=method, workers="in memory", **ref)
    rec.note(f"the noise-free test RMSE floor: 0 (y_test sd {np.std(y_test):.3f}, "
             f"f sd {np.std(X_test_noise_free):.3f})")
    _summarise(rec, sizes, methods, args)


def _summarise(rec, sizes, methods, args) -> None:
    rows = rec.records
    big = max(sizes)

    def pick(n, method, w):
        return next((r for r in rows if r["n"] == n and r["method"] == method
                     and r["workers"] == w), None)

    for method in methods:
        here, one, two = pick(big, method, 0), pick(big, method, 1), pick(big, method, 2)
        if here and two:
            rel = abs(two["nlml_theta0"] - here["nlml_theta0"]) / abs(here["nlml_theta0"])
            rec.target(f"{method}: NLML distributed vs in-process, relative (n={big})", rel,
                       1e-10, "<=")
        if one and two:
            rec.target(f"{method}: pass time 2 workers / 1 worker (n={big})",
                       two["stats_pass_s"] / one["stats_pass_s"], 0.6, "<=")
            rec.target(f"{method}: worker peak RSS GiB (n={big})",
                       max(two["worker_peak_rss_gib"] + one["worker_peak_rss_gib"]), 2.0, "<=")
            rec.target(f"{method}: client peak RSS GiB (n={big}, 2 workers)",
                       two["client_peak_rss_gib"], 1.0, "<=")
        if here:
            rec.target(f"{method}: in-process statistics pass / GEMM floor (n={big})",
                       here["stats_over_floor"], 1.3, "<=")
        profile = pick(big, "rff", "profile")
        if profile:
            rec.note(f"one pass in thread CPU time (n={big}, one thread, first "
                     f"{profile['profile_rows']} rows): {profile['cpu_pass_over_floor']:.2f}x "
                     "the full product ΦᵀΦ (reading "
                     f"{profile['cpu_read_over_floor']:.3f}, standardising "
                     f"{profile['cpu_scale_over_floor']:.3f}, features "
                     f"{profile['cpu_features_over_floor']:.3f}, panelled ΦᵀΦ "
                     f"{profile['cpu_gram_over_floor']:.3f}, Φᵀy "
                     f"{profile['cpu_proj_over_floor']:.3f})")
        fit = next((r for r in rows if r["n"] == big and r["method"] == method
                    and "fit_s" in r), None)
        ref = pick(big, method, "in memory")
        if fit:
            rec.target(f"{method}: whole fit minutes (n={big})", fit["fit_s"] / 60, 30.0, "<=")
        if fit and ref:
            rec.target(f"{method}: test RMSE / in-memory on first {ref['ref_rows']} rows",
                       fit["test_rmse"] / ref["ref_test_rmse"], 1.0, "<=")
    rec.summary(sizes=sizes, methods=methods, workers=args.workers, p=args.p)
