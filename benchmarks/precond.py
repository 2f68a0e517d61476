"""``gpscale bench precond``: CG preconditioners for K + σ²I on real data (§4.1 of
Evans & Nair 2018 against pivoted Cholesky and plain CG).

For each data set the kernel is RBF-ARD with a signal variance, its θ from exact
ML-II on 1000 random training rows (the GRIEF initialisation,
:func:`gpscale.train.grief.init_exact`). For each n (the first n training rows), each
noise level (the fitted σ², and a small ``--small-noise`` as hold-out GPCV-ADMM
reaches on near-noiseless data, where C is badly conditioned) and each preconditioner
and rank, it solves C x = y by CG to a relative residual of ``--tol`` and records the
iterations, the set-up time of the preconditioner and the solve time (dense C,
so the time per iteration is the same for every preconditioner up to its O(n r)
application).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .harness import register

KINDS = ("none", "pivchol", "grief")


def _arguments(p) -> None:
    p.add_argument("--datasets", nargs="+", default=None,
                   help="UCI sets (default kin40k pumadyn32nm; --quick kin40k)")
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="training sizes (default 2000 4000 8000; --quick 1000 2000)")
    p.add_argument("--ranks", type=int, nargs="+", default=None,
                   help="preconditioner ranks r (p for GRIEF; default 100 500 1000; "
                   "--quick 100 500)")
    p.add_argument("--small-noise", type=float, default=1e-4,
                   help="the second, small σ² (default 1e-4)")
    p.add_argument("--tol", type=float, default=1e-6, help="CG relative residual (1e-6)")
    p.add_argument("--max-iter", type=int, default=3000, help="CG iteration cap (3000)")


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _theta(X: torch.Tensor, y: torch.Tensor) -> dict:
    from gpscale.train.grief import init_exact

    return init_exact(X, y, "rbf", num_points=1000, seed=0)


def plot(fig, records: list[dict], row: dict) -> None:
    rows = [r for r in records if r.get("kind") == "solve"]
    panels = sorted({(r["dataset"], r["noise"]) for r in rows})
    if not panels:
        return
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    for ax, (name, noise) in zip(axes, panels):
        sel = [r for r in rows if r["dataset"] == name and r["noise"] == noise]
        for kind, style in zip(KINDS, ("k--", "C1-s", "C0-o")):
            for r_ in sorted({r["rank"] for r in sel if r["preconditioner"] == kind}):
                pts = sorted((r["n"], r["iters"]) for r in sel
                             if r["preconditioner"] == kind and r["rank"] == r_)
                label = kind if kind == "none" else f"{kind} r={r_}"
                ax.plot(*zip(*pts), style, label=label, ms=4,
                        alpha=0.4 + 0.6 * (r_ == max(x["rank"] for x in sel)))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_title(f"{name}, σ² {noise}", fontsize=9)
    axes[0].set_ylabel("CG iterations")
    axes[-1].legend(fontsize=7)


@register("precond", help="CG iterations with no / pivoted-Cholesky / GRIEF "
          "preconditioners for K + σ²I on UCI data", add_arguments=_arguments, plot=plot)
def run(args, rec) -> None:
    from gpscale.data.loaders import load_uci
    from gpscale.kernels import RBF, Scale
    from gpscale.linalg import cg
    from gpscale.models.precond import kernel_preconditioner

    sets = args.datasets or (["kin40k"] if args.quick else ["kin40k", "pumadyn32nm"])
    sizes = args.n or ([1000, 2000] if args.quick else [2000, 4000, 8000])
    ranks = args.ranks or ([100, 500] if args.quick else [100, 500, 1000])
    dev = args.device
    summary: dict = {"n": max(sizes), "rank": max(ranks), "tol": args.tol}
    for name in sets:
        split = load_uci(name, 0)
        X_all = torch.as_tensor(np.asarray(split.X_train), dtype=torch.float64, device=dev)
        y_all = torch.as_tensor(np.asarray(split.y_train), dtype=torch.float64, device=dev)
        t = time.perf_counter()
        theta = _theta(X_all, y_all)
        rec.record(kind="theta", dataset=name, fit_s=time.perf_counter() - t,
                   lengthscale=theta["lengthscale"].tolist(),
                   outputscale=float(theta["outputscale"]), noise=float(theta["noise"]))
        kernel = Scale(RBF(theta["lengthscale"], ard_dims=X_all.shape[1]),
                       float(theta["outputscale"])).to(dev)
        for n in sizes:
            if n > X_all.shape[0]:
                rec.note(f"{name}: n={n} skipped, only {X_all.shape[0]} training rows")
                continue
            X, y = X_all[:n], y_all[:n]
            with torch.no_grad():
                K = kernel(X)
            for noise_label, s2 in (("fitted", float(theta["noise"])),
                                    ("small", args.small_noise)):
                noise = torch.tensor(s2, dtype=torch.float64, device=dev)
                C = K + s2 * torch.eye(n, dtype=torch.float64, device=dev)
                for kind in KINDS:
                    for r in ([0] if kind == "none" else ranks):
                        _sync(dev)
                        t = time.perf_counter()
                        P = kernel_preconditioner(kernel, X, noise, kind, r, K=K)
                        _sync(dev)
                        setup_s = time.perf_counter() - t
                        t = time.perf_counter()
                        _, info = cg(C.__matmul__, y, precond=P, tol=args.tol,
                                     max_iter=args.max_iter)
                        _sync(dev)
                        solve_s = time.perf_counter() - t
                        rec.record(kind="solve", dataset=name, n=n, noise=noise_label,
                                   sigma2=s2, preconditioner=kind, rank=r,
                                   iters=info.iterations, converged=info.converged,
                                   rel_residual=float(info.rel_residual.max()),
                                   setup_s=setup_s, solve_s=solve_s,
                                   total_s=setup_s + solve_s)
                        if n == max(sizes) and r in (0, max(ranks)):
                            summary[f"iters_{kind}_{name}_{noise_label}"] = info.iterations
    rec.summary(**summary)
    rec.note("θ (RBF-ARD lengthscales, signal variance, σ²) from exact ML-II on 1000 "
             "random training rows of fold 0 (standardised); CG on the dense C = K + σ²I; "
             f"converged = relative residual ≤ {args.tol} within {args.max_iter} iterations. "
             "GRIEF: m̄ = 10 grid points per column, p = rank eigenfunctions; pivchol: "
             "greedy pivoted Cholesky of rank r (rows read from the dense K).")
