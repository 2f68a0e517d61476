"""``gpscale bench exact-cluster``: the iterative exact GP's products on a dask cluster
(issue 30).

A synthetic regression set of ``--rows`` rows and ``--dims`` columns (y a smooth function
of x plus noise) is written as ``--files`` Parquet files and read back through
``gpscale.io.open_source`` (the rows a user's fit would get). Then, in process and on a
``LocalCluster`` of 1 and 2 single-threaded worker processes (``--workers``):

* **products**: the seconds of one product C V with ``--rhs`` right-hand sides on every
  row (:class:`~gpscale.kernels.operator.KernelOperator` in process,
  :class:`~gpscale.kernels.cluster_operator.ClusterOperator` on the cluster: X goes to the workers
  once, each product sends V and gathers the row blocks of C V), float32 tiles (the
  solver's default), the median of ``--repeat`` products, and the largest relative
  difference of the cluster's product from the in-process one;
* **a whole fit**: ``gpscale.fit(<the Parquet folder>, target="y", method="exact",
  solver="cg", workers=w)`` on the first ``--fit-rows`` rows (θ from a row sample in
  the client, the CG products on the workers), its seconds, CG iterations and the test
  RMSE on held-out rows, against the same fit in process.

Peak RSS of the client and of each worker process. The client's threads are set by
``--threads`` (1 keeps the comparison to one core per worker).
"""

from __future__ import annotations

import resource
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from .harness import register


def _arguments(p) -> None:
    p.add_argument("--rows", type=int, default=200_000, help="rows of the product set")
    p.add_argument("--dims", type=int, default=8, help="input columns")
    p.add_argument("--files", type=int, default=8, help="Parquet files")
    p.add_argument("--rhs", type=int, nargs="+", default=[1], help="right-hand sides")
    p.add_argument("--repeat", type=int, default=2, help="products timed per setting")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="cluster sizes")
    p.add_argument("--fit-rows", type=int, default=20_000,
                   help="rows of the whole fit (0: no fit)")
    p.add_argument("--test-rows", type=int, default=2_000, help="held-out rows of the fit")
    p.add_argument("--data-dir", default=None,
                   help="folder for the Parquet files (default: a temporary folder)")


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _write(folder: Path, n: int, d: int, files: int, seed: int = 0) -> None:
    """``files`` Parquet files of a smooth function of d inputs plus noise (σ = 0.1)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, d))
    w = rng.standard_normal(d) / np.sqrt(d)
    y = np.sin(2.0 * X @ w) + 0.3 * np.cos(X[:, 0] * X[:, 1 % d]) \
        + 0.1 * rng.standard_normal(n)
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(np.array_split(np.arange(n), files)):
        cols = {f"x{j}": X[rows, j] for j in range(d)} | {"y": y[rows]}
        pq.write_table(pa.table(cols), folder / f"part-{i:03d}.parquet")


def _rows(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Every row of the Parquet folder, through the reader a fit uses."""
    from gpscale.io import open_source

    X, y = open_source(folder, target="y").to_arrays()
    return torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)


def _kernel(d: int):
    from gpscale.kernels import make_kernel

    k = make_kernel("rbf-ard", d)
    with torch.no_grad():
        k.base.lengthscale = torch.full((d,), 1.5, dtype=torch.float64)
    return k.to(torch.float64)


def _time_products(op, V: torch.Tensor, repeat: int) -> tuple[float, torch.Tensor]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = op.matmul(V)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _worker_rss(client) -> float:
    peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
    return max(peaks.values()) if peaks else float("nan")


def _fit(folder: Path, n_fit: int, n_test: int, workers: int | None) -> dict:
    """``gpscale.fit`` on the first n_fit rows (a Parquet file of them), RMSE on the next
    n_test rows; in process when ``workers`` is None."""
    import gpscale

    X, y = _rows(folder)
    fit_file = folder.parent / f"fit-{n_fit}.parquet"
    if not fit_file.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = {f"x{j}": X[:n_fit, j].numpy() for j in range(X.shape[1])}
        pq.write_table(pa.table(cols | {"y": y[:n_fit].numpy()}), fit_file)
    Xte, yte = X[n_fit:n_fit + n_test].numpy(), y[n_fit:n_fit + n_test].numpy()
    t0 = time.perf_counter()
    pred = gpscale.fit(fit_file, target="y", method="exact", solver="cg", seed=0,
                       workers=workers)
    fit_s = time.perf_counter() - t0
    mean = pred.predict(Xte)
    info = pred.model.solver.solve_info
    return {"fit_s": fit_s, "rmse": float(np.sqrt(np.mean((mean - yte) ** 2))),
            "std_y": float(np.std(yte)), "cg_iterations": info.get("iterations"),
            "cg_passes": info.get("passes"), "precond_rank": info.get("precond_rank"),
            "solve_s": info.get("seconds"),
            "refine_evals": getattr(pred.model, "refined", {}).get("evaluations", 0),
            "refine_s": getattr(pred.model, "refined", {}).get("seconds"), "mean": mean}


@register("exact-cluster", help="the exact GP's CG products on a dask LocalCluster of 1 "
          "and 2 workers vs in process (issue 30)", add_arguments=_arguments)
def run(args, rec) -> None:
    import tempfile

    from gpscale.kernels.cluster_operator import ClusterOperator
    from gpscale.kernels.operator import KernelOperator
    from gpscale.parallel.cluster import connect

    if args.quick:
        args.rows, args.fit_rows, args.test_rows, args.repeat = 6000, 1500, 300, 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.data_dir or tmp) / f"rows-{args.rows}x{args.dims}"
        if not folder.exists():
            _write(folder, args.rows, args.dims, args.files)
        X, _ = _rows(folder)
        kernel, noise = _kernel(args.dims), torch.tensor(0.01, dtype=torch.float64)
        rec.summary(rows=args.rows, dims=args.dims, files=args.files, rhs=args.rhs,
                    workers=args.workers, fit_rows=args.fit_rows,
                    client_threads=torch.get_num_threads())
        here = KernelOperator(kernel, X, noise, block_dtype=torch.float32)
        gen = torch.Generator().manual_seed(0)
        per_product: dict[tuple[str, int], float] = {}
        reference = {}
        for k in args.rhs:
            V = torch.randn(args.rows, k, generator=gen, dtype=torch.float64)
            secs, reference[k] = _time_products(here, V, args.repeat)
            per_product[("in-process", k)] = secs
            rec.record(kind="product", where="in-process", workers=0, n=args.rows, rhs=k,
                       seconds=secs, client_rss_gib=_rss_gib())
        for w in args.workers:
            with connect(workers=w) as client:
                t0 = time.perf_counter()
                op = ClusterOperator(kernel, X, noise, client, block_dtype=torch.float32)
                setup = time.perf_counter() - t0
                gen = torch.Generator().manual_seed(0)
                for k in args.rhs:
                    V = torch.randn(args.rows, k, generator=gen, dtype=torch.float64)
                    secs, out = _time_products(op, V, args.repeat)
                    per_product[(f"{w} workers", k)] = secs
                    diff = float((out - reference[k]).abs().max()
                                 / reference[k].abs().max())
                    rec.record(kind="product", where="cluster", workers=w, n=args.rows,
                               rhs=k, seconds=secs, setup_s=setup, max_rel_diff=diff,
                               client_rss_gib=_rss_gib(), worker_rss_gib=_worker_rss(client))
        diffs = [r["max_rel_diff"] for r in rec.records if r.get("kind") == "product"
                 and r.get("max_rel_diff") is not None]
        rec.target("cluster_vs_in_process_max_rel_diff", max(diffs), 1e-12,
                   what="largest relative difference of a cluster product from the "
                   "in-process one")
        for k in args.rhs:
            one, two = per_product.get(("1 workers", k)), per_product.get(("2 workers", k))
            if one and two:
                rec.target(f"two_over_one_worker_rhs{k}", two / one, 0.6,
                           what="seconds per product, 2 workers / 1 worker")
        if args.fit_rows:
            base = _fit(folder, args.fit_rows, args.test_rows, None)
            rec.record(kind="fit", workers=0, n=args.fit_rows,
                       **{k: v for k, v in base.items() if k != "mean"},
                       client_rss_gib=_rss_gib())
            for w in args.workers:
                out = _fit(folder, args.fit_rows, args.test_rows, w)
                gap = float(np.max(np.abs(out.pop("mean") - base["mean"])))
                rec.record(kind="fit", workers=w, n=args.fit_rows, **out,
                           max_abs_mean_diff_vs_in_process=gap, client_rss_gib=_rss_gib())
