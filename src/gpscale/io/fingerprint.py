"""Fingerprints of the files of a source, so that every pass over it reads the same data.

A fit reads its rows several times: a moments pass for the scaler, then the method's
passes (statistics, gradients, a final pass). A file replaced or appended to between
two of those passes would give a model whose scaler and hyperparameters come from one
data set and whose statistics come from another, without any error. So each file is
fingerprinted when the source is opened (size, modification time in nanoseconds, and for
Parquet the row count in its footer), and every later read of one of its partitions
compares the file with that fingerprint first and last, and stops with
:class:`SourceChangedError` naming the file when they differ.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Fingerprint", "SourceChangedError"]


class SourceChangedError(ValueError):
    """A file of a source changed after the source was opened (between two passes, or
    during one): the rows read so far and the rows still to be read are not one data set."""


@dataclass(frozen=True)
class Fingerprint:
    """What a file looked like when its source was opened: ``size`` (bytes),
    ``mtime_ns`` and, for Parquet, ``rows`` (the row count in the footer; None for CSV,
    whose row count is not stored in the file)."""

    size: int
    mtime_ns: int
    rows: int | None = None

    @classmethod
    def of(cls, path: str, rows: int | None = None) -> Fingerprint:
        """The fingerprint of ``path`` now (``rows`` as read from its footer)."""
        st = os.stat(path)
        return cls(int(st.st_size), int(st.st_mtime_ns), rows)

    def check(self, path: str, rows: int | None = None) -> None:
        """SourceChangedError when ``path`` (with ``rows`` rows in its footer, for
        Parquet) differs from this fingerprint, or is gone."""
        try:
            now = Fingerprint.of(path, self.rows if rows is None else rows)
        except OSError as err:
            raise SourceChangedError(
                f"{path!r} was removed or became unreadable while gpscale was reading it "
                f"({err.strerror or err}). {_ADVICE}") from None
        if now != self:
            raise SourceChangedError(f"{path!r} changed while gpscale was reading it "
                                     f"({self._difference(now)}). {_ADVICE}")

    def _difference(self, now: Fingerprint) -> str:
        said = []
        if now.rows != self.rows:
            said.append(f"{self.rows} rows when opened, {now.rows} now")
        if now.size != self.size:
            said.append(f"{self.size} bytes when opened, {now.size} now")
        if now.mtime_ns != self.mtime_ns:
            said.append("modified since it was opened")
        return "; ".join(said)


_ADVICE = ("Every pass over a source must read the same rows (the scaler and the "
           "hyperparameters come from earlier passes than the statistics): leave the files "
           "unchanged until the fit ends, or copy them first, and run again")
