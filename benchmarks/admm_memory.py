"""``gpscale bench admm-memory``: peak memory of GPCV-ADMM at large n (issue: n = 50 000
in < 8 GiB).

For each n, a fresh process builds synthetic data (n points uniform on [0, 1]^d, RBF-ARD,
θ⁰ as in ``admm-quality``) and runs every code path of a hold-out GPCV-ADMM fit once:
the z⁰ and λ⁰ solves, ``--iters`` ADMM iterations with the tangent θ-step
(:data:`gpscale.train.admm.TANGENT`: its forward difference, adjoint and curve solves,
the gradient contractions, the z-step and the λ-step), the ML-scale solve on all n
points (its rank-1000 pivoted-Cholesky preconditioner included) and the CG predictive
mean at 1000 new points. Every CG solve is capped at ``--cg-cap`` iterations and the
θ-step at one step with two backtracks: memory does not grow with iterations (each
product is a loop over row blocks), so the caps bound the time, not the peak. Peak
memory is the child's maximum resident set size, which includes the interpreter, torch
and the data; on CUDA also torch's peak allocation on the device.

At n = 50 000 the kernel blocks (n_T × n = 10 GB in float64) exceed the 1 GiB dense
budget, so ``memory="auto"`` recomputes them by row blocks: that is what is measured.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import resource
import time

import torch

from gpscale.train.admm import (
    TANGENT,
    calibrate_scale,
    cg_predict,
    dense_blocks,
    fit_admm_hocv,
    make_options,
    scale_cg_options,
)

from .admm_scaling import _rbf_ard
from .harness import register

#: the issue's memory budget at n = 50 000
TARGET_N, TARGET_GIB = 50_000, 8.0


def _arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="sizes (default 10000 50000; --quick 2000)")
    p.add_argument("--d", type=int, default=8, help="input columns (default 8, as kin40k)")
    p.add_argument("--iters", type=int, default=1, help="ADMM iterations (default 1)")
    p.add_argument("--cg-cap", type=int, default=3,
                   help="iterations per CG solve (default 3; memory does not depend on it)")
    p.add_argument("--dense-gib", type=float, default=1.0,
                   help="budget for holding kernel blocks densely (default 1, the library's "
                        "default; 0: always chunked)")


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _child(n: int, d: int, iters: int, cap: int, dense_bytes: int, device: str, threads: int,
           queue) -> None:
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(n, d, generator=gen, dtype=torch.float64)
    y = torch.sin(2 * math.pi * X[:, 0]) * X[:, 1] + 0.1 * torch.randn(
        n, generator=gen, dtype=torch.float64)
    Xs = torch.rand(1000, d, generator=gen, dtype=torch.float64)
    X, y, Xs = X.to(device), y.to(device), Xs.to(device)
    model = _rbf_ard(X, y)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    row = {"n": n, "d": d, "iters": iters, "cg_cap": cap, "rss_data_gib": _peak_gib()}
    opts = {**TANGENT, "cg_max_iter": cap, "curve_cg": min(cap, 10), "theta_steps": 1,
            "max_backtracks": 2, "dense_bytes": dense_bytes}
    n_V = round(0.5 * n)  # fit_admm_hocv's default split: ½ validates
    dense = dense_blocks(make_options(**opts), n - n_V, n_V, X.element_size())
    row["blocks"] = "dense" if dense else "chunked"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    t = time.perf_counter()
    res = fit_admm_hocv(model, max_iter=iters, scale="keep", **opts)
    sync()
    row["admm_s"] = time.perf_counter() - t
    row["admm_iters"] = max(h["iter"] for h in res.history)
    row["rss_after_admm_gib"] = _peak_gib()
    t = time.perf_counter()
    calibrate_scale(model, **{**scale_cg_options(make_options(**opts), n), "max_iter": cap})
    sync()
    row["scale_s"] = time.perf_counter() - t
    t = time.perf_counter()
    mean = cg_predict(model, Xs, max_iter=cap, precond_rank=min(1000, n),
                      dense_bytes=dense_bytes)
    sync()
    row["predict_s"] = time.perf_counter() - t
    row["finite"] = bool(torch.isfinite(mean).all())
    row["peak_mem_gib"] = _peak_gib()
    if cuda:
        row["cuda_peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    queue.put(row)


@register("admm-memory", help="GPCV-ADMM peak memory at large n (every code path once, "
          "chunked kernel blocks): target n = 50 000 in < 8 GiB", add_arguments=_arguments)
def run(args, rec) -> None:
    sizes = args.n or ([2000] if args.quick else [10_000, TARGET_N])
    ctx = mp.get_context("spawn")
    last = None
    for n in sizes:
        queue = ctx.Queue()
        proc = ctx.Process(target=_child, args=(n, args.d, args.iters, args.cg_cap,
                                                int(args.dense_gib * 2**30), str(args.device),
                                                torch.get_num_threads(), queue))
        proc.start()
        row = queue.get()
        proc.join()
        last = rec.record(**row)
    rec.summary(n=last["n"], blocks=last["blocks"], peak_mem_gib=last["peak_mem_gib"],
                admm_s=last["admm_s"])
    if last["n"] >= TARGET_N:
        rec.target(f"peak_mem_gib at n={last['n']}", last["peak_mem_gib"], TARGET_GIB, "<=",
                   "the child's peak RSS over a whole hold-out ADMM fit, ML scale and "
                   "prediction included")
    else:
        rec.note(f"the {TARGET_GIB:g} GiB target is stated for n = {TARGET_N}; this run "
                 "was smaller")
    rec.note(f"Kernel blocks held densely up to {args.dense_gib:g} GiB, chunked beyond.")
    rec.note(f"Tangent θ-step ({TANGENT}) capped for time: {args.iters} ADMM iteration(s), "
             f"{args.cg_cap} iterations per CG solve, one θ-step of at most two "
             "backtracks. The caps bound the time, not the memory: every product loops "
             "over row blocks whatever the iteration count. Peak = the child process's "
             "maximum RSS (interpreter, torch and data included).")
