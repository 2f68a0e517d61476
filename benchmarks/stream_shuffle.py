"""``gpscale bench stream-shuffle``: what training MINIMAX and SCGD (Shoham & Avron
§3.1–3.2) from files costs against the in-memory full permutation.

kin40k, fold 0 (training rows ``~test_mask[:, 0]``), written to ``--files`` Parquet files
in a temporary folder with row groups of ``--row-group`` rows, once in the order stored
and once sorted by the target (a file ordered by what is predicted: the hard case for a
shuffle buffer). Each method (RFF features of an RBF-ARD kernel, ``--num-features``,
lengthscales started at √d, times a learned magnitude) is trained from the same start
with the same seed, optimiser and learning rate (a) from the standardised rows in memory
(the full-permutation path) and (b) from the files through
:class:`~gpscale.train.batches.ShuffledStream` with shuffle buffers of 1, 4 and 16 row
groups and of all rows. Recorded per run: the exact NLML per point at the returned θ
(the best once-per-epoch checkpoint, as the paper reports), the test RMSE (standardised
units) and the wall time per epoch (steps, reads and the checkpoint's statistics pass);
and, per buffer, the time to read one epoch of minibatches alone.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from .harness import register

METHODS = ("minimax", "scgd")
ORDERS = ("stored", "sorted")


def _arguments(p) -> None:
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--orders", nargs="+", default=None, choices=ORDERS,
                   help="row order in the files: as stored and sorted by y (default both; "
                   "--quick: sorted)")
    p.add_argument("--buffers", nargs="+", default=None,
                   help="shuffle buffers in row groups, or 'full' (default 1 4 16 full)")
    p.add_argument("--row-group", type=int, default=None,
                   help="rows per Parquet row group (default 1024; --quick 256)")
    p.add_argument("--files", type=int, default=4, help="Parquet files (default 4)")
    p.add_argument("--num-features", type=int, default=None,
                   help="random Fourier features p (default 256; --quick 64)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=float, default=None, help="epochs (default 4; quick 1)")
    p.add_argument("--optimizer", default="adam")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="seeds (default 0 1; --quick 0)")
    p.add_argument("--max-train", type=int, default=None,
                   help="use only the first N training rows (default all; --quick 4000)")


def _write(folder: Path, X: np.ndarray, y: np.ndarray, files: int, row_group: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    for k, idx in enumerate(np.array_split(np.arange(len(y)), files)):
        cols = {f"x{j}": X[idx, j] for j in range(X.shape[1])} | {"y": y[idx]}
        pq.write_table(pa.table(cols), folder / f"part-{k:02d}.parquet",
                       row_group_size=row_group)


def _fit(method, data, feats, args, seed, buffer_rows, device):
    from gpscale.train.stochastic import fit_minimax, fit_scgd

    fit = {"minimax": fit_minimax, "scgd": fit_scgd}[method]
    X, y = data
    extra = {} if buffer_rows is None else {"buffer_rows": buffer_rows}
    return fit(X, y, feats, batch_size=args.batch_size, epochs=args.epochs,
               optimizer=args.optimizer, lr=args.lr, seed=seed, device=device, **extra)


def _read_epoch_s(rows, batch_size: int, buffer_rows: int | None, n: int) -> float:
    """Seconds to produce one epoch of minibatches and nothing else."""
    from gpscale.train.batches import ShuffledStream
    from gpscale.train.minibatch import epoch_batches

    t0 = time.perf_counter()
    if buffer_rows is None:
        Xs, ys = rows
        for idx in epoch_batches(n, batch_size, torch.Generator().manual_seed(0)):
            Xs[idx], ys[idx]
    else:
        for _ in ShuffledStream.from_rows(rows, batch_size, buffer_rows=buffer_rows).epoch():
            pass
    return time.perf_counter() - t0


@register("stream-shuffle", help="MINIMAX / SCGD from Parquet row groups through a shuffle "
          "buffer vs the in-memory full permutation (kin40k)", add_arguments=_arguments,
          plot=lambda fig, recs, row: _plot(fig, recs, row))
def run(args, rec) -> None:
    from gpscale.data import load_uci
    from gpscale.features import RandomFourierFeatures
    from gpscale.features.neural import ScaledFeatures
    from gpscale.io import Rows, open_source
    from gpscale.preprocessing import Standardizer

    quick = bool(args.quick)
    args.orders = args.orders or (["sorted"] if quick else list(ORDERS))
    args.buffers = args.buffers or ["1", "4", "16", "full"]
    args.row_group = args.row_group or (256 if quick else 1024)
    args.num_features = args.num_features or (64 if quick else 256)
    args.epochs = args.epochs or (1 if quick else 4)
    args.seeds = args.seeds or ([0] if quick else [0, 1])
    max_train = args.max_train or (4000 if quick else None)
    device = args.device
    split = load_uci("kin40k", fold=0, standardize=False)
    X, y = split.X_train[:max_train], split.y_train[:max_train]
    n, d = X.shape
    sc = Standardizer.fit(X, y)  # the same scaling for both paths
    Xte = torch.as_tensor(sc.transform_x(split.X_test), device=device)
    yte = torch.as_tensor(sc.transform_y(split.y_test), device=device)
    rec.summary(dataset="kin40k", fold=0, n_train=n, n_test=len(yte), p=args.num_features,
                batch_size=args.batch_size, epochs=args.epochs, optimizer=args.optimizer,
                lr=args.lr, row_group=args.row_group, files=args.files,
                seeds=list(args.seeds))
    results: dict[tuple, list[float]] = {}
    read_s: dict[tuple, float] = {}
    with tempfile.TemporaryDirectory(prefix="gpscale-stream-shuffle-") as tmp:
        for order in args.orders:
            idx = np.argsort(y, kind="stable") if order == "sorted" else np.arange(n)
            folder = Path(tmp) / order
            _write(folder, X[idx], y[idx], args.files, args.row_group)
            rows = Rows(tuple(open_source(str(folder), target="y").partitions()),
                                 d, sc)
            Xs = torch.as_tensor(sc.transform_x(X[idx]), device=device)
            ys = torch.as_tensor(sc.transform_y(y[idx]), device=device)
            configs = [("permutation", None, None)]
            for b in args.buffers:
                size = n if b == "full" else int(b) * args.row_group
                configs.append(("stream", b, size))
            for source, groups, size in configs:
                data = (Xs, ys) if size is None else (rows, None)
                read_s[(order, groups or "permutation")] = _read_epoch_s(
                    data if size is None else rows, args.batch_size, size, n)
                rec.record(kind="read", order=order, source=source, buffer_groups=groups,
                           buffer_rows=size,
                           read_epoch_s=read_s[(order, groups or "permutation")])
                for method in args.methods:
                    for seed in args.seeds:
                        feats = ScaledFeatures(RandomFourierFeatures(
                            d, args.num_features, lengthscale=math.sqrt(d), ard=True,
                            seed=seed))
                        t0 = time.perf_counter()
                        model, res = _fit(method, data, feats, args, seed, size, device)
                        wall = time.perf_counter() - t0
                        with torch.no_grad():
                            mean = model.predict(Xte).mean
                        rmse = float(torch.sqrt(((mean - yte) ** 2).mean()))
                        rec.record(kind="fit", order=order, method=method, source=source,
                                   buffer_groups=groups, buffer_rows=size, seed=seed,
                                   nlml=res.objective, test_rmse=rmse, wall_s=wall,
                                   epoch_s=wall / args.epochs, reason=res.reason)
                        key = (order, method, groups or "permutation")
                        results.setdefault(key, []).append(res.objective)
                        results.setdefault(key + ("rmse",), []).append(rmse)
                        results.setdefault(key + ("epoch_s",), []).append(wall / args.epochs)
    _compare(rec, results, read_s)
    for (order, method, groups, *what), values in results.items():
        if what:
            continue
        base = statistics.mean(results[(order, method, "permutation")])
        mean = statistics.mean(values)
        label = "permutation" if groups == "permutation" else f"buffer_{groups}"
        rec.summary(**{f"nlml_{order}_{method}_{label}": mean})
        if groups != "permutation":
            rec.summary(**{f"dnlml_{order}_{method}_{label}": mean - base})
    for order in args.orders:
        for method in args.methods:
            key = (order, method, "full")
            if key in results:
                delta = (statistics.mean(results[key])
                         - statistics.mean(results[(order, method, "permutation")]))
                rec.target(f"|Δnlml| {method} {order} full buffer", abs(delta), 0.01,
                           what="a buffer of all rows is a full permutation: the same "
                           "result up to the seed's noise")
    rec.note("Δnlml = NLML per point (streamed) − NLML per point (in-memory permutation), "
             "mean over seeds; the same seed gives different batches on the two paths, so "
             "differences of the size of the seed-to-seed spread are noise.")


def _compare(rec, results: dict[tuple, list[float]], read_s: dict[tuple, float]) -> None:
    """One ``comparison`` row per (order, method, source): means over the seeds and the
    differences from the in-memory permutation."""
    for (order, method, groups, *what), nlml in results.items():
        if what:
            continue
        base = (order, method, "permutation")
        row = {"order": order, "method": method, "buffer_groups": groups,
               "nlml": statistics.mean(nlml),
               "test_rmse": statistics.mean(results[(order, method, groups, "rmse")]),
               "epoch_s": statistics.mean(results[(order, method, groups, "epoch_s")]),
               "read_epoch_s": read_s[(order, groups)]}
        if groups != "permutation":
            row["dnlml"] = row["nlml"] - statistics.mean(results[base])
            row["dtest_rmse"] = row["test_rmse"] - statistics.mean(results[base + ("rmse",)])
            row["epoch_s_ratio"] = row["epoch_s"] / statistics.mean(
                results[base + ("epoch_s",)])
        if len(nlml) > 1:
            row["nlml_seed_sd"] = statistics.stdev(nlml)
        rec.record(kind="comparison", **row)


def _plot(fig, records: list[dict], row: dict) -> None:
    fits = [r for r in records if r.get("kind") == "fit"]
    orders = sorted({r["order"] for r in fits})
    for k, order in enumerate(orders):
        ax = fig.add_subplot(1, len(orders), k + 1)
        for j, method in enumerate(sorted({r["method"] for r in fits})):
            rs = [r for r in fits if r["order"] == order and r["method"] == method]
            labels = []
            for r in rs:
                lab = r["buffer_groups"] or "perm"
                if lab not in labels:
                    labels.append(lab)
            means = [statistics.mean(r["nlml"] for r in rs if (r["buffer_groups"] or "perm")
                                     == lab) for lab in labels]
            ax.plot(range(len(labels)), means, "o-", color=f"C{j}", label=method)
            ax.set_xticks(range(len(labels)), labels)
        ax.set_title(f"rows {order}", fontsize=9)
        ax.set_xlabel("shuffle buffer (row groups) / in-memory permutation")
        ax.set_ylabel("exact NLML per point (train)")
        ax.legend(fontsize=8)
