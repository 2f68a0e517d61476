"""GP-GRIEF benchmarks (Evans & Nair 2018): ``grief-reconstruction`` (Fig. 2) and
``grief-scaling`` (O(p) vs O(p³) likelihood evaluations, statistics pass vs n); the
UCI study (Table 1) is ``grief-uci`` in :mod:`benchmarks.grief_uci`, registered
when this module is imported.

grief-reconstruction — n points from U(−√3, √3)^d (default n = 5000, d = 100), half
train, half test, unit-variance SE kernel with lengthscale ``--lengthscale`` (the
paper does not state it; the default √d makes the mean scaled squared distance 2,
E k ≈ e⁻¹). Relative Frobenius error ‖K − K̃‖_F / ‖K‖_F of the train prior covariance
and of the joint train/test covariance, vs p, for GRIEF (m̄ = 100, grid on the
training range, m = 100^d), randomized Nyström (m = p training points sampled
uniformly), random Fourier features (Rahimi & Recht, i.i.d. Gaussian frequencies)
and the exact eigendecomposition of each matrix (the optimal rank-p error). Every
approximation sees the training inputs only. Averaged over ``--samples`` draws.

grief-scaling — synthetic data (d = 10), GRIEF features (m̄ = 10, p = 1000); for each
n a fresh process times the statistics pass (ΦᵀΦ, Φᵀy, yᵀy), one −LML + gradient in
the O(p³) path (``FeatureGP(weights="diag")`` from the cached statistics: all p + 1
derivatives by autograd through a Cholesky) and in the O(p) path
(:class:`~gpscale.models.grief.OrthogonalGrief`, §5), and reports its max RSS.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import resource
import time

import numpy as np
import torch

from . import grief_uci  # noqa: F401  (registers grief-uci)
from .harness import register, time_call, time_calls

SQRT3 = math.sqrt(3.0)
METHODS = ("grief", "nystrom", "rff", "optimal")


# -- grief-reconstruction ----------------------------------------------------------------
def _recon_arguments(p) -> None:
    p.add_argument("--n", type=int, default=None,
                   help="points, half train / half test (default 5000; --quick 1000)")
    p.add_argument("--d", type=int, default=100, help="input dimension (default 100)")
    p.add_argument("--p", type=int, nargs="+", default=None,
                   help="numbers of basis functions (default 10 20 50 100 200 500 1000; "
                   "--quick 10 50 100 200)")
    p.add_argument("--m-bar", type=int, default=100, help="GRIEF grid points per dimension")
    p.add_argument("--lengthscale", type=float, default=None,
                   help="SE lengthscale (default sqrt(d))")
    p.add_argument("--samples", type=int, default=None,
                   help="independent draws averaged (default 3; --quick 1)")
    p.add_argument("--seed", type=int, default=0)


def se_kernel(X1: torch.Tensor, X2: torch.Tensor, lengthscale: float) -> torch.Tensor:
    """k(x, z) = exp(−‖x − z‖² / (2 l²)), unit variance."""
    a, b = X1 / lengthscale, X2 / lengthscale
    r2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.mT
    return torch.exp(-0.5 * r2.clamp_min(0.0))


def relative_error(K: torch.Tensor, phi: torch.Tensor, k_norm2: float) -> float:
    """‖K − ΦΦᵀ‖_F / ‖K‖_F by ‖K‖² − 2 tr(ΦᵀKΦ) + ‖ΦᵀΦ‖², O(n² p) without ΦΦᵀ."""
    cross = float((phi * (K @ phi)).sum())
    gram = phi.mT @ phi
    err2 = k_norm2 - 2.0 * cross + float((gram * gram).sum())
    return math.sqrt(max(err2, 0.0) / k_norm2)


def optimal_errors(eigs: torch.Tensor, ps: list[int]) -> list[float]:
    """Best rank-p relative Frobenius error from the eigenvalues: √(Σ_{i>p} λᵢ² / Σ λᵢ²)."""
    lam2 = torch.sort(eigs.abs(), descending=True).values ** 2
    tail = torch.flip(torch.cumsum(torch.flip(lam2, [0]), 0), [0])  # tail[j] = Σ_{i≥j}
    total = float(lam2.sum())
    return [math.sqrt(float(tail[p]) / total) if p < lam2.numel() else 0.0 for p in ps]


def nystrom_features(X: torch.Tensor, Z: torch.Tensor, lengthscale: float,
                     rtol: float = 1e-10) -> torch.Tensor:
    """Φ = K_XZ V S^{-1/2} (K_ZZ = V S Vᵀ, eigenvalues ≤ rtol·max dropped): ΦΦᵀ is the
    Nyström approximation K_XZ K_ZZ⁺ K_ZX."""
    s, V = torch.linalg.eigh(se_kernel(Z, Z, lengthscale))
    keep = s > rtol * s.max()
    return se_kernel(X, Z, lengthscale) @ (V[:, keep] / s[keep].sqrt())


@register("grief-reconstruction",
          help="GRIEF vs Nyström vs RFF vs optimal: kernel reconstruction error vs p (Fig. 2)",
          add_arguments=_recon_arguments,
          plot=lambda fig, recs, row: plot_reconstruction(fig, recs, row))
def run_reconstruction(args, rec) -> None:
    from gpscale.features import GriefFeatures, RandomFourierFeatures

    n = args.n or (1000 if args.quick else 5000)
    ps = sorted(args.p or ([10, 50, 100, 200] if args.quick else
                           [10, 20, 50, 100, 200, 500, 1000]))
    samples = args.samples or (1 if args.quick else 3)
    d, dev = args.d, args.device
    ls = args.lengthscale or math.sqrt(d)
    n_train = n // 2
    if n_train < 2 or any(p < 2 or p % 2 or p > n_train for p in ps):
        raise ValueError(f"each p must be even and in [2, n/2 = {n_train}], got {ps}")
    errs: dict[tuple[str, str, int], list[float]] = {}
    for s in range(samples):
        gen = torch.Generator().manual_seed(args.seed + s)
        X = ((torch.rand(n, d, generator=gen, dtype=torch.float64) * 2 - 1) * SQRT3).to(dev)
        perm = torch.randperm(n, generator=gen).to(dev)
        X = X[perm]  # first half train, second half test
        t0 = time.perf_counter()
        K = se_kernel(X, X, ls)
        Ktr = K[:n_train, :n_train]
        norms = {"train": float((Ktr * Ktr).sum()), "joint": float((K * K).sum())}
        opt = {"train": optimal_errors(torch.linalg.eigvalsh(Ktr), ps),
               "joint": optimal_errors(torch.linalg.eigvalsh(K), ps)}
        exact_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        grief = GriefFeatures(X[:n_train], max(ps), m_bar=args.m_bar, kernel="rbf",
                              lengthscale=ls, device=dev)
        with torch.no_grad():
            phi_grief = grief(X)  # columns in descending eigenvalue order
        grief_s = time.perf_counter() - t0
        for j, p in enumerate(ps):
            sub = torch.randperm(n_train, generator=gen)[:p].to(dev)
            rff = RandomFourierFeatures(d, p, kernel="rbf", lengthscale=ls, orthogonal=False,
                                        seed=args.seed + 1000 * s + j).to(dev)
            with torch.no_grad():
                phis = {"grief": phi_grief[:, :p],
                        "nystrom": nystrom_features(X, X[sub], ls),
                        "rff": rff(X)}
            for method, phi in phis.items():
                for which in ("train", "joint"):
                    Kw, ph = (Ktr, phi[:n_train]) if which == "train" else (K, phi)
                    errs.setdefault((method, which, p), []).append(
                        relative_error(Kw, ph, norms[which]))
            for which in ("train", "joint"):
                errs.setdefault(("optimal", which, p), []).append(opt[which][j])
        rec.record(kind="timing per sample", sample=s, exact_kernel_and_eigvalsh_s=exact_s,
                   grief_features_s=grief_s, log10_m=grief.log10_m)
    rows = []
    for (method, which, p), v in sorted(errs.items(), key=lambda t: (t[0][1], t[0][2])):
        a = np.array(v)
        rows.append(rec.record(kind="error", set=which, p=p, method=method,
                               rel_frobenius_error=float(a.mean()),
                               std=float(a.std(ddof=1)) if a.size > 1 else None,
                               samples=a.size))
    wins, total = 0, 0
    for which in ("train", "joint"):
        for p in ps:
            e = {m: float(np.mean(errs[(m, which, p)])) for m in METHODS}
            total += 1
            wins += int(e["grief"] < min(e["nystrom"], e["rff"]))
            rec.summary(**{f"{m}_{which}_p{p}": e[m] for m in METHODS if p == max(ps)})
    rec.summary(n=n, d=d, lengthscale=ls, m_bar=args.m_bar, samples=samples,
                log10_m=grief.log10_m, grief_beats_both=f"{wins}/{total}")
    rec.target("fraction of (p, set) where GRIEF error < Nyström and RFF", wins / total, 1.0,
               ">=", "issue 4: below randomized Nyström and RFF at every p on both sets")
    rec.note("the paper (§6, Fig. 2) does not give the SE lengthscale; this run used "
             f"l = {ls:.4g} (default √d). It averages over 10 draws; this run over "
             f"{samples}. RFF: i.i.d. Gaussian frequencies (Rahimi & Recht 2007), p/2 "
             "frequencies with a cosine and a sine each.")


def plot_reconstruction(fig, records: list[dict], row: dict) -> None:
    rows = [r for r in records if r.get("kind") == "error"]
    axes = fig.subplots(1, 2, sharey=True)
    styles = {"grief": "C0-o", "nystrom": "C1-s", "rff": "C2-^", "optimal": "k--"}
    for ax, which, title in zip(axes, ("train", "joint"),
                                ("(a) training prior covariance", "(b) joint train/test")):
        for m in METHODS:
            sel = sorted((r["p"], r["rel_frobenius_error"]) for r in rows
                         if r["set"] == which and r["method"] == m)
            if sel:
                ax.plot(*zip(*sel), styles[m], label=m, ms=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("p (number of basis functions)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("‖K − K̃‖_F / ‖K‖_F")


# -- grief-scaling -------------------------------------------------------------------------
def _scaling_arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="sizes (default 10000 100000 1000000; --quick 10000 30000)")
    p.add_argument("--p", type=int, default=1000, help="eigenfunctions (default 1000)")
    p.add_argument("--d", type=int, default=10, help="input columns (default 10)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed O(p) evaluations (default 2000); O(p³) gets a tenth")


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _scaling_child(n: int, p: int, d: int, repeats: int, device: str, threads: int,
                   queue) -> None:
    from gpscale.features import GriefFeatures
    from gpscale.models import FeatureGP
    from gpscale.models.grief import OrthogonalGrief

    torch.set_num_threads(threads)
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(0)
    X = (torch.rand(n, d, generator=gen, dtype=torch.float64) * 2 - 1) * SQRT3
    f = torch.sin(X[:, 0]) * torch.cos(X[:, 1]) + 0.5 * X[:, 2:].sum(1) / math.sqrt(d)
    y = f + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)
    X, y = X.to(dev), y.to(dev)
    feats = GriefFeatures(X, p, m_bar=10, kernel="rbf", lengthscale=1.0, device=dev)
    feats.raw_lengthscale.requires_grad_(False)
    model = FeatureGP(feats, X, y, noise=0.1, weights="diag", device=dev)
    rss_before = _rss_gib()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    sync()
    t = time.perf_counter()
    gram, proj, yy = model.statistics()
    sync()
    stats_s = time.perf_counter() - t
    peak_stats = _rss_gib()
    t = time.perf_counter()
    orth = OrthogonalGrief.from_statistics(gram, proj, yy, n)
    sync()
    setup_s = time.perf_counter() - t
    w = torch.ones(orth.rank, dtype=torch.float64, device=dev)
    noise = torch.tensor(0.1, dtype=torch.float64, device=dev)

    def cubic():
        model.zero_grad(set_to_none=True)
        model.nlml().backward()

    t_lin = time_calls({"o_p": lambda: orth.nlml_and_grad(w, noise)}, repeats=repeats,
                       warmup=20, device=dev)["o_p"]
    t_cub = time_call(cubic, repeats=max(3, repeats // 100), warmup=1, device=dev)
    queue.put({"kind": "per n", "n": n, "p": p, "d": d, "p_tilde": orth.rank,
               "log10_m": feats.log10_m, "stats_pass_s": stats_s,
               "orth_setup_s": setup_s, "lml_grad_Op_s": t_lin.median_s,
               "lml_grad_Op_min_s": t_lin.min_s, "lml_grad_Op3_s": t_cub.median_s,
               "lml_grad_Op3_min_s": t_cub.min_s, "peak_mem_gib": _rss_gib(),
               "peak_mem_after_stats_gib": peak_stats, "rss_before_pass_gib": rss_before,
               "chunk_rows": model.chunk})


@register("grief-scaling",
          help="GRIEF: O(p) vs O(p³) LML + gradient time and statistics pass vs n",
          add_arguments=_scaling_arguments,
          plot=lambda fig, recs, row: plot_scaling(fig, recs, row))
def run_scaling(args, rec) -> None:
    sizes = sorted(args.n or ([10_000, 30_000] if args.quick else
                              [10_000, 100_000, 1_000_000]))
    repeats = args.repeats or 2000
    ctx = mp.get_context("spawn")
    rows = {}
    for n in sizes:
        queue = ctx.Queue()
        proc = ctx.Process(target=_scaling_child,
                           args=(n, args.p, args.d, repeats, str(args.device),
                                 torch.get_num_threads(), queue))
        proc.start()
        row = queue.get()
        proc.join()
        rows[n] = rec.record(**row)
    first, last = rows[sizes[0]], rows[sizes[-1]]
    fields = {"p": args.p, "d": args.d, "sizes": sizes}
    for n, r in rows.items():
        tag = f"1e{round(math.log10(n))}" if math.log10(n).is_integer() else str(n)
        fields[f"lml_s_at_{tag}"] = r["lml_grad_Op_s"]
        fields[f"lml_p3_s_at_{tag}"] = r["lml_grad_Op3_s"]
        fields[f"stats_pass_s_at_{tag}"] = r["stats_pass_s"]
    ratio = last["lml_grad_Op_s"] / first["lml_grad_Op_s"]
    fields.update(peak_mem_gib=last["peak_mem_gib"], lml_ratio_last_first=ratio,
                  speedup_Op_vs_Op3=last["lml_grad_Op3_s"] / last["lml_grad_Op_s"])
    rec.summary(**fields)
    if args.p == 1000:
        rec.target("O(p) LML + gradient at p = 1000 (s, max over n)",
                   max(r["lml_grad_Op_s"] for r in rows.values()), 1e-3, "<=",
                   "median time of one −LML and its p̃ + 1 derivatives")
    else:
        rec.note(f"the 1 ms target is stated for p = 1000; this run used p = {args.p}")
    if sizes[0] == 10_000 and sizes[-1] == 1_000_000:
        rec.target("lml_s_at_1e6 / lml_s_at_1e4", ratio, 1.2, "<=",
                   "O(p) evaluation time independent of n")
        rec.target("peak_mem_gib of the n = 1e6 statistics pass", last["peak_mem_gib"], 4.0,
                   "<=", "child max RSS: interpreter, torch, the data and the pass")
    else:
        rec.note("the ratio and memory targets are stated for n = 10⁴ … 10⁶; this run "
                 f"used n = {sizes}")
    rec.note("each n runs in a fresh spawned process; peak memory is its max RSS "
             "(interpreter + torch + data + the chunked pass). The O(p³) path times "
             "nlml().backward() of FeatureGP(weights='diag') from cached statistics.")


def plot_scaling(fig, records: list[dict], row: dict) -> None:
    rows = sorted((r for r in records if r.get("kind") == "per n"), key=lambda r: r["n"])
    if not rows:
        return
    ax1, ax2 = fig.subplots(1, 2)
    ns = [r["n"] for r in rows]
    ax1.plot(ns, [r["lml_grad_Op_s"] for r in rows], "C0-o", label="O(p) (OrthogonalGrief)")
    ax1.plot(ns, [r["lml_grad_Op3_s"] for r in rows], "C1-s", label="O(p³) (FeatureGP diag)")
    ax1.axhline(1e-3, color="k", lw=0.6, ls=":", label="1 ms target")
    ax1.set_ylabel("−LML + gradient, median (s)")
    ax2.plot(ns, [r["stats_pass_s"] for r in rows], "C2-o", label="statistics pass (s)")
    ax2b = ax2.twinx()
    ax2b.plot(ns, [r["peak_mem_gib"] for r in rows], "C3--^", label="peak RSS (GiB)")
    ax2b.set_ylabel("peak RSS (GiB)")
    ax2.set_ylabel("statistics pass (s)")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
    ax1.legend(fontsize=8)
    ax2.legend(loc="upper left", fontsize=8)
    ax2b.legend(loc="lower right", fontsize=8)
