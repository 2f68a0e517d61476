"""A small data-quality report for every standardised fit, made from the moments pass.

Real data sets carry constant columns, columns that vary only in their last digits,
rows repeated by a join or an export, and, at prediction time, rows far outside the
range the model was trained on. None of these is an error, but each changes what a GP
learns: copies of a row with the same target look like independent observations that
agree exactly, so ML-II drives the noise down and the fit interpolates them; a column
far beyond its training range is extrapolated into the prior; a target with heavy tails
(a few extreme values) dominates the Gaussian likelihood and can pull the noise and the
lengthscales to a fit with no skill. The report says so.

- :class:`RowDigest`: duplicated rows counted from 64-bit hashes of each row (inputs and
  target), one streaming pass, mergeable across chunks and partitions like
  :class:`~gpscale.preprocessing.Moments`. Exact while at most :data:`MAX_HASHES`
  distinct hashes are kept; beyond that only hashes in a shrinking fraction 2⁻ᵏ of the
  hash range are kept (every copy of a row has the same hash, so copies are sampled
  together) and the count is an estimate, labelled as such.
- :class:`DataQuality`: constant and near-constant columns, duplicated rows, the
  target's skewness and excess kurtosis (:func:`heavy_tails`) and each column's
  training range, from the merged moments; saved with the scaler
  beside it (:func:`quality_entry`, :func:`saved_quality`), shown by
  :meth:`gpscale.predictor.Predictor.summary` and ``gpscale info``.
- :meth:`DataQuality.far_columns`: the prediction-time check (a
  :class:`~gpscale.train.warning_types.DataQualityWarning` names the columns).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RowDigest", "DataQuality", "row_hashes", "quality_state", "quality_from_state",
           "quality_entry", "saved_quality", "SAVED_KEY", "DataQualityWarning", "heavy_tails",
           "HEAVY_TAILS", "HEAVY_TAILS_ROWS"]

#: distinct row hashes kept exactly (8 + 8 bytes each); beyond, a hash sample
MAX_HASHES = 1 << 18
#: a column is near-constant when its values agree to this relative precision ...
NEAR_CONSTANT_RELATIVE = 1e-8
#: ... or when its std is below this share of its range (nearly every row at one value)
NEAR_CONSTANT_SHARE = 0.01
#: a prediction input lies far outside training when it is beyond the training min / max
#: by more than this many training ranges
FAR_SPANS = 3.0
#: fits warn when at least this share of the rows are copies of other rows
DUPLICATE_WARN_SHARE = 0.1
#: y's excess kurtosis above this has heavy tails: a Gaussian's is 0, a Laplace's 3, an
#: exponential's and Student-t₅'s 6, a log-normal's (σ = 1) 111; a Gaussian sample of 100
#: rows stays below 3 ...
HEAVY_TAILS = 10.0
#: ... on at least this many rows (fewer cannot tell tails from chance)
HEAVY_TAILS_ROWS = 100


class DataQualityWarning(UserWarning):
    """The data hold something a GP handles badly: many duplicated rows or a
    heavy-tailed target at fit time, inputs far outside the training range at prediction
    time (also importable from ``gpscale.train``)."""


def heavy_tails(excess_kurtosis: float | None, rows: int) -> bool:
    """Whether a target of ``rows`` values with this sample excess kurtosis has heavy
    tails (above :data:`HEAVY_TAILS` on at least :data:`HEAVY_TAILS_ROWS` rows)."""
    return (excess_kurtosis is not None and rows >= HEAVY_TAILS_ROWS
            and excess_kurtosis > HEAVY_TAILS)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (uint64 arithmetic wraps)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def row_hashes(X: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """A 64-bit hash of each row of X (with y appended): equal rows hash alike (−0.0 is
    0.0), and different rows collide with probability about 2⁻⁶⁴ per pair."""
    X = np.asarray(X, dtype=np.float64)
    X = X[:, None] if X.ndim == 1 else X
    h = np.full(X.shape[0], _GOLDEN, dtype=np.uint64)
    cols = [X[:, j] for j in range(X.shape[1])]
    if y is not None:
        cols.append(np.asarray(y, dtype=np.float64).reshape(-1))
    for c in cols:
        h = _mix(h ^ np.ascontiguousarray(c + 0.0).view(np.uint64))
    return h


@dataclass(frozen=True)
class RowDigest:
    """Row hashes of a set of rows: ``rows`` in all; ``hashes`` (sorted, distinct) with
    ``counts`` (rows per hash) of the rows whose hash lies in the lowest 2⁻``level`` of
    the hash range (every row at level 0)."""

    rows: int
    hashes: np.ndarray
    counts: np.ndarray
    level: int = 0

    @classmethod
    def of(cls, X: np.ndarray, y: np.ndarray | None = None) -> RowDigest:
        h, c = np.unique(row_hashes(X, y), return_counts=True)
        return cls(int(len(np.asarray(X))), h, c.astype(np.int64))._bounded()

    def merge(self, other: RowDigest) -> RowDigest:
        """The digest of both sets of rows (disjoint rows, e.g. two chunks)."""
        level = max(self.level, other.level)
        a, b = self._at(level), other._at(level)
        h = np.concatenate([a.hashes, b.hashes])
        c = np.concatenate([a.counts, b.counts])
        order = np.argsort(h, kind="stable")  # two sorted runs: a linear merge
        h, c = h[order], c[order]
        first = np.ones(len(h), dtype=bool)
        first[1:] = h[1:] != h[:-1]
        starts = np.flatnonzero(first)
        counts = np.add.reduceat(c, starts) if len(h) else c
        return RowDigest(self.rows + other.rows, h[first], counts, level)._bounded()

    @property
    def exact(self) -> bool:
        return self.level == 0

    @property
    def duplicates(self) -> int:
        """Rows that repeat an earlier row (inputs and target): rows − distinct rows;
        an estimate scaled up from the hash sample when not :attr:`exact`."""
        sampled = int(self.counts.sum()) - len(self.hashes)
        return int(round(sampled * 2.0 ** self.level))

    def _at(self, level: int) -> RowDigest:
        """This digest with only the hashes of ``level``'s sample."""
        if level == self.level:
            return self
        keep = (self.hashes >> np.uint64(64 - level)) == 0
        return RowDigest(self.rows, self.hashes[keep], self.counts[keep], level)

    def _bounded(self) -> RowDigest:
        out = self
        while len(out.hashes) > MAX_HASHES:
            out = out._at(out.level + 1)
        return out


@dataclass(frozen=True)
class DataQuality:
    """What the moments pass found: ``rows``; input columns that are ``constant`` or
    ``near_constant`` (indices); ``duplicates`` (rows repeating another row, inputs and
    target; None when not counted) and whether that count is ``exact``; each input
    column's training range (``mins``, ``maxs``) for the prediction-time check; the
    target's sample ``y_skewness``, ``y_excess_kurtosis`` and ``y_min`` (None: no
    target, no spread, or a report saved before they were kept)."""

    rows: int
    constant: tuple[int, ...]
    near_constant: tuple[int, ...]
    duplicates: int | None
    exact: bool
    mins: tuple[float, ...]
    maxs: tuple[float, ...]
    y_skewness: float | None = None
    y_excess_kurtosis: float | None = None
    y_min: float | None = None

    @classmethod
    def of(cls, mx: Any, my: Any = None) -> DataQuality:
        """From merged :class:`~gpscale.preprocessing.Moments` of the input columns
        (their ``digest``, when the pass hashed the rows, gives the duplicates) and of
        the target ``my`` (its skewness and excess kurtosis)."""
        const = np.asarray(mx.constant(), dtype=bool)
        lo, hi, std = mx.mins, mx.maxs, mx.stds
        span = hi - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            relative = span / np.maximum(np.abs(lo), np.abs(hi))
            near = ~const & ((relative <= NEAR_CONSTANT_RELATIVE)
                             | (std < NEAR_CONSTANT_SHARE * span))
        digest = getattr(mx, "digest", None)
        return cls(int(mx.n), _indices(const), _indices(near),
                   None if digest is None else digest.duplicates,
                   True if digest is None else digest.exact,
                   tuple(float(v) for v in lo), tuple(float(v) for v in hi),
                   *_target_shape(my))

    @property
    def heavy_tailed(self) -> bool:
        return heavy_tails(self.y_excess_kurtosis, self.rows)

    @property
    def duplicate_share(self) -> float:
        return (self.duplicates or 0) / max(self.rows, 1)

    def lines(self, names: Sequence[Any] | None = None) -> list[str]:
        """The report, one finding per line (empty when nothing was found)."""
        out = []
        if self.constant:
            out.append(f"constant input columns (they carry no information): "
                       f"{_names(self.constant, names)}")
        if self.near_constant:
            out.append(f"near-constant input columns (nearly every row at one value, or "
                       f"differing only in the last digits): {_names(self.near_constant, names)}")
        if self.duplicates:
            about = "" if self.exact else "about "
            how = "" if self.exact else " (estimated from a sample of row hashes)"
            out.append(f"duplicated rows: {about}{self.duplicates} of {self.rows} "
                       f"({100 * self.duplicate_share:.1f}%) repeat another row exactly "
                       f"(inputs and target){how}")
        if self.heavy_tailed:
            out.append(f"heavy-tailed target: y's excess kurtosis is "
                       f"{self.y_excess_kurtosis:.3g} and its skewness "
                       f"{self.y_skewness:.3g} (a Gaussian's are 0)")
        return out

    def far_columns(self, X: np.ndarray, spans: float = FAR_SPANS) -> list[int]:
        """Input columns of X with a value beyond the training minimum / maximum by more
        than ``spans`` training ranges (a constant column: ``spans`` times max(1, |its
        value|))."""
        if not len(self.mins) or np.asarray(X).size == 0:
            return []
        lo, hi = np.asarray(self.mins), np.asarray(self.maxs)
        width = hi - lo
        width = np.where(width > 0, width, np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi))))
        X = np.asarray(X, dtype=np.float64)
        out = (X.min(axis=0) < lo - spans * width) | (X.max(axis=0) > hi + spans * width)
        return [int(j) for j in np.flatnonzero(out)]

    def warn_far(self, X: np.ndarray, names: Sequence[Any] | None = None) -> None:
        """:class:`DataQualityWarning` naming the columns of X far outside training."""
        far = self.far_columns(X)
        if far:
            warnings.warn(
                f"input column(s) {_names(far, names)} hold values more than "
                f"{FAR_SPANS:g} training ranges beyond the training minimum / maximum; "
                "the GP extrapolates there (its mean reverts to the prior mean, its std "
                "grows): check the units and the columns' order", DataQualityWarning,
                stacklevel=4)

    def warn_fit(self) -> None:
        """:class:`DataQualityWarning` at fit time when many rows are copies, and when
        the target has heavy tails."""
        lines = self.lines()
        if self.duplicate_share >= DUPLICATE_WARN_SHARE:
            said = next(t for t in lines if t.startswith("duplicated rows"))
            warnings.warn(
                f"{said}. A GP takes copies for independent observations that "
                "agree exactly, which pulls the noise down and can end the search at an "
                "interpolating or no-skill optimum: drop the duplicates (or average "
                "repeated inputs) before fitting", DataQualityWarning, stacklevel=4)
        if self.heavy_tailed:
            log = (" (log y: y is positive and skewed to the right)"
                   if self.y_min is not None and self.y_min > 0 and self.y_skewness > 1
                   else "")
            warnings.warn(
                f"{lines[-1]}. A few extreme values dominate a GP's Gaussian likelihood "
                "and can pull the noise and lengthscales to a fit with no skill: check "
                "the largest |y - mean| rows for errors or outliers and drop or fix them, "
                f"or fit a transform of y{log}", DataQualityWarning, stacklevel=4)


def _target_shape(my: Any) -> tuple[float | None, float | None, float | None]:
    """(skewness, excess kurtosis, minimum) of the one-column moments ``my`` (None each
    without a target, or where y has no spread)."""
    if my is None or my.n < 2:
        return None, None, None
    skew, kurt = float(my.skewness[0]), float(my.excess_kurtosis[0])
    if not (np.isfinite(skew) and np.isfinite(kurt)):
        return None, None, float(my.mins[0])
    return skew, kurt, float(my.mins[0])


def _indices(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(j) for j in np.flatnonzero(mask))


def _names(cols: Sequence[int], names: Sequence[Any] | None) -> str:
    shown = [repr(names[j]) if names is not None and j < len(names) else f"X[:, {j}]"
             for j in cols[:10]]
    return ", ".join(shown) + (f" and {len(cols) - 10} more" if len(cols) > 10 else "")


# -- saved with the model -----------------------------------------------------------------
def quality_state(quality: DataQuality | None) -> dict[str, Any] | None:
    """The report as plain values, for the model file (None: no report)."""
    if quality is None:
        return None
    return {"rows": quality.rows, "constant": list(quality.constant),
            "near_constant": list(quality.near_constant), "duplicates": quality.duplicates,
            "exact": quality.exact, "mins": list(quality.mins), "maxs": list(quality.maxs),
            "y_skewness": quality.y_skewness, "y_excess_kurtosis": quality.y_excess_kurtosis,
            "y_min": quality.y_min}


def quality_from_state(state: Any) -> DataQuality | None:
    """The report saved by :func:`quality_state` (None for files without one)."""
    if not isinstance(state, dict):
        return None
    return DataQuality(int(state["rows"]), tuple(state["constant"]),
                       tuple(state["near_constant"]), state["duplicates"],
                       bool(state["exact"]), tuple(state["mins"]), tuple(state["maxs"]),
                       state.get("y_skewness"), state.get("y_excess_kurtosis"),
                       state.get("y_min"))


#: the report's key in a saved model (:meth:`gpscale.predictor.Predictor.to_dict`)
SAVED_KEY = "data_quality"


def quality_entry(predictor: Any) -> dict[str, Any]:
    """``{SAVED_KEY: report}`` for a predictor's saved dictionary: its scaler's report
    as plain values (None when it has none)."""
    return {SAVED_KEY: quality_state(getattr(predictor.scaler, "quality", None))}


def saved_quality(saved: dict[str, Any]) -> DataQuality | None:
    """The report in a saved model's dictionary (None for files without one)."""
    return quality_from_state(saved.get(SAVED_KEY))
