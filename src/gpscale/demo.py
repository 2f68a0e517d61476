"""``gpscale demo``: forecast Mauna Loa CO₂ with an exact GP and the "co2" kernel.

Rasmussen & Williams §5.4.3 on the weekly record that statsmodels ships: train on the
record before 1990, forecast 1990–2001 and score the forecast against every weekly
observation of those years. By default the model is trained on the *monthly means* of
the weekly training record (n ≈ 380 rather than ≈ 1600), which keeps the whole job
short; ``weekly=True`` trains on every week (each likelihood evaluation is an O(n³)
Cholesky, so the work grows steeply with the four-fold n).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from . import api
from .files import atomic_path
from .kernels import Periodic
from .params import positive_params

SPLIT_YEAR = 1990.0
PLOT_NAME = "co2_forecast.png"
#: what each term of the "co2" kernel models (R&W §5.4.3)
_COMPONENTS = {"kernel.kernels.0": "long-term trend",
               "kernel.kernels.1": "seasonal cycle",
               "kernel.kernels.2": "medium-term irregularities"}


@dataclass
class DemoResult:
    """What the demo measured (RMSE and NLPD on the test weeks, in ppm)."""

    predictor: api.Predictor
    n_train: int
    n_test: int
    rmse: float
    nlpd: float
    fit_s: float
    total_s: float
    plot: Path | None


def monthly_means(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average the observations of each calendar month (time in decimal years)."""
    month = np.floor(X[:, 0] * 12 + 1e-9).astype(np.int64)
    _, idx = np.unique(month, return_inverse=True)
    counts = np.bincount(idx)
    return (np.bincount(idx, X[:, 0]) / counts)[:, None], np.bincount(idx, y) / counts


def hyperparameters_in_data_units(pred: api.Predictor) -> str:
    """The learned values in years and ppm (1-D time input, standardised scaler)."""
    x_scale, y_scale = float(pred.scaler.x_scale[0]), float(pred.scaler.y_scale)
    rows = [("component", "hyperparameter", "value")]
    for name, sub, desc in positive_params(pred.model):
        value = getattr(sub, desc.name).detach().cpu().reshape(-1)[0].item()
        prefix = ".".join(name.split(".")[:3])
        part = _COMPONENTS.get(prefix, "noise" if name == "noise" else prefix)
        if desc.name in ("outputscale", "noise"):
            shown = f"std {np.sqrt(value) * y_scale:.3g} ppm"
        elif desc.name == "period" or (desc.name == "lengthscale"
                                        and not isinstance(sub, Periodic)):
            shown = f"{value * x_scale:.4g} years"
        else:
            shown = f"{value:.4g} (no unit)"
        rows.append((part, name.rsplit(".", 1)[-1], shown))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run(
    out: str | Path = "gpscale-output",
    plot: bool = True,
    max_iter: int = 200,
    weekly: bool = False,
    progress: bool = True,
    stream: TextIO | None = None,
) -> DemoResult:
    """Fit, forecast, print the hyperparameters and scores, and save the plot."""
    from .data import co2_weekly
    from .metrics import nlpd, rmse

    stream = stream if stream is not None else sys.stdout
    t0 = time.perf_counter()
    X, y = co2_weekly()
    train, test = X[:, 0] < SPLIT_YEAR, X[:, 0] >= SPLIT_YEAR
    X_train, y_train = X[train], y[train]
    if not weekly:
        X_train, y_train = monthly_means(X_train, y_train)
    print(f"Mauna Loa CO2 (statsmodels weekly record, {X[0, 0]:.1f}-{X[-1, 0]:.1f}): "
          f"training on {len(y_train)} {'weekly' if weekly else 'monthly mean'} values "
          f"before {SPLIT_YEAR:.0f}, forecasting {int(test.sum())} weeks "
          f"{SPLIT_YEAR:.0f}-{int(X[-1, 0])}", file=stream, flush=True)
    pred = api.fit(X_train, y_train, method="exact", kernel="co2", max_iter=max_iter,
                   progress=progress)
    fit_s = time.perf_counter() - t0
    mean, std = pred.predict(X[test], return_std=True)
    score_rmse, score_nlpd = rmse(y[test], mean), nlpd(y[test], mean, std**2)
    print(pred.summary(), file=stream)
    print("\nthe same in the data's units (time in years, CO2 in ppm):", file=stream)
    print(hyperparameters_in_data_units(pred), file=stream)
    print(f"\nforecast {SPLIT_YEAR:.0f}-{int(X[-1, 0])} ({int(test.sum())} weeks): "
          f"RMSE {score_rmse:.3f} ppm, NLPD {score_nlpd:.3f} (nats per point, ppm scale)",
          file=stream)
    path = None
    if plot and importlib.util.find_spec("matplotlib") is None:
        print("no forecast plot: matplotlib is not installed (pip install 'gpscale[plot]')",
              file=stream)
    elif plot:
        path = _plot(pred, X, y, train, test, X_train, y_train, score_rmse, score_nlpd,
                     Path(out))
        print(f"forecast plot saved to {path}", file=stream)
    total = time.perf_counter() - t0
    print(f"done in {total:.1f} s", file=stream)
    return DemoResult(pred, len(y_train), int(test.sum()), score_rmse, score_nlpd, fit_s,
                      total, path)


def _plot(pred, X, y, train, test, X_train, y_train, score_rmse, score_nlpd, out: Path):
    from matplotlib.figure import Figure  # no pyplot: the global backend stays untouched
    from matplotlib.ticker import MaxNLocator

    grid = np.linspace(X[0, 0], X[-1, 0] + 0.5, 1500)[:, None]
    mean, std = pred.predict(grid, return_std=True)
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    for ax, lo in zip(axes, (X[0, 0] - 1, SPLIT_YEAR - 3)):
        keep = grid[:, 0] >= lo
        g, m, s = grid[keep, 0], mean[keep], std[keep]
        ax.fill_between(g, m - 2 * s, m + 2 * s, color="tab:blue", alpha=0.25,
                        lw=0, label="±2σ (predictive)")
        ax.plot(g, m, color="tab:blue", lw=1, label="GP mean")
        k = X_train[:, 0] >= lo
        ax.plot(X_train[k, 0], y_train[k], ".", color="black", ms=2, label="training")
        ax.plot(X[test, 0], y[test], ".", color="tab:red", ms=2, label="test (weekly)")
        ax.axvline(SPLIT_YEAR, color="gray", ls="--", lw=0.8)
        ax.set_xlabel("year")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(lo, X[-1, 0] + 0.5)
    axes[0].set_ylabel("CO₂ (ppm)")
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].set_title("forecast", fontsize=10)
    fig.suptitle(f"Mauna Loa CO₂, exact GP with the co2 kernel: forecast from "
                 f"{SPLIT_YEAR:.0f}, RMSE {score_rmse:.2f} ppm, NLPD {score_nlpd:.2f}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / PLOT_NAME
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return path
