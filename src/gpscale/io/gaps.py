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

**Gaps training had, widened by leave-one-out.** A row whose number training also
lacked is predicted as fitted: at the column's mean with its indicator set, its
variance the exact GP's gap term (:class:`gpscale.kernels.GapVariance`). On a real
table that variance can be learned too small (the indicator gives such rows a region
of f of their own). The training rows with gap c say by how much: α_c, the mean of
their squared standardised leave-one-out residuals r_i² / s_i² (s_i² the leave-one-out
predictive variance of y, R&W eq. 5.12), is about 1 where the model is right
(:func:`loo_scales`). After an exact fit by Cholesky the predictor keeps α (its
``gap_loo``) and multiplies the predictive variance of y of a new row with gap c by
max(1, α_c) (only widening; a row with several gaps by the largest; a column with
fewer than :data:`LOO_MIN_ROWS` training rows with the gap: not at all): the variance
of f gains (α_c − 1) times that of y (:func:`widening`). Other fits (the CG path,
other methods) keep no α and widen nothing. Measured: benchmarks/results/tables/gaps/loo/.

**Where a gap training had sits.** The encoding puts such a cell at the column's mean;
the fits that model the gap's variance (the exact GP by Cholesky; also with a kernel
the user built, which has no gap term) then move it to E[x_c | the row's other
columns], the mean of column c over the :data:`FILL_NEIGHBOURS` training rows with that
value nearest on the columns the row has
(:func:`fill_gaps`; those rows, :func:`donor_rows`, are kept with the model so that a
new row is placed as training rows were). f at that point is f averaged over what x_c
could be, to first order, and the gap's variance term carries the rest. At the mean,
a row is compared with rows of another kind (txhousing: a small town's missing sales
volume placed at the state's mean), which cost the fit more than the rows gave: on
txhousing the complete rows' own errors grew by a third
(benchmarks/results/tables/gaps/conditional/README.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["REFERENCE_ROWS", "NEIGHBOURS", "LOO_MIN_ROWS", "FILL_NEIGHBOURS", "DONOR_ROWS",
           "completions", "mixture", "sample_spread_factor", "loo_scales", "factors",
           "widening", "widening_lines", "donor_rows", "fill_gaps"]

#: training rows kept with a table model to draw a gap's values from
REFERENCE_ROWS = 1000
#: the completions of one row: reference rows nearest on its observed columns
NEIGHBOURS = 50
#: a gap column's α is used only where at least this many training rows have the gap
#: (its sampling error on fewer rows is as large as the widening it would bring)
LOO_MIN_ROWS = 20
#: a gap training had: placed at the mean of this many rows with the value, nearest on
#: the row's other columns
#: (benchmarks/results/tables/gaps/conditional/README.md)
FILL_NEIGHBOURS = 5
#: the training rows kept with a model to place gaps by (a seeded sample beyond this)
DONOR_ROWS = 5000


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


def loo_scales(z2: np.ndarray, X: np.ndarray, columns: list[int] | tuple[int, ...]
               ) -> np.ndarray:
    """α per gap column (module docstring) from the squared standardised leave-one-out
    residuals ``z2`` (n,) of the training rows ``X`` (n, d), whose 0/1 columns
    ``columns`` mark a gap: a (2, d) array, row 0 the mean of ``z2`` over the rows with
    each column's gap (1 for the other columns and for a gap no row has), row 1 how
    many rows that is (0 for the other columns)."""
    z2, X = np.asarray(z2, np.float64).reshape(-1), np.asarray(X, np.float64)
    out = np.zeros((2, X.shape[1]))
    out[0] = 1.0
    for c in columns:
        rows = X[:, c] != 0
        out[1, c] = rows.sum()
        if rows.any():
            out[0, c] = z2[rows].mean()
    return out


def factors(scales: np.ndarray) -> np.ndarray:
    """Each column's variance factor from :func:`loo_scales`' (2, d): max(1, α_c) where
    at least :data:`LOO_MIN_ROWS` rows had the gap, else 1."""
    alpha, rows = scales
    return np.where(rows >= LOO_MIN_ROWS, np.maximum(alpha, 1.0), 1.0)


def widening(X: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The factor on the predictive variance of y of each row of ``X`` (encoded, (n, d)):
    the largest of its gap columns' :func:`factors` (1 for a row without such a gap)."""
    per_column = factors(scales)
    wide = np.flatnonzero(per_column > 1.0)
    out = np.ones(len(X))
    if len(wide):
        marked = np.nan_to_num(np.asarray(X, np.float64)[:, wide], nan=0.0) == 1.0
        out = np.where(marked, per_column[wide], 1.0).max(axis=1, initial=1.0)
    return out


def widening_lines(scales: np.ndarray, names: list[str]) -> list[str]:
    """The summary's account of α, one line per gap column: what it is and what it does."""
    out = []
    for c in np.flatnonzero(scales[1] > 0):
        alpha, rows, factor = scales[0, c], int(scales[1, c]), factors(scales)[c]
        does = (f"new rows with the gap: variance x{factor:.4g}" if factor > 1 else
                f"fewer than {LOO_MIN_ROWS} rows, not used" if rows < LOO_MIN_ROWS else
                "at most 1, nothing widened")
        out.append(f"{names[c]!r}: leave-one-out alpha {alpha:.4g} on the {rows} training "
                   f"rows with the gap; {does}")
    return out


def donor_rows(X: np.ndarray, limit: int = DONOR_ROWS, seed: int = 0) -> np.ndarray:
    """The training rows ``X`` (n, d) that place gaps (:func:`fill_gaps`): all of them,
    or a seeded uniform sample of ``limit`` in their order when there are more."""
    X = np.asarray(X, np.float64)
    if len(X) <= limit:
        return X.copy()
    return X[np.sort(np.random.default_rng(seed).choice(len(X), limit, replace=False))]


def _known(X: np.ndarray, blocks: list[tuple[list[int], int]]) -> np.ndarray:
    """Which cells of ``X`` hold a value the row has: not NaN, not an indicator column,
    not a value column whose indicator is 1 in that row."""
    known = ~np.isnan(X)
    for values, g in blocks:
        known[:, g] = False
        known[np.ix_(np.nan_to_num(X[:, g], nan=0.0) == 1.0, values)] = False
    return known


def fill_gaps(X: np.ndarray, blocks: list[tuple[list[int], int]], donors: np.ndarray,
              k: int = FILL_NEIGHBOURS) -> np.ndarray:
    """``X`` (n, d; NaN cells allowed) with each gap training had placed by its row's
    other columns. ``blocks``: (value columns, 0/1 indicator column) of each table
    column with such gaps (:meth:`gpscale.io.encoding.TableEncoding.gap_blocks`). In a
    row whose indicator is 1, the block's value columns become their mean over the
    ``k`` rows of ``donors`` (training rows, same units) nearest to it among those that
    have the block's value: the mean squared difference over the columns both rows
    have (:func:`_known`); ties go to the earlier donor. Other rows are returned as they
    are, and a block no donor has stays where it was."""
    X = np.array(X, dtype=np.float64)
    if not blocks:
        return X
    marked = np.stack([np.nan_to_num(X[:, g], nan=0.0) == 1.0 for _, g in blocks], axis=1)
    rows = np.flatnonzero(marked.any(axis=1))
    D = np.asarray(donors, np.float64)
    if len(rows) == 0 or len(D) == 0:
        return X
    b = _known(D, blocks).astype(np.float64)
    Db = np.where(b > 0, D, 0.0)
    has = np.stack([D[:, g] == 0.0 for _, g in blocks], axis=1)  # donors with the value
    step = max(1, 2 ** 22 // len(D))  # bounds the (rows, donors) distances
    for start in range(0, len(rows), step):
        part = rows[start:start + step]
        a = _known(X[part], blocks).astype(np.float64)
        Xa = np.where(a > 0, X[part], 0.0)
        # Σ_l a_l b_l (x_l − r_l)² over the columns both rows have, as three products
        shared = a @ b.T
        dist = (Xa ** 2 @ b.T - 2.0 * Xa @ Db.T + a @ (Db ** 2).T) / np.maximum(shared, 1.0)
        dist[shared == 0] = np.inf
        for j, (values, _) in enumerate(blocks):
            hit = marked[part, j]
            if not hit.any() or not has[:, j].any():
                continue
            pool = np.flatnonzero(has[:, j])
            near = np.argsort(dist[np.ix_(hit, pool)], axis=1, kind="stable")[:, :k]
            X[np.ix_(part[hit], values)] = D[pool[near]][:, :, values].mean(axis=1)
    return X
