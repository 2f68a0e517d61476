"""What a prediction does with what a row does not say: a number missing from a column
that had no missing values in training, a category level never seen in training.

The model has no input for such a row, so its prediction integrates over the inputs it
could have: p(y | x_obs) = ∫ p(y | x_obs, x_gap) p(x_gap | x_obs) dx_gap. The conditional
p(x_gap | x_obs) is taken from training rows: the gap cells of the ``k`` reference rows
nearest on the row's observed columns (a uniform sample of training rows kept with the
model, :data:`REFERENCE_ROWS`), so a gap is filled by values that occur with inputs like
the row's, and a new level by the levels that do. Each row's prediction is then the
mixture of the model's predictions at its ``k`` completions, summarised by its mean and
variance (the mean of the variances plus the variance of the means, the latter as the
spread of a new draw from that sample: :func:`mixture`): an unknown level's interval
carries the spread of the known levels' effects, and a missing number's the spread of
what it could have been.

:meth:`gpscale.io.encoding.TableEncoding.batch` marks the gaps as NaN;
:meth:`gpscale.predictor.Predictor.predict` fills and mixes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["REFERENCE_ROWS", "NEIGHBOURS", "completions", "mixture", "sample_spread_factor"]

#: training rows kept with a table model to draw a gap's values from
REFERENCE_ROWS = 1000
#: the completions of one row: reference rows nearest on its observed columns
NEIGHBOURS = 50


def completions(X: np.ndarray, reference: np.ndarray, k: int = NEIGHBOURS
                ) -> tuple[np.ndarray, np.ndarray]:
    """For the rows of ``X`` (n, d) with NaN cells (gaps): each row ``k`` times, its gaps
    filled from the ``k`` rows of ``reference`` (R, d, no NaN) nearest on the row's
    observed columns (mean squared difference; ties broken by reference order, which
    is random). Both in the same (scaled) units. Returns (the completed rows
    (n_gapped·k, d), the index in X of each)."""
    gaps = np.isnan(X)
    rows = np.flatnonzero(gaps.any(axis=1))
    k = min(int(k), len(reference))
    if len(rows) == 0 or k == 0:
        return np.empty((0, X.shape[1])), np.empty(0, dtype=np.int64)
    out = np.empty((len(rows), k, X.shape[1]))
    for start in range(0, len(rows), 256):  # bounds the (rows, R, d) differences
        block = rows[start:start + 256]
        Xb, seen = X[block], ~gaps[block]
        diff = np.where(seen[:, None, :], Xb[:, None, :] - reference[None, :, :], 0.0)
        dist = (diff ** 2).sum(axis=2) / np.maximum(seen.sum(axis=1), 1)[:, None]
        nearest = np.argsort(dist, axis=1, kind="stable")[:, :k]
        filled = np.repeat(Xb[:, None, :], k, axis=1)
        donors = reference[nearest]
        where = np.repeat(~seen[:, None, :], k, axis=1)
        filled[where] = donors[where]
        out[start:start + len(block)] = filled
    return out.reshape(-1, X.shape[1]), np.repeat(rows, k)


def mixture(mean: np.ndarray, var: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean and variance of equal mixtures of ``k`` consecutive components (means
    and variances of shape (m·k,)): E[var] + c(L) Var[mean] for each of the m.

    The spread of the means is a sample of L distinct values (L distinct predictions
    among the k, e.g. the levels known near a row with a new level): a new value drawn
    like them lies about x̄ with variance s²(1 + 1/L) for the unbiased s², and, s² being
    estimated, as a Student t with L − 1 degrees of freedom, whose variance is ν/(ν − 2)
    times its scale². So c(L) = (L + 1)/(L − 1) · ν/(ν − 2), ν = max(L − 1, 3) (the t's
    variance is infinite below 3); c = 1 when L = 1, as one value says nothing of the
    spread. With few known levels the interval widens as it must
    (benchmarks/results/tables/gaps/README.md, "Few known levels")."""
    mean, var = mean.reshape(-1, k), var.reshape(-1, k)
    centre = mean.mean(axis=1)
    spread = ((mean - centre[:, None]) ** 2).mean(axis=1)
    # equal inputs may predict a rounding apart in different batch positions: one value
    tied = 1e-9 * (1.0 + np.abs(mean).max(axis=1, keepdims=True))
    distinct = 1 + (np.diff(np.sort(mean, axis=1), axis=1) > tied).sum(axis=1)
    return centre, var.mean(axis=1) + spread * sample_spread_factor(distinct)


def sample_spread_factor(distinct: np.ndarray) -> np.ndarray:
    """c(L) of :func:`mixture` for L distinct values (1 where L = 1)."""
    L = np.asarray(distinct, dtype=np.float64)
    nu = np.maximum(L - 1.0, 3.0)
    return np.where(L > 1, (L + 1.0) / np.maximum(L - 1.0, 1.0) * nu / (nu - 2.0), 1.0)
