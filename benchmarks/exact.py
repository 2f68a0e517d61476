"""``gpscale bench exact``: exact ML-II (the "GPML" baseline) against GPyTorch and sklearn.

On a UCI set (default kin40k, fold 0, standardised on the training part; the first n
training rows; the first ``--test-n`` test rows), with the ARD-RBF kernel, signal
variance and Gaussian noise, all in float64:

1. NLML at the same θ from gpscale, GPyTorch (Cholesky forced; CG/Lanczos forced) and
   scikit-learn (``ConstantKernel * RBF + WhiteKernel``, ``alpha=0``);
2. time of one NLML + gradient evaluation for each (median after a warm-up);
3. an L-BFGS fit of gpscale's ExactGP (fitted NLML per point, test RMSE / NLPD in the
   original units of y, fit time); with ``--peers`` GPyTorch (Adam, its default solver)
   and scikit-learn (its default L-BFGS-B, no restart) fits too;
4. (1) and (2) again at gpscale's fitted θ (CG's cost depends on the conditioning).

``--quick``: n = 500 1000, 2 repeats, 20 fit iterations, peer fits (implied) at n <= 500
only, no timing at the fitted θ.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gpscale.kernels import RBF, Scale
from gpscale.models import ExactGP
from gpscale.train import fit_lbfgs

from .harness import register, time_calls
from .peers import GPyTorchExact, SklearnGPR, gpytorch_defaults, hyperparameters, sklearn_theta

#: the common starting point of every fit and the θ of the first timing
THETA0 = {"outputscale": 1.0, "lengthscale": 1.0, "noise": 0.1}
METHODS = ("gpscale", "gpytorch-cholesky", "gpytorch-cg", "sklearn")


def _arguments(p) -> None:
    p.add_argument("--n", type=int, nargs="+", default=None,
                   help="training sizes (default 1000 2000 4000; with --quick 500 1000)")
    p.add_argument("--peers", action="store_true",
                   help="also fit GPyTorch (Adam) and scikit-learn (L-BFGS-B)")
    p.add_argument("--dataset", default="kin40k", help="UCI set (default kin40k)")
    p.add_argument("--fold", type=int, default=0, help="fold 0..9 (default 0)")
    p.add_argument("--test-n", type=int, default=5000, help="test rows used (default 5000)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed repeats after one warm-up (default 5; --quick 2)")
    p.add_argument("--fit-iters", type=int, default=None,
                   help="L-BFGS / Adam iterations (default 100; --quick 20)")
    p.add_argument("--peer-fit-max-n", type=int, default=None,
                   help="fit the peers only up to this n (default: every n; --quick 500)")
    p.add_argument("--seed", type=int, default=0, help="seed of GPyTorch's random probes")


def _ours(X: torch.Tensor, y: torch.Tensor, hp: dict) -> ExactGP:
    d = X.shape[1]
    kernel = Scale(RBF(torch.as_tensor(np.broadcast_to(hp["lengthscale"], (d,)).copy()),
                       ard_dims=d), float(hp["outputscale"]))
    return ExactGP(kernel, X, y, noise=float(hp["noise"]), device=X.device)


def _metrics(split, mean, var) -> dict[str, float]:
    from gpscale.metrics import nlpd, rmse

    mean = mean.detach().cpu().numpy() if hasattr(mean, "detach") else np.asarray(mean)
    var = var.detach().cpu().numpy() if hasattr(var, "detach") else np.asarray(var)
    m, v = split.scaler.inverse_y(mean, var)
    y = split.scaler.inverse_y(split.y_test[: len(m)])
    return {"rmse": rmse(y, m), "nlpd": nlpd(y, m, v)}


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return abs(a - b) / abs(b)


class _Case:
    """One training size: the data on the device and the three implementations."""

    def __init__(self, split, n: int, test_n: int, device: torch.device, peers: bool):
        self.n = n
        self.Xn, self.yn = split.X_train[:n], split.y_train[:n]
        self.X = torch.as_tensor(self.Xn, dtype=torch.float64, device=device)
        self.y = torch.as_tensor(self.yn, dtype=torch.float64, device=device)
        self.Xs = torch.as_tensor(split.X_test[:test_n], dtype=torch.float64, device=device)
        self.model = _ours(self.X, self.y, THETA0)
        self.gp = self.sk = None
        if peers:
            self.gp = GPyTorchExact(self.X, self.y, **THETA0)
            self.sk = SklearnGPR(self.Xn, self.yn, **THETA0)

    def set_theta(self, hp: dict) -> None:
        for name, value in (("outputscale", hp["outputscale"]), ("noise", hp["noise"])):
            owner = self.model.kernel if name == "outputscale" else self.model
            setattr(owner, name, float(value))
        d = self.X.shape[1]
        self.model.kernel.base.lengthscale = torch.as_tensor(
            np.broadcast_to(hp["lengthscale"], (d,)).copy(), dtype=torch.float64)
        if self.gp is not None:
            self.gp.set_theta(**hp)

    def _step(self) -> None:
        self.model.zero_grad(set_to_none=True)
        self.model.nlml().backward()

    def nlml_check(self, hp: dict, rec, label: str) -> dict:
        with torch.no_grad():
            ours = float(self.model.nlml())
        row = {"kind": "nlml_check", "n": self.n, "theta": label, "nlml_gpscale": ours}
        if self.gp is not None:
            theta = sklearn_theta(hp["outputscale"], hp["lengthscale"], hp["noise"],
                                  self.X.shape[1])
            sk = float(self.sk.nlml(theta))
            chol = float(self.gp.nlml("cholesky", grad=False))
            cg = float(self.gp.nlml("cg", grad=False))
            row.update(nlml_sklearn=sk, nlml_gpytorch_cholesky=chol, nlml_gpytorch_cg=cg,
                       rel_err_vs_sklearn=_rel(ours, sk),
                       rel_err_gpytorch_cholesky=_rel(chol, ours),
                       rel_err_gpytorch_cg=_rel(cg, ours))
        return rec.record(**row)

    def timings(self, hp: dict, rec, label: str, repeats: int, with_sklearn: bool) -> dict:
        fns = {"gpscale": self._step}
        if self.gp is not None:
            fns["gpytorch-cholesky"] = lambda: self.gp.nlml("cholesky", grad=True)
            fns["gpytorch-cg"] = lambda: self.gp.nlml("cg", grad=True)
            if with_sklearn:
                theta = sklearn_theta(hp["outputscale"], hp["lengthscale"], hp["noise"],
                                      self.X.shape[1])
                fns["sklearn"] = lambda: self.sk.nlml(theta, grad=True)
        times = time_calls(fns, repeats=repeats, warmup=1, device=self.X.device)
        ours = times["gpscale"]
        for method, t in times.items():
            rec.record(kind="iteration", n=self.n, theta=label, method=method, **t.as_dict(),
                       gpscale_over_this=ours.median_s / t.median_s)
        return times


def _fit_ours(case: _Case, split, iters: int, rec) -> tuple[dict, dict]:
    case.set_theta(THETA0)
    res = fit_lbfgs(case.model, max_iter=iters)
    mean, var = case.model.predict(case.Xs, include_noise=True)
    hp = hyperparameters(case.model.kernel, case.model.noise)
    return rec.record(kind="fit", n=case.n, method="gpscale", optimizer=f"L-BFGS({iters})",
                      iters=len(res.history), n_evals=res.n_evals, fit_s=res.wall_s,
                      nlml=res.objective, nlml_per_point=res.objective / case.n,
                      **_metrics(split, mean, var), noise=hp["noise"],
                      outputscale=hp["outputscale"], stop=res.reason), hp


def _fit_peers(case: _Case, split, iters: int, rec) -> None:
    gp = GPyTorchExact(case.X, case.y, **THETA0)
    info = gp.fit_adam(iters=iters, lr=0.1, mode="default")
    hp = gp.theta()
    with torch.no_grad():  # the exact NLML at GPyTorch's θ, by gpscale
        nlml = float(_ours(case.X, case.y, hp).nlml())
    mean, var = gp.predict(case.Xs, mode="cholesky")
    rec.record(kind="fit", n=case.n, method="gpytorch", optimizer=info["optimizer"] +
               f" x{iters}, default solver", iters=iters, n_evals=iters, fit_s=info["fit_s"],
               nlml=nlml, nlml_per_point=nlml / case.n, **_metrics(split, mean, var),
               noise=hp["noise"], outputscale=hp["outputscale"], stop="max_iter")
    sk = SklearnGPR(case.Xn, case.yn, **THETA0)
    info = sk.fit(n_restarts_optimizer=0)
    hp = sk.fitted_theta()
    mean, var = sk.predict(case.Xs.cpu().numpy())
    rec.record(kind="fit", n=case.n, method="sklearn", optimizer="fmin_l_bfgs_b (default)",
               iters=None, n_evals=info["n_evals"], fit_s=info["fit_s"], nlml=info["nlml"],
               nlml_per_point=info["nlml"] / case.n, **_metrics(split, mean, var),
               noise=hp["noise"], outputscale=hp["outputscale"],
               stop=",".join(info["warnings"]) or "converged")


@register("exact", help="exact ML-II: gpscale ExactGP vs GPyTorch (Cholesky, CG) and "
          "scikit-learn on kin40k", add_arguments=_arguments, plot=lambda *a: _plot(*a))
def run(args, rec) -> None:
    from gpscale.data import load_uci

    ns = args.n or ([500, 1000] if args.quick else [1000, 2000, 4000])
    repeats = args.repeats or (2 if args.quick else 5)
    iters = args.fit_iters or (20 if args.quick else 100)
    peer_max = args.peer_fit_max_n or (500 if args.quick else max(ns))
    fit_peers = args.peers or args.quick
    if min(ns) < 2 or repeats < 1 or iters < 1:
        raise ValueError("--n values must be >= 2, --repeats and --fit-iters >= 1")
    split = load_uci(args.dataset, fold=args.fold, standardize=True)
    if max(ns) > len(split.X_train):
        raise ValueError(f"--n {max(ns)} exceeds the {len(split.X_train)} training rows")
    test_n = min(args.test_n, len(split.X_test))
    try:
        import gpytorch  # noqa: F401
        import sklearn  # noqa: F401
        peers = True
    except ImportError as err:
        peers = False
        rec.note(f"peers skipped: {err} (install the 'bench' extra)")
    rec.summary(dataset=args.dataset, fold=args.fold, test_n=test_n, fit_iters=iters,
                repeats=repeats, peer_fit_max_n=peer_max if fit_peers and peers else None)
    if peers:
        rec.note(f"GPyTorch defaults: {gpytorch_defaults()}; 'gpytorch-cholesky' raises "
                 "max_cholesky_size above n, 'gpytorch-cg' sets it to 0 (preconditioned CG "
                 "solves, stochastic Lanczos log-determinant; its NLML is an estimate).")
        rec.note("GPyTorch fit: Adam(lr=0.1) on -mll, default solver (Cholesky up to n=800, "
                 "CG/Lanczos above), noise floor 1e-6; its NLML is then evaluated exactly. "
                 "sklearn fit: ConstantKernel*RBF+WhiteKernel, alpha=0, default "
                 "fmin_l_bfgs_b, n_restarts_optimizer=0, default bounds (1e-5, 1e5).")
    rec.note(f"theta0 (start of every fit; first timing): {THETA0}. Data: {args.dataset} "
             f"fold {args.fold} standardised on its {len(split.X_train)} training rows; "
             f"first n of them; first {test_n} test rows; RMSE/NLPD in y's original units.")
    per_n: dict[int, dict] = {}
    with torch.random.fork_rng(devices=[rec.device] if rec.device.type == "cuda" else []):
        torch.manual_seed(args.seed)
        for n in ns:
            case = _Case(split, n, test_n, rec.device, peers)
            r: dict = {"check0": case.nlml_check(THETA0, rec, "init")}
            r["t0"] = case.timings(THETA0, rec, "init", repeats, with_sklearn=True)
            fit, hp = _fit_ours(case, split, iters, rec)
            r["fit"] = fit
            case.set_theta(hp)
            r["check1"] = case.nlml_check(hp, rec, "fitted")
            r["t1"] = ({} if args.quick else
                       case.timings(hp, rec, "fitted", repeats, with_sklearn=False))
            if peers and fit_peers and n <= peer_max:
                _fit_peers(case, split, iters, rec)
            per_n[n] = r
            del case
    _summarise(rec, max(ns), per_n[max(ns)])


def _summarise(rec, n: int, r: dict) -> None:
    t0, t1, fit = r["t0"], r["t1"], r["fit"]

    def med(t: dict, method: str) -> float | None:
        return t[method].median_s if method in t else None

    def ratio(t: dict, method: str, stat: str = "median_s") -> float | None:
        if method not in t or "gpscale" not in t:
            return None
        return getattr(t["gpscale"], stat) / getattr(t[method], stat)

    rec.summary(
        n=n, ours_iter_s=med(t0, "gpscale"),
        gpytorch_cholesky_iter_s=med(t0, "gpytorch-cholesky"),
        gpytorch_cg_iter_s=med(t0, "gpytorch-cg"), sklearn_iter_s=med(t0, "sklearn"),
        ours_over_gpytorch_cholesky=ratio(t0, "gpytorch-cholesky"),
        ours_over_gpytorch_cg=ratio(t0, "gpytorch-cg"), ours_over_sklearn=ratio(t0, "sklearn"),
        ours_over_gpytorch_cholesky_fastest=ratio(t0, "gpytorch-cholesky", "min_s"),
        ours_over_gpytorch_cg_fastest=ratio(t0, "gpytorch-cg", "min_s"),
        ours_over_gpytorch_cholesky_at_fitted=ratio(t1, "gpytorch-cholesky"),
        ours_over_gpytorch_cg_at_fitted=ratio(t1, "gpytorch-cg"),
        nlml_ours=fit["nlml"], nlml_ours_per_point=fit["nlml_per_point"],
        nlml_sklearn_at_same_theta_rel_err=r["check1"].get("rel_err_vs_sklearn"),
        nlml_sklearn_at_theta0_rel_err=r["check0"].get("rel_err_vs_sklearn"),
        rmse_ours=fit["rmse"], nlpd_ours=fit["nlpd"], fit_s_ours=fit["fit_s"])
    s = rec.summary_fields
    rec.target("ours_over_gpytorch_cholesky", s["ours_over_gpytorch_cholesky"], 0.2,
               what=f"time per NLML+gradient at theta0, n={n}")
    rec.target("ours_over_gpytorch_cg", s["ours_over_gpytorch_cg"], 1.0,
               what=f"time per NLML+gradient at theta0, n={n}")
    rel = [v for v in (s["nlml_sklearn_at_same_theta_rel_err"],
                       s["nlml_sklearn_at_theta0_rel_err"]) if v is not None]
    rec.target("nlml_sklearn_rel_err", max(rel) if rel else None, 1e-8,
               what=f"|NLML gpscale - sklearn| / |sklearn| at theta0 and fitted theta, n={n}")


def _plot(fig, records: list[dict], summary: dict) -> None:
    axes = fig.subplots(1, 3)
    it = [r for r in records if r.get("kind") == "iteration" and r["theta"] == "init"]
    for method, style in zip(METHODS, ("o-", "s--", "d-.", "^:")):
        pts = sorted((r["n"], r["median_s"]) for r in it if r["method"] == method)
        if pts:
            axes[0].plot(*zip(*pts), style, label=method)
    axes[0].set(xscale="log", yscale="log", xlabel="n", ylabel="s per NLML + gradient",
                title="one evaluation at theta0")
    fits = [r for r in records if r.get("kind") == "fit"]
    for method, style in (("gpscale", "o-"), ("gpytorch", "s--"), ("sklearn", "^:")):
        pts = sorted((r["n"], r["fit_s"], r["rmse"]) for r in fits if r["method"] == method)
        if pts:
            n, fs, rm = zip(*pts)
            axes[1].plot(n, fs, style, label=method)
            axes[2].plot(n, rm, style, label=method, markerfacecolor="none")
    axes[1].set(xscale="log", yscale="log", xlabel="n", ylabel="s", title="fit wall time")
    axes[2].set(xscale="log", xlabel="n", ylabel="test RMSE", title="test RMSE after fit")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
