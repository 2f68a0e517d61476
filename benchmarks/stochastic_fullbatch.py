"""``gpscale bench stochastic-fullbatch``: the full-batch ML-II reference of Shoham &
Avron's deep-kernel model, run by L-BFGS to its tolerance or its time limit.

The model and start are those of ``gpscale bench stochastic`` (the same seed gives the
same initial network, random features and σ² = 0.1): K = ΦΦᵀ + σ²I with Φ the 2 x 128
ReLU network followed by the linear kernel or 1000 orthogonal RFF of the Gaussian one,
and the exact weight-space NLML (FeatureGP.nlml, one streaming pass) minimised over
the network, the kernel's lengthscale and magnitude and σ² by L-BFGS with fit_lbfgs's
own stopping tests (max |∇| ≤ ``--tol-grad``, step or change below ``--tol-change``).
Every ``--rmse-every`` evaluations that lower the best NLML, the test RMSE at that
point is recorded (kind ``trace``), so the report shows whether RMSE has settled while
the NLML still moves. The last row (kind ``fullbatch``) gives the best iterate's NLML,
RMSE, the gradient's 2-norm and max-norm there (NLML summed over the n rows, and per
point), the iterations, evaluations, the reason the search stopped and whether it
converged, beside the paper's SCGD / MINIMAX cells of Tables 2–5 for the set.
"""

from __future__ import annotations

import math
import time

import torch

from .harness import register
from .stochastic import (
    KERNELS,
    PAPER_NLML,
    PAPER_RMSE,
    make_features,
    paper_value,
    rmse_of,
    split_tensors,
)


def _arguments(p) -> None:
    p.add_argument("--datasets", nargs="+", default=None,
                   help="UCI sets (default kin40k; --quick: pumadyn32nm)")
    p.add_argument("--kernels", nargs="+", default=None, choices=list(KERNELS),
                   help="the model (default nn-rbf, the paper's Tables 3/5; --quick: "
                   "nn-linear)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds of L-BFGS per set and kernel; no iteration starts after "
                   "it (default 1080; quick 15)")
    p.add_argument("--max-iter", type=int, default=100000,
                   help="L-BFGS iterations at most (default 100000: the tolerance or the "
                   "time limit ends the search)")
    p.add_argument("--tol-grad", type=float, default=1e-5,
                   help="fit_lbfgs's tolerance on max |∇NLML| (the NLML summed over rows)")
    p.add_argument("--tol-change", type=float, default=1e-9,
                   help="fit_lbfgs's tolerance on a step's change of θ or of the NLML")
    p.add_argument("--rmse-every", type=int, default=20,
                   help="evaluations between test-RMSE checkpoints (default 20)")
    p.add_argument("--num-rff", type=int, default=1000,
                   help="RFF dimension of the nn-rbf kernel (default 1000, the paper)")
    p.add_argument("--rff-features", type=int, default=256,
                   help="RFF dimension of the rff kernel (default 256)")
    p.add_argument("--max-train", type=int, default=None,
                   help="use only the first N training rows (for smoke tests)")
    p.add_argument("--seed", type=int, default=0)


class _Traced:
    """The objective L-BFGS minimises, noting the test RMSE at every ``every``-th
    evaluation that improves on the best NLML so far."""

    def __init__(self, model, Xte, yte, y_scale: float, every: int, rec, tag: dict):
        self.model, self.Xte, self.yte, self.y_scale = model, Xte, yte, y_scale
        self.every, self.rec, self.tag = max(1, int(every)), rec, tag
        self.evals, self.last, self.best, self.t0 = 0, -math.inf, math.inf, time.perf_counter()

    def __call__(self) -> torch.Tensor:
        f = self.model.nlml()
        self.evals += 1
        value = float(f.detach())
        if value < self.best:
            self.best = value
            if self.evals - self.last >= self.every:
                self.last = self.evals
                with torch.no_grad():
                    rmse = rmse_of(self.model.predict(self.Xte)[0], self.yte)
                self.rec.record(kind="trace", **self.tag, evals=self.evals,
                                nlml=value / self.model.n, rmse_y=rmse * self.y_scale,
                                noise=float(self.model.noise.detach()),
                                time_s=time.perf_counter() - self.t0)
        return f


def _gradient(model) -> tuple[float, float]:
    """(2-norm, max-norm) of ∇NLML (summed over rows) over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    model.nlml().backward()
    flat = torch.cat([p.grad.reshape(-1) for p in params if p.grad is not None])
    for p in params:
        p.grad = None
    return float(flat.norm()), float(flat.abs().max())


def _papers_cells(kernel: str, name: str) -> dict[str, str | None]:
    """The paper's SCGD and MINIMAX cells for this set and kernel, batch 16/32/64."""
    out = {}
    for b in (16, 32, 64):
        for m in ("scgd", "minimax"):
            out[f"paper_{m}_nlml_b{b}"] = paper_value(PAPER_NLML, kernel, name, b, m)
            out[f"paper_{m}_rmse_b{b}"] = paper_value(PAPER_RMSE, kernel, name, b, m)
    return {k: v for k, v in out.items() if v is not None}


@register("stochastic-fullbatch",
          help="full-batch L-BFGS reference of the deep-kernel model, to its tolerance",
          add_arguments=_arguments, plot=lambda fig, recs, row: _plot(fig, recs))
def run(args, rec) -> None:
    from gpscale.deadline import Deadline
    from gpscale.models import FeatureGP
    from gpscale.train import fit_lbfgs

    quick = bool(args.quick)
    datasets = args.datasets or (["pumadyn32nm"] if quick else ["kin40k"])
    kernels = args.kernels or (["nn-linear"] if quick else ["nn-rbf"])
    limit = args.time_limit if args.time_limit is not None else (15.0 if quick else 1080.0)
    device = args.device
    first = True
    for name in datasets:
        X, y, Xte, yte, y_scale = split_tensors(name, args.max_train, device)
        for kernel in kernels:
            feats = make_features(kernel, X.shape[1], args, device)
            model = FeatureGP(feats, X, y, noise=0.1, weights="fixed", device=device)
            tag = {"dataset": name, "kernel": kernel}
            traced = _Traced(model, Xte, yte, y_scale, args.rmse_every, rec, tag)
            t0 = time.perf_counter()
            res = fit_lbfgs(model, objective=traced, max_iter=args.max_iter,
                            tol_grad=args.tol_grad, tol_change=args.tol_change,
                            method="fullbatch", warn=False, deadline=Deadline(limit))
            fit_s = time.perf_counter() - t0
            n = model.n
            with torch.no_grad():
                nlml = float(model.nlml()) / n
                rmse = rmse_of(model.predict(Xte)[0], yte)
                train_rmse = rmse_of(model.predict(X)[0], y)
            g2, gmax = _gradient(model)
            hist = res.history
            iters = hist[-1]["iter"] if hist else 0
            # how much the best NLML per point still fell over the last 10% of iterations
            tail = [h["objective"] for h in hist if h["iter"] >= 0.9 * iters]
            row = dict(kind="fullbatch", **tag, n=n, method="fullbatch (L-BFGS)",
                       nlml=nlml, nlml_y=nlml + math.log(y_scale), rmse=rmse,
                       rmse_y=rmse * y_scale, train_rmse_y=train_rmse * y_scale,
                       noise=float(model.noise.detach()),
                       grad_norm=g2, grad_max=gmax, grad_norm_per_point=g2 / n,
                       tol_grad=args.tol_grad, converged=res.converged, reason=res.reason,
                       iters=iters, evals=res.n_evals, time_s=fit_s, time_limit_s=limit,
                       last10pct_drop_per_point=((max(tail) - min(tail)) / n
                                                 if len(tail) > 1 else None),
                       **_papers_cells(kernel, name))
            rec.record(**row)
            rec.target(f"max |∇NLML| at the end, {name}, {kernel}", gmax, args.tol_grad,
                       what="L-BFGS's own gradient tolerance (NLML summed over the rows); "
                       f"reason it stopped: {res.reason}")
            summary = {k: row[k] for k in ("dataset", "kernel", "nlml", "nlml_y", "rmse_y",
                                           "grad_norm", "grad_max", "converged", "reason",
                                           "iters", "evals")}
            rec.summary(**(summary if first else {f"{name}_{kernel}_{k}": v
                                                  for k, v in summary.items()}))
            first = False
    rec.note("NLML per point of the standardised y (nlml) and of y in its own units "
             "(nlml_y = nlml + log sd(y), the paper's scale); RMSE in y's units on the 10% "
             "test fold of split 0. Gradients are of the NLML summed over the n training "
             "rows, as L-BFGS sees it (tol_grad applies to its max-norm). paper_*: "
             "Shoham & Avron's Tables 3/5 (mean ± std over 5 splits), copied, not measured.")


def _plot(fig, records) -> None:
    trace = [r for r in records if r.get("kind") == "trace"]
    ax1, ax2 = fig.add_subplot(121), fig.add_subplot(122)
    for key in sorted({(r["dataset"], r["kernel"]) for r in trace}):
        pts = [r for r in trace if (r["dataset"], r["kernel"]) == key]
        ax1.plot([r["time_s"] for r in pts], [r["nlml"] for r in pts], "o-", ms=3,
                 label=" ".join(key))
        ax2.plot([r["time_s"] for r in pts], [r["rmse_y"] for r in pts], "o-", ms=3,
                 label=" ".join(key))
    ax1.set_xlabel("seconds")
    ax1.set_ylabel("exact NLML per point")
    ax2.set_xlabel("seconds")
    ax2.set_ylabel("test RMSE (y's units)")
    for ax in (ax1, ax2):
        if trace:
            ax.legend(fontsize=7)
