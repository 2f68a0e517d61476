"""``gpscale bench kernel-choice``: does the criterion that chooses the kernel family
(:mod:`gpscale.methods.kernel_choice`) predict which family predicts test data best?

For every real regression set (the UCI sets' fold 0, and the 10k/30k KIN40K split), on
standardised training data:

1. the choice as the library makes it: each family of
   :data:`~gpscale.methods.kernel_choice.CANDIDATES` fitted by the exact GP on a
   1000-row sample, scored by held-out NLPD on up to 2000 other training rows (or
   leave-one-out NLPD where the sample is every row); the sample's NLML per row (the
   evidence) is recorded beside it as the other criterion;
2. the truth it should predict: each family fitted by the exact GP on up to
   ``--truth-rows`` training rows (every row of the smaller sets: then it is the exact
   method's own fit), test RMSE and NLPD on the test fold.

The regret of a criterion on a set is its family's test NLPD (and RMSE) minus the best
family's.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import torch

from .harness import register

SETS = ("challenger", "fertility", "concreteslump", "autos", "servo", "breastcancer",
        "machine", "autompg", "forest", "stock", "solar", "skillcraft", "pumadyn32nm",
        "elevators", "kin40k", "keggundirected", "kin40k-10k")


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=None, help=f"sets (default: {' '.join(SETS)})")
    p.add_argument("--truth-rows", type=int, default=2500,
                   help="training rows of each family's reference fit (default 2500)")
    p.add_argument("--seed", type=int, default=0)


def _load(name: str):
    from gpscale.data.sources import data_dir

    root = data_dir()
    if name == "kin40k-10k":
        z = np.load(root / "kin40k_snelson_10k30k.npz")
        return z["X_train"], z["y_train"].ravel(), z["X_test"], z["y_test"].ravel()
    path = root / "uci" / f"{name}.npz"
    if not path.exists():
        return None
    z = np.load(path)
    test = z["test_mask"][:, 0]
    X, y = z["X"], z["y"].ravel()
    return X[~test], y[~test], X[test], y[test]


def _standardise(Xtr, ytr, Xte, yte):
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    ym, ys = ytr.mean(), ytr.std()
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return t((Xtr - mu) / sd), t((ytr - ym) / ys), t((Xte - mu) / sd), t((yte - ym) / ys)


def _test_scores(model, X, y) -> tuple[float, float]:
    from gpscale.metrics import nlpd

    pred = model.predict(X, include_noise=True)
    r = (y - pred.mean).numpy()
    return (float(np.sqrt(np.mean(r * r))),
            nlpd(y.numpy(), pred.mean.numpy(), pred.var.numpy()))


@register("kernel-choice", help="the kernel-family criterion against each family's test "
          "accuracy on every real set", add_arguments=_arguments)
def run(args, rec) -> None:
    from gpscale.kernels import make_kernel
    from gpscale.methods.exact import fit_exact
    from gpscale.methods.kernel_choice import CANDIDATES, choose_kernel
    from gpscale.train.starts import sample_rows

    sets = args.sets or (SETS[:6] if args.quick else SETS)
    truth_rows = 300 if args.quick else args.truth_rows
    regrets: dict[str, list[float]] = {"held_out": [], "evidence": [], "rbf-ard": [],
                                       "matern52-ard": [], "matern32-ard": []}
    for name in sets:
        data = _load(name)
        if data is None:
            rec.note(f"{name}: not found, skipped")
            continue
        Xtr, ytr, Xte, yte = _standardise(*data)
        t0 = time.perf_counter()
        choice, fits = choose_kernel(Xtr, ytr, seed=args.seed,
                                     rows=200 if args.quick else 1000)
        choose_s = time.perf_counter() - t0
        evidence = {k: float(c.model.nlml().detach()) / c.model.observations
                    for k, c in fits.items()}
        keep = sample_rows(Xtr.shape[0], min(truth_rows, Xtr.shape[0]), args.seed + 1,
                           Xtr.device)
        truth = {}
        for family in CANDIDATES:
            t1 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    model, _ = fit_exact(Xtr[keep], ytr[keep], make_kernel(family, Xtr.shape[1]),
                                         solver="cholesky", seed=args.seed)
                    rmse, nl = _test_scores(model, Xte, yte)
                except (RuntimeError, ValueError):
                    rmse, nl = math.inf, math.inf
            truth[family] = {"rmse": rmse, "nlpd": nl, "fit_s": time.perf_counter() - t1}
            rec.record(kind="family", dataset=name, family=family, n_train=int(Xtr.shape[0]),
                       truth_rows=int(keep.numel()), d=int(Xtr.shape[1]),
                       choice_score=choice.scores.get(family), evidence=evidence.get(family),
                       test_rmse=rmse, test_nlpd=nl, fit_s=truth[family]["fit_s"])
        best = min(truth, key=lambda k: truth[k]["nlpd"])
        by_evidence = min(evidence, key=lambda k: evidence[k]) if evidence else best
        picks = {"held_out": choice.kernel, "evidence": by_evidence, "rbf-ard": "rbf-ard",
                 "matern52-ard": "matern52-ard", "matern32-ard": "matern32-ard"}
        for key, fam in picks.items():
            regrets[key].append(truth[fam]["nlpd"] - truth[best]["nlpd"])
        rec.record(kind="set", dataset=name, n_train=int(Xtr.shape[0]), d=int(Xtr.shape[1]),
                   criterion=choice.criterion, chosen=choice.kernel, by_evidence=by_evidence,
                   best_nlpd=best, best_rmse=min(truth, key=lambda k: truth[k]["rmse"]),
                   chosen_rmse=truth[choice.kernel]["rmse"],
                   rbf_rmse=truth["rbf-ard"]["rmse"], best_rmse_value=min(
                       v["rmse"] for v in truth.values()),
                   regret_nlpd_chosen=truth[choice.kernel]["nlpd"] - truth[best]["nlpd"],
                   regret_nlpd_evidence=truth[by_evidence]["nlpd"] - truth[best]["nlpd"],
                   regret_nlpd_rbf=truth["rbf-ard"]["nlpd"] - truth[best]["nlpd"],
                   choose_s=choose_s)
    summary = {f"mean_regret_nlpd_{k}": (float(np.mean(v)) if v else None)
               for k, v in regrets.items()}
    summary.update({f"max_regret_nlpd_{k}": (float(np.max(v)) if v else None)
                    for k, v in regrets.items()})
    rec.summary(sets=len(regrets["held_out"]), **summary)
    rec.note("Truth: each family fitted by the exact GP (Cholesky, ML-II, fit_exact's "
             f"defaults) on up to {truth_rows} training rows of fold 0, scored on the test "
             "fold in standardised y. Regret: the picked family's test NLPD minus the best "
             "family's on that set.")
