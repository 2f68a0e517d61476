"""A small table with a known truth for the tests of missing numbers: y = x + a level's
effect + noise, with a share of x missing at random."""

from __future__ import annotations

import numpy as np
import pandas as pd


def gapped_table(rng: np.random.Generator, n: int, missing: float, levels: int,
                 spread: float, noise: float = 0.1) -> pd.DataFrame:
    """n rows of x ~ N(0, 1), a category c of ``levels`` levels whose effects lie evenly
    in [−spread, spread], y = x + effect + noise·N(0, 1); a share ``missing`` of x NaN."""
    x = rng.normal(size=n)
    level = rng.integers(0, levels, n)
    y = x + np.linspace(-spread, spread, levels)[level] + noise * rng.normal(size=n)
    df = pd.DataFrame({"x": x, "c": [f"l{i}" for i in level], "y": y})
    df.loc[rng.random(n) < missing, "x"] = np.nan
    return df
