"""``gpscale bench feature-stats``: the FeatureGP streaming statistics pass.

For each n (synthetic inputs, d columns, random Fourier features of dimension p), a
fresh process builds the data, then times one statistics pass (ΦᵀΦ, Φᵀy, yᵀy), one
NLML + gradient evaluation with learnable lengthscales (two streaming passes), and
one O(p³) NLML evaluation from cached statistics (fixed features). Peak memory is the
child's maximum resident set size, which includes the interpreter, torch and the
data itself (n·(d + 1) doubles).

Target (issue 2): n = 10⁶, p = 512 statistics pass in < 2 GiB peak memory.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time

import torch

from .harness import register


def _arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="sizes (default 10000 100000 1000000; --quick 10000 100000)")
    p.add_argument("--p", type=int, default=512, help="number of features (default 512)")
    p.add_argument("--d", type=int, default=8, help="input columns (default 8)")


def _child(n: int, p: int, d: int, device: str, threads: int, queue) -> None:
    from gpscale.features import RandomFourierFeatures
    from gpscale.models import FeatureGP

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64).to(device)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64).to(device)
    feats = RandomFourierFeatures(d, p, seed=0)
    model = FeatureGP(feats, X, y, noise=0.1)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    t = time.perf_counter()
    model.statistics()
    sync()
    stats_s = time.perf_counter() - t
    t = time.perf_counter()
    model.nlml().backward()
    sync()
    grad_s = time.perf_counter() - t
    feats.raw_lengthscale.requires_grad_(False)
    model.statistics()  # fills the cache: the features are now fixed
    t = time.perf_counter()
    for _ in range(10):
        model.nlml()
    sync()
    lml_s = (time.perf_counter() - t) / 10
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    queue.put({"n": n, "p": p, "d": d, "stats_pass_s": stats_s, "nlml_grad_two_pass_s": grad_s,
               "nlml_from_stats_s": lml_s, "peak_mem_gib": peak,
               "rss_before_pass_gib": rss_before, "chunk_rows": model.chunk})


@register("feature-stats", help="FeatureGP streaming statistics: time and peak memory vs n",
          add_arguments=_arguments)
def run(args, rec) -> None:
    sizes = args.n or ([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    ctx = mp.get_context("spawn")
    for n in sizes:
        queue = ctx.Queue()
        proc = ctx.Process(target=_child, args=(n, args.p, args.d, str(args.device),
                                                torch.get_num_threads(), queue))
        proc.start()
        row = queue.get()
        proc.join()
        rec.record(**row)
        last = row
    rec.summary(n=last["n"], p=last["p"], stats_pass_s=last["stats_pass_s"],
                peak_mem_gib=last["peak_mem_gib"])
    if last["n"] >= 1_000_000 and last["p"] >= 512:
        rec.target("peak_mem_gib at n=1e6, p=512", last["peak_mem_gib"], 2.0, "<=")
    else:
        rec.note("the 2 GiB target is stated for n = 10⁶, p = 512; this run was smaller")
