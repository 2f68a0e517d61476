"""Progress bars: the one place where ``progress=`` becomes a tqdm bar.

``progress=True`` always shows a bar, ``False`` never, ``None`` only when the bar's
stream (stderr) is a terminal — tqdm's ``disable=None`` — so logs and pipes are not
filled with hundreds of updates. The library's trainers default to ``False``; the
command line passes ``None`` (``--progress`` forces ``True``, ``--quiet`` ``False``).
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm

__all__ = ["progress_bar", "progress_note", "MORE_TIME"]

#: what a warning of a stage cut at its time allowance tells the user to do: under
#: ``method="auto"`` the allowance, not the budget, binds once twice the estimate is below
#: the budget
MORE_TIME = ("A longer time allowance lets it finish (time_limit=SECONDS, --option "
             "time_limit=SECONDS; under method='auto' the allowance is the budget, at most "
             "twice the printed estimate)")


def progress_bar(progress: bool | None, **kwargs: Any) -> tqdm:
    """A tqdm bar (``kwargs`` as for tqdm, e.g. ``total``, ``desc``) shown as
    ``progress`` says: True always, False never, None only on a terminal."""
    disable = None if progress is None else not progress
    return tqdm(disable=disable, **kwargs)


def progress_note(progress: bool | None, message: str) -> None:
    """A line between bars (a stage begun, the time left), shown where a bar would be."""
    if progress or (progress is None and sys.stderr.isatty()):
        tqdm.write(message, file=sys.stderr)
