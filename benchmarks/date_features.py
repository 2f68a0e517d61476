"""``gpscale bench date-features``: does a date column's yearly sin/cos pair
(``date_features="yearly"``, :mod:`gpscale.io.dates`) help over its day count alone?

Two real sets with an ISO date column built as a user would have it:

* ``co2``: the Mauna Loa monthly CO₂ record, ``date`` = "YYYY-MM-15", the only input;
  trained on 1958–2008, tested on 2009–2015 (the GPCV-ADMM paper's split);
  ``co2-interp``: its 1958–2015 months split 80/20 at random (seeded);
* ``txhousing``: ``date`` = "YYYY-MM-01" from ``year`` / ``month`` beside the table's
  other columns (``year`` and ``month`` stay), in place of its decimal-year ``date``;
  a seeded subsample of ``--rows`` rows, split 80/20 at random. ``txhousing-dateonly``:
  the same with ``year`` and ``month`` left out (the date the only time).

Each is fitted by ``gpscale.fit(frame, target=..., method="exact")`` with the kernel
chosen from the data, once per ``date_features`` value, and predicted from the raw test
frame. Per fit: test RMSE, NLPD and 95 % coverage (RMSE and NLPD in units of the
training y's std), the chosen kernel, the fit's wall time.
"""

from __future__ import annotations

import time

import numpy as np

from .harness import register

FEATURES = ("days", "yearly")
SETS = ("co2", "co2-interp", "txhousing", "txhousing-dateonly")
#: a 95 % interval: mean ± Z95 · std
Z95 = 1.959963984540054


def _arguments(p) -> None:
    p.add_argument("--sets", nargs="+", default=None, help=f"from {SETS} (default: both)")
    p.add_argument("--rows", type=int, default=None,
                   help="txhousing rows before the split (default 2000; quick 300)")
    p.add_argument("--seeds", type=int, default=None, help="txhousing seeds (default 2)")
    p.add_argument("--max-iter", type=int, default=None,
                   help="optimiser iterations (default: the method's; quick 10)")


def co2_frames(seed: int | None = None):
    """(train, test) frames of the Mauna Loa record with an ISO ``date`` column: the
    forecast split, or with ``seed`` a random 80/20 split of 1958–2015."""
    import pandas as pd

    from gpscale.data.sources import data_dir

    d = np.load(data_dir() / "mauna_loa_co2_monthly_noaa.npz")
    df = pd.DataFrame({"date": [f"{y:04d}-{m:02d}-15" for y, m in zip(d["year"], d["month"])],
                       "co2": d["y"]})
    year = d["year"]
    if seed is None:
        return df[(year >= 1958) & (year <= 2008)], df[(year >= 2009) & (year <= 2015)]
    return _split(df[year <= 2015], seed)


def _split(df, seed: int):
    order = np.random.default_rng(seed).permutation(len(df))
    cut = int(round(0.8 * len(df)))
    return df.iloc[np.sort(order[:cut])], df.iloc[np.sort(order[cut:])]


def txhousing_frames(seed: int, rows: int, date_only: bool = False):
    """(train, test): a seeded subsample of ``rows`` rows of txhousing, 80/20 (with
    ``date_only``, ``year`` and ``month`` left out)."""
    import pandas as pd

    from gpscale.data.sources import data_dir

    df = pd.read_csv(data_dir() / "tables" / "txhousing.csv")
    # the ISO date replaces the table's decimal-year ``date``
    df["date"] = [f"{y:04d}-{m:02d}-01" for y, m in zip(df["year"], df["month"])]
    rng = np.random.default_rng(seed)
    df = df.iloc[np.sort(rng.permutation(len(df))[:rows])]
    return _split(df.drop(columns=["year", "month"] if date_only else []), seed)


def scores(y, mean, std, y_std: float) -> dict:
    """Test RMSE and NLPD in units of ``y_std`` and the 95 % interval's coverage."""
    r, s = (y - mean) / y_std, np.maximum(std, 1e-300) / y_std
    return {"rmse_std": float(np.sqrt(np.mean(r * r))),
            "nlpd": float(np.mean(0.5 * np.log(2 * np.pi * s * s) + 0.5 * (r / s) ** 2)),
            "coverage95": float(np.mean(np.abs(r / s) <= Z95))}


def _fit(train, test, target, features, options) -> dict:
    import gpscale

    t0 = time.perf_counter()
    p = gpscale.fit(train, target=target, method="exact", date_features=features, **options)
    fit_s = time.perf_counter() - t0
    mean, std = p.predict(test.drop(columns=[target]), return_std=True)
    y = train[target].to_numpy()
    return {"fit_s": fit_s, "kernel": p.kernel_name, "d": p.n_features,
            **scores(test[target].to_numpy(), mean, std, float(y.std()))}


@register("date-features", help="a date column's day count alone vs with a yearly sin/cos "
          "pair (Mauna Loa CO2, txhousing), exact GP, kernel chosen from the data",
          add_arguments=_arguments)
def run(args, rec) -> None:
    sets = args.sets or list(SETS)
    if sorted(set(sets) - set(SETS)):
        raise ValueError(f"unknown sets {sorted(set(sets) - set(SETS))}; choose from {SETS}")
    rows = args.rows or (300 if args.quick else 2000)
    seeds = args.seeds or (1 if args.quick else 2)
    iters = args.max_iter or (10 if args.quick else None)
    options = {"seed": 0, **({"max_iter": iters} if iters else {})}
    rec.summary(sets=sets, rows=rows, seeds=seeds, max_iter=iters)
    rec.note("RMSE and NLPD in units of the training y's std; fit_s is gpscale.fit's wall "
             "time (the kernel choice included).")
    done = {}
    for name in sets:
        splits = ([co2_frames()] if name == "co2" else
                  [co2_frames(s) for s in range(seeds)] if name == "co2-interp" else
                  [txhousing_frames(s, rows, name.endswith("dateonly")) for s in range(seeds)])
        target = "co2" if name.startswith("co2") else "median"
        for seed, (train, test) in enumerate(splits):
            for feat in FEATURES:
                out = _fit(train, test, target, feat, options)
                done[(name, seed, feat)] = rec.record(kind="fit", set=name, seed=seed,
                                                      date_features=feat, n=len(train),
                                                      n_test=len(test), **out)
        for key in ("rmse_std", "nlpd", "coverage95"):
            for feat in FEATURES:
                vals = [r[key] for (s, _, f), r in done.items() if s == name and f == feat]
                rec.summary(**{f"{name}_{feat}_{key}": float(np.mean(vals))})
