"""Standardisation of inputs and targets, saved with a model and undone on prediction.

The statistics are computed in one pass over row chunks (:class:`Moments`, merged with
the pairwise updates of Chan, Golub & LeVeque 1979 and, for the third and fourth central
moments, Pébay 2008), so the same code serves an in-memory
array, a file streamed chunk by chunk, and partial results returned by dask workers.
Every column is held as (power-of-two exponent, scaled values in [-1, 1]); multiplying
by a power of two is exact, so any finite column, from 1e-308 to 1e308, gives finite
means and scales without losing precision. Each column's minimum and maximum are kept
too: a column is constant exactly when they are equal, whatever roundoff the mean of its
n values carries. The same pass hashes every row (:class:`gpscale.quality.RowDigest`), so
that the scaler carries a small data-quality report (:class:`gpscale.quality.DataQuality`:
constant and near-constant columns, duplicated rows, a heavy-tailed target, the training
ranges).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .quality import DataQuality, RowDigest

__all__ = ["Moments", "Standardizer", "chunk_moments"]

#: a column whose values (or whose std) lie within this many ulps of its largest magnitude
#: of each other is constant
CONSTANT_ULPS = 16.0
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Moments:
    """Count, mean, sums of squared, cubed and fourth-power deviations, minimum and
    maximum of k columns, each stored scaled by ``2**-exp`` (so the scaled values lie in
    [-1, 1]).

    ``Moments.of(A)`` summarises an (m, k) block; ``a.merge(b)`` combines two summaries
    of disjoint rows (Chan et al. 1979, eq. 2.1; Pébay 2008, eqs. 3.1 and 3.4 at
    p = 3, 4); the result does not depend on how the rows were split, up to rounding.
    """

    n: int
    exp: np.ndarray   # (k,) int: column j's values were multiplied by 2**-exp[j]
    mean: np.ndarray  # (k,) scaled mean
    m2: np.ndarray    # (k,) scaled sum of squared deviations from the mean
    m3: np.ndarray    # (k,) scaled sum of cubed deviations (scaled by 2**-3exp)
    m4: np.ndarray    # (k,) scaled sum of fourth powers of the deviations (2**-4exp)
    lo: np.ndarray    # (k,) scaled minimum
    hi: np.ndarray    # (k,) scaled maximum; max(|lo|, |hi|) in [0.5, 1) (0 for all zeros)
    #: hashes of the rows these moments summarise (inputs and target), when the pass
    #: took them (:func:`chunk_moments` does); merged along
    digest: RowDigest | None = field(default=None, compare=False, repr=False)

    @classmethod
    def empty(cls, k: int) -> Moments:
        z = np.zeros(k)
        return cls(0, np.zeros(k, dtype=np.int64), *(z.copy() for _ in range(6)))

    @classmethod
    def of(cls, A: np.ndarray) -> Moments:
        """Moments of the rows of ``A`` (m, k) (a 1-D array is one column); ValueError
        if a value is NaN or infinite."""
        A = np.asarray(A, dtype=np.float64)
        if A.ndim == 1:
            A = A[:, None]
        m, k = A.shape
        if m == 0:
            return cls.empty(k)
        lo, hi = A.min(axis=0), A.max(axis=0)
        amax = np.maximum(-lo, hi)
        if not np.isfinite(amax).all():
            bad = int(np.flatnonzero(~np.isfinite(amax))[0])
            row = int(np.flatnonzero(~np.isfinite(A[:, bad]))[0])
            raise ValueError(f"NaN or inf in column {bad} (row index {row}); drop or impute "
                             "those rows before standardising")
        exp = np.frexp(amax)[1].astype(np.int64)
        S = np.ldexp(A, -exp)  # exact: a power-of-two scaling
        mean = S.mean(axis=0)
        S -= mean
        # the corrected two-pass mean (Chan, Golub & LeVeque 1983): numpy sums a column of
        # a row-major block one row after another, so the first mean can be off by about
        # n ulps; the mean of the deviations removes that error
        correction = S.mean(axis=0)
        S -= correction
        sq = np.square(S)
        S *= sq
        return cls(m, exp, mean + correction, sq.sum(axis=0), S.sum(axis=0),
                   np.square(sq, out=sq).sum(axis=0), np.ldexp(lo, -exp), np.ldexp(hi, -exp))

    def _rescaled(self, exp: np.ndarray) -> tuple[np.ndarray, ...]:
        shift = self.exp - exp  # <= 0: values only get smaller, never overflow
        return (np.ldexp(self.mean, shift), np.ldexp(self.m2, 2 * shift),
                np.ldexp(self.m3, 3 * shift), np.ldexp(self.m4, 4 * shift),
                np.ldexp(self.lo, shift), np.ldexp(self.hi, shift))

    def merge(self, other: Moments) -> Moments:
        """Moments of the union of the two sets of rows."""
        if self.mean.shape != other.mean.shape:
            raise ValueError(f"cannot merge moments of {self.mean.shape[0]} and "
                             f"{other.mean.shape[0]} columns")
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        exp = np.maximum(self.exp, other.exp)
        ma, qa, ca, fa, la, ha = self._rescaled(exp)
        mb, qb, cb, fb, lb, hb = other._rescaled(exp)
        na, nb = float(self.n), float(other.n)
        n = na + nb
        a, b = na / n, nb / n  # shares of the rows (a + b = 1)
        delta = mb - ma
        d2 = delta * delta
        mean = ma + delta * b
        m2 = qa + qb + d2 * (na * b)
        # Pébay 2008, eq. 3.1 (p = 3, 4) with na nb / n = na b and na / n = a
        m3 = (ca + cb + d2 * delta * (na * b * (a - b))
              + 3.0 * delta * (a * qb - b * qa))
        m4 = (fa + fb + d2 * d2 * (na * b * (a * a - a * b + b * b))
              + 6.0 * d2 * (a * a * qb + b * b * qa) + 4.0 * delta * (a * cb - b * ca))
        both = self.digest is not None and other.digest is not None
        return Moments(self.n + other.n, exp, mean, m2, m3, m4, np.minimum(la, lb),
                       np.maximum(ha, hb), self.digest.merge(other.digest) if both else None)

    @classmethod
    def combine(cls, parts: Iterable[Moments], k: int | None = None) -> Moments:
        """Merge any number of summaries (``k`` columns when ``parts`` may be empty)."""
        out = None if k is None else cls.empty(k)
        for p in parts:
            out = p if out is None else out.merge(p)
        if out is None:
            raise ValueError("no moments to combine")
        return out

    @property
    def means(self) -> np.ndarray:
        return np.ldexp(self.mean, self.exp)

    @property
    def stds(self) -> np.ndarray:
        """Population standard deviations (ddof = 0)."""
        return np.ldexp(np.sqrt(self.m2 / max(self.n, 1)), self.exp)

    @property
    def skewness(self) -> np.ndarray:
        """Sample skewness g₁ = m₃ / m₂^{3/2} per column (population moments m_p =
        M_p / n; NaN where a column has no spread)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(float(self.n)) * self.m3 / self.m2 ** 1.5

    @property
    def excess_kurtosis(self) -> np.ndarray:
        """Sample excess kurtosis g₂ = m₄ / m₂² − 3 per column (0 for a Gaussian; NaN
        where a column has no spread). The power-of-two scaling cancels in both ratios."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return float(self.n) * self.m4 / (self.m2 * self.m2) - 3.0

    @property
    def mins(self) -> np.ndarray:
        return np.ldexp(self.lo, self.exp)

    @property
    def maxs(self) -> np.ndarray:
        return np.ldexp(self.hi, self.exp)

    @property
    def absmax(self) -> np.ndarray:
        return np.ldexp(self._amax, self.exp)

    @property
    def _amax(self) -> np.ndarray:
        return np.maximum(-self.lo, self.hi)

    def constant(self) -> np.ndarray:
        """Columns whose minimum and maximum, or whose std, lie within ``CONSTANT_ULPS``
        ulps of the column's largest magnitude: exactly constant columns (minimum equal
        to maximum) whatever the roundoff of their mean, and columns whose spread is
        rounding noise."""
        tol = CONSTANT_ULPS * _EPS * self._amax
        spread = self.hi - self.lo
        return (spread <= tol) | (np.sqrt(self.m2 / max(self.n, 1)) <= tol)


def _exponent(*arrays: Any) -> np.ndarray:
    """Per column, the binary exponent of the largest magnitude among ``arrays``."""
    return np.frexp(np.maximum.reduce([np.abs(np.asarray(a, dtype=np.float64))
                                       for a in arrays]))[1]


@dataclass
class Standardizer:
    """x ↦ (x − mean) / scale per column, y ↦ (y − y_mean) / y_scale.

    Constant input columns (std within a few ulps of the column's own magnitude) get
    scale max(1, max |x|), so they stay constant, at zero. A constant target cannot be
    standardised and raises ``ValueError``. The transforms scale by powers of two
    internally, so they do not overflow or underflow where the result is representable.
    """

    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: float
    y_scale: float
    #: what the moments pass found in the training data (None: not standardised, or
    #: a model file written before the report existed)
    quality: DataQuality | None = field(default=None, compare=False, repr=False)

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray | None = None) -> Standardizer:
        """Statistics of X (n, d) and y (n,); same as :meth:`fit_chunks` on one chunk."""
        return cls.fit_chunks([(X, y)])

    @classmethod
    def fit_chunks(cls, chunks: Iterable[tuple[np.ndarray, np.ndarray | None]]
                   ) -> Standardizer:
        """One pass over ``(X, y)`` row chunks (y None throughout for inputs only)."""
        return cls.from_moments(*chunk_moments(chunks))

    @classmethod
    def from_moments(cls, mx: Moments, my: Moments | None = None) -> Standardizer:
        """The scaler for merged :class:`Moments` of X's columns (and y's), with its
        data-quality report; warns (:class:`gpscale.quality.DataQualityWarning`) when
        many rows are copies of others or y has heavy tails."""
        if mx.n == 0:
            raise ValueError("no rows to standardise: the data are empty")
        # a constant column is divided by its magnitude (at least 1), so it becomes ~0
        x_scale = np.where(mx.constant(), np.maximum(1.0, mx.absmax), mx.stds)
        y_mean, y_scale = 0.0, 1.0
        if my is not None:
            y_mean, y_scale = float(my.means[0]), float(my.stds[0])
            if my.constant()[0]:
                raise ValueError(
                    f"y is constant (all values ≈ {y_mean:g}); there is nothing to regress. "
                    "Check the target column, or pass standardize=False (--no-standardize "
                    "on the command line)."
                )
        quality = DataQuality.of(mx, my)
        quality.warn_fit()
        return cls(mx.means, x_scale, y_mean, y_scale, quality)

    @classmethod
    def identity(cls, d: int) -> Standardizer:
        return cls(np.zeros(d), np.ones(d), 0.0, 1.0)

    def keep_columns(self, cols: Iterable[int]) -> Standardizer:
        """This scaler with the input columns ``cols`` left as given (mean 0, scale 1):
        the columns a count, histogram or sequence kernel reads
        (:meth:`gpscale.kernels.Kernel.raw_columns`); y is unchanged."""
        cols = list(cols)
        x_mean, x_scale = self.x_mean.copy(), self.x_scale.copy()
        x_mean[cols], x_scale[cols] = 0.0, 1.0
        return dataclasses.replace(self, x_mean=x_mean, x_scale=x_scale)

    def transform_x(self, X: np.ndarray) -> np.ndarray:
        """Standardised X. Warns (:class:`gpscale.quality.DataQualityWarning`) naming
        the columns with values far outside the training range (none are, in training)."""
        if self.quality is not None:
            self.quality.warn_far(X)
        e = _exponent(self.x_mean, self.x_scale)
        return ((np.ldexp(np.asarray(X, dtype=np.float64), -e) - np.ldexp(self.x_mean, -e))
                / np.ldexp(self.x_scale, -e))

    def inverse_x(self, Z: np.ndarray) -> np.ndarray:
        """Undo :meth:`transform_x`."""
        e = _exponent(self.x_mean, self.x_scale)
        Z = np.asarray(Z, dtype=np.float64)
        return np.ldexp(Z * np.ldexp(self.x_scale, -e) + np.ldexp(self.x_mean, -e), e)

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        e = _exponent(self.y_mean, self.y_scale)
        return ((np.ldexp(np.asarray(y, dtype=np.float64), -e) - np.ldexp(self.y_mean, -e))
                / np.ldexp(self.y_scale, -e))

    def inverse_y(self, mean: np.ndarray, var: np.ndarray | None = None):
        """Undo the target scaling on a predictive mean (and variance)."""
        e = _exponent(self.y_mean, self.y_scale)
        s = np.ldexp(self.y_scale, -e)
        m = np.ldexp(np.asarray(mean, dtype=np.float64) * s + np.ldexp(self.y_mean, -e), e)
        if var is None:
            return m
        return m, np.ldexp(np.asarray(var, dtype=np.float64) * (s * s), 2 * e)

    def inverse_std(self, std: np.ndarray) -> np.ndarray:
        """A standard deviation in standardised units → the units of y (finite even
        where the variance in those units would overflow)."""
        return np.asarray(std, dtype=np.float64) * self.y_scale

    def state(self) -> dict[str, Any]:
        """Plain values for the model file (the quality report is saved beside them:
        :func:`gpscale.quality.quality_entry`)."""
        return {"x_mean": self.x_mean.tolist(), "x_scale": self.x_scale.tolist(),
                "y_mean": self.y_mean, "y_scale": self.y_scale}

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> Standardizer:
        return cls(np.asarray(s["x_mean"], dtype=np.float64),
                   np.asarray(s["x_scale"], dtype=np.float64),
                   float(s["y_mean"]), float(s["y_scale"]))


def chunk_moments(chunks: Iterable[tuple[np.ndarray, np.ndarray | None]]
                  ) -> tuple[Moments, Moments | None]:
    """Merged :class:`Moments` of X's columns and of y (None when the chunks have no y)
    over ``(X, y)`` row chunks: what one worker returns for its partitions; the caller
    merges those and calls :meth:`Standardizer.from_moments`."""
    mx = my = None
    for i, (X, y) in enumerate(chunks):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[:, None]
        if mx is not None and (y is None) != (my is None):
            had = "had one" if y is None else "had none"
            raise ValueError(f"chunk {i} {'has no y' if y is None else 'has a y'} but "
                             f"chunk 0 {had}; give y in every chunk or in none")
        cx = _moments(X, "X", i)
        cy = None if y is None else _moments(np.asarray(y, dtype=np.float64).reshape(-1),
                                             "y", i)
        if cy is not None and cy.n != cx.n:
            raise ValueError(f"chunk {i}: X has {cx.n} rows but y has {cy.n} values")
        cx = dataclasses.replace(cx, digest=RowDigest.of(X, None if cy is None else y))
        mx = cx if mx is None else mx.merge(cx)
        my = cy if my is None else my.merge(cy)
    if mx is None:
        raise ValueError("no rows to standardise: the data are empty")
    return mx, my


def _moments(A: np.ndarray, name: str, chunk: int) -> Moments:
    try:
        return Moments.of(A)
    except ValueError as err:
        where = f" of chunk {chunk}" if chunk else ""
        raise ValueError(f"{name}{where}: {err}") from None
