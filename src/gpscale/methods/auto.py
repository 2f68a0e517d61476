"""``method="auto"``: pick a method and its size from the data's shape, the kernel and an
optional time budget, and say why.

The rule, in order (the constants below are where its thresholds live):

1. **exact** when the exact GP's fit time, estimated from n by its fixed cost model
   (:func:`~gpscale.methods.cost.exact_cost`, the one its size guard uses; fixed so that
   the same call picks the same method on a busy machine and a quiet one), is within the
   budget (default :data:`EXACT_SECONDS`) and its n × n matrices fit in memory: on small
   data nothing beats it.
2. **exact** on every row, past the Cholesky limit (the exact GP switches itself to its
   iterative path: θ from a row sample refined on every row, the posterior by
   preconditioned CG), for a kernel with tiled products (RBF, Matérn, RQ under Scale),
   when its cost model (:func:`~gpscale.methods.cost.iterative_seconds`) is within the
   budget (default :data:`ITERATIVE_SECONDS`). Where sgpr's m = 512 inducing inputs are
   few against n the exact GP is the more accurate (kin40k's 36 000 rows: half sgpr's
   test RMSE); between the Cholesky limit and the exact GP's switch to its iterative
   path (about 3 500 to 4 700 rows) sgpr's m is a large share of n and sgpr is kept
   (benchmarks/results/exact-large/).
3. otherwise, for a kernel with a spectral density (``rbf``, ``matern``, their ARD
   forms), **sgpr** (m free inducing inputs, the VFE bound by L-BFGS) when its m × n
   matrices fit in memory and its estimated fit time
   (:func:`~gpscale.methods.cost.sgpr_seconds`, ∝ n m²) is within the budget (default
   :data:`SGPR_SECONDS`); with a budget, m is sized to it between :data:`MIN_INDUCING`
   and :data:`MAX_INDUCING`. Past :data:`~gpscale.methods.cost.SGPR_HELD_ROWS` rows, or
   where the rows held would not fit that time or memory, sgpr reads the rows in passes
   (a sample's search refined on all rows,
   :func:`~gpscale.methods.cost.sgpr_passes_seconds`; memory independent of n), at any
   n. On the large UCI sets it was the most accurate method at its defaults on three of
   five and within 0.9 % of the best on the other two
   (``benchmarks/results/uci-large/uci-large.md``). (Fitting ``rff`` too and keeping
   the higher evidence was tried and left out: ``rff`` does not revert to the
   prior far from the training inputs, and on elevators its higher evidence came with a
   test RMSE of 0.825 against sgpr's 0.372, from one test row far outside the training
   range.)
4. beyond that (not even m = :data:`MIN_INDUCING` fits the budget by passes), **rff**,
   whose search on a sample and single pass cost less than sgpr's refinement, but which
   scored worse wherever both were measured (kin40k: test RMSE 0.332 against 0.150,
   benchmarks/results/uci-large); it streams from files and runs its passes on a
   cluster; with a budget its number of features p is scaled so that its estimated fit
   time (:func:`rff_seconds`: the θ search and the final pass both cost ∝ p²) fits the
   budget, between :data:`MIN_FEATURES` and :data:`MAX_FEATURES`.
5. for other kernels (counts, molecules, sequences, periodic or compound kernels):
   **cholqr-vfe**, a sparse GP on m training points chosen by swaps, which needs only
   kernel evaluations; m is :data:`CHOLQR_M` (fewer when n is small).

The exact GP's estimates (1 and 2) count distinct inputs where they are known (arrays in
memory): the exact GP merges rows that repeat an input (:mod:`gpscale.models.copies`),
so keggundirected's 57 248 training rows cost what its 17 053 distinct inputs cost.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..kernels import Kernel
from ..kernels.chunked import tiled_gradient
from ..models.exact_cg import PRECOND_BYTES
from ..sizes import available_memory
from .cost import (
    DEFAULT_FEATURES,
    DEFAULT_M,
    EXACT_EVALS,
    SGPR_HELD_ROWS,
    exact_bytes,
    exact_seconds,
    iterative_seconds,
    kernel_choice_seconds,
    rff_seconds,
    sgpr_bytes,
    sgpr_passes_bytes,
    sgpr_passes_seconds,
    sgpr_seconds,
)
from .exact import ExactFit
from .kernel_choice import CANDIDATES, sample_size

__all__ = ["Choice", "choose_method", "DEFAULT_BUDGET", "time_allowance"]

#: the exact GP is picked when its fit is estimated to take at most this long (seconds)
#: and no budget is given: a choice (a minute), not a measurement
EXACT_SECONDS = 60.0
#: the exact GP on every row (past its Cholesky limit) is picked when its cost model
#: puts the fit within this long and no budget is given (a choice: a quarter of an hour)
ITERATIVE_SECONDS = 900.0
#: without a budget, a method that keeps a time allowance (a ``time_limit`` option) gets
#: this one under ``auto``; and never more than PROMISE times the estimate auto printed
#: (at least EXACT_SECONDS: below a minute the cost models leave out fixed costs)
DEFAULT_BUDGET, PROMISE = ITERATIVE_SECONDS, 2.0
#: the range of rff's number of features a budget may set
MIN_FEATURES, MAX_FEATURES = 128, 4096
#: inducing points of cholqr-vfe when auto picks it (a choice, not a measurement)
CHOLQR_M = 256
#: sgpr is picked when its fit is estimated within this long (seconds) and no budget is
#: given: auto's default budget, which the fit then keeps; a budget sizes m in
#: [MIN_INDUCING, MAX_INDUCING] (sgpr's default is DEFAULT_M). sgpr's cost model is
#: :func:`~gpscale.methods.cost.sgpr_seconds` and :func:`~gpscale.methods.cost.sgpr_bytes`
SGPR_SECONDS = DEFAULT_BUDGET
MIN_INDUCING, MAX_INDUCING = 128, 1024


@dataclass(frozen=True)
class Choice:
    """What ``method="auto"`` picked: the method, the options it sets, why, and the fit's
    estimated wall time in seconds (the one the reason states; None where none is made)."""

    method: str
    options: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    seconds: float | None = None

    def __str__(self) -> str:
        opts = ", ".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.method}{f' ({opts})' if opts else ''}: {self.reason}"


def time_allowance(choice: Choice, budget: float | None) -> float:
    """Seconds a fit ``auto`` picked is to end within: the budget (default
    :data:`DEFAULT_BUDGET`), and at most :data:`PROMISE` times the estimate it printed
    (never below :data:`EXACT_SECONDS`)."""
    limit = DEFAULT_BUDGET if budget is None else float(budget)
    if choice.seconds is None:
        return limit
    return min(limit, max(PROMISE * choice.seconds, EXACT_SECONDS))


def choose_method(n: int, d: int, kernel: Kernel, budget: float | None = None,
                  dtype: torch.dtype = torch.float64, distinct: int | None = None,
                  choose_kernel: bool = False, gaps: bool = False) -> Choice:
    """The method (and size options) for n rows of d inputs with ``kernel`` and a time
    budget in seconds (None: no budget). ``distinct``: how many distinct input rows
    there are, when known; the exact GP merges copies of an input
    (:mod:`gpscale.models.copies`), so its estimates count those, not n.
    ``choose_kernel``: the kernel family is to be chosen from the data
    (``kernel="auto"``; ``kernel`` stands in for it): the exact GP's and sgpr's estimates
    include the choice's fits (:func:`~gpscale.methods.cost.kernel_choice_seconds`).
    ``gaps``: a table with missing numbers, which the exact GP models where it fits by
    Cholesky (:func:`~gpscale.methods.kernel_choice.modelled_gaps`): there the fit keeps
    to Cholesky, whatever the iterative path would cost, with one more factorisation at
    its end (the gaps' leave-one-out widening, :mod:`gpscale.io.gaps`); so its estimate
    is Cholesky's, within a quarter of an hour (or the budget), else the iterative
    path's with ``solver="cg"``, which models no gap."""
    if budget is not None and not (isinstance(budget, (int, float)) and budget > 0
                                   and math.isfinite(budget)):
        raise ValueError(f"budget must be a positive number of seconds, got {budget!r}")
    limit = EXACT_SECONDS if budget is None else float(budget)
    g = n if distinct is None else min(int(distinct), n)  # the rows the exact GP holds
    size = f"n={n}" + (f" at {g} distinct inputs" if g < n else "")
    rows = sample_size(budget)
    choosing = kernel_choice_seconds(g, rows, len(CANDIDATES)) if choose_kernel else 0.0
    seconds = exact_seconds(g, EXACT_EVALS + int(bool(gaps))) + choosing
    memory = exact_bytes(g, d, dtype)
    avail = available_memory()
    fits = avail is None or memory <= 0.5 * avail
    with_choice = (f" with the kernel family chosen from {len(CANDIDATES)} fits"
                   if choose_kernel else "")
    if seconds <= limit and fits:
        return Choice("exact", {}, f"{size}: the exact GP's fit{with_choice} is estimated "
                      f"at {_seconds(seconds)}, within "
                      f"{'the budget' if budget else 'a minute'} ({_seconds(limit)})",
                      seconds)
    cholesky_gaps = gaps and fits and ExactFit(dtype=dtype).solver_for(g, d, False) \
        == "cholesky"
    if cholesky_gaps:  # the fit stays on Cholesky, the one path that models the gaps
        wide = ITERATIVE_SECONDS if budget is None else float(budget)
        if seconds <= wide:
            return Choice("exact", {}, f"{size}: the exact GP's fit by Cholesky (the "
                          f"table's missing numbers are modelled there){with_choice} is "
                          f"estimated at {_seconds(seconds)}, within "
                          f"{'the budget' if budget else 'a quarter of an hour'} "
                          f"({_seconds(wide)})", seconds)
    # past the exact GP on every row, the choice's fits are on a sample of rows
    reserve = kernel_choice_seconds(g, rows, len(CANDIDATES)) if choose_kernel else 0.0
    why_not_exact = (f"{size}: the exact GP would need about {_seconds(seconds)}"
                     + ("" if fits else f" and {memory / 2**30:.3g} GiB"))
    iterative = _iterative_choice(g, d, kernel, budget, dtype, why_not_exact, reserve)
    if iterative is not None:
        if cholesky_gaps:  # as estimated: by CG, the gaps as indicator columns alone
            return Choice("exact", {"solver": "cg"}, iterative.reason, iterative.seconds)
        return iterative
    if kernel.spectral_density() is None:  # the kernel says whether it has one
        m = min(CHOLQR_M, max(2, n // 4))
        return Choice("cholqr-vfe", {"m": m},
                      f"{why_not_exact}; the kernel has no spectral density for random "
                      "features, and cholqr-vfe needs only "
                      f"kernel values (a sparse GP on m={m} points chosen by swaps)")
    sgpr = _sgpr_choice(n, d, budget, avail, dtype, why_not_exact, reserve)
    if sgpr is not None:
        return sgpr
    least = sgpr_passes_bytes(d, MIN_INDUCING, dtype)
    if avail is not None and least > 0.5 * avail:
        why_not_exact += f"; sgpr by passes would need {least / 2**30:.3g} GiB or more"
    else:
        why_not_exact += (f"; sgpr by passes would need about "
                          f"{_seconds(sgpr_passes_seconds(n, MIN_INDUCING))} or more")
    p = DEFAULT_FEATURES
    if budget is not None:
        p = DEFAULT_FEATURES * math.sqrt(budget / rff_seconds(n))
        p = int(min(MAX_FEATURES, max(MIN_FEATURES, 64 * math.floor(p / 64))))
    options = {} if p == DEFAULT_FEATURES else {"num_features": p}
    return Choice("rff", options,
                  f"{why_not_exact}; rff learns from passes over the rows (streamed from "
                  f"files, on a cluster if given) with p={p} random features"
                  + (f", sized for the budget of {_seconds(budget)} (about "
                     f"{_seconds(rff_seconds(n, p))} estimated"
                     + ("; the budget is below what any method needs, so rff takes its "
                        "smallest size" if rff_seconds(n, p) > budget else "") + ")"
                     if budget else ""), rff_seconds(n, p))


def _iterative_choice(n: int, d: int, kernel: Kernel, budget: float | None,
                      dtype: torch.dtype, why_not_exact: str, reserve: float = 0.0
                      ) -> Choice | None:
    """The exact GP on every row when its fit switches to the iterative path (as the
    fit decides, :meth:`~gpscale.methods.exact.ExactFit.solver_for`), the kernel has
    tiled products and the cost model, plus ``reserve`` seconds (the kernel's choice),
    fits the budget (or :data:`ITERATIVE_SECONDS`); else None."""
    rbf = tiled_gradient(kernel)
    if kernel.tiled_form() is None or ExactFit(dtype=dtype).solver_for(n, d, rbf) != "cg":
        return None
    avail = available_memory()
    if avail is not None and PRECOND_BYTES > 0.5 * avail:  # the preconditioner's factor
        return None
    seconds = iterative_seconds(n, d, rbf) + reserve
    limit = ITERATIVE_SECONDS if budget is None else float(budget)
    if seconds > limit:
        return None
    return Choice("exact", {}, f"{why_not_exact} by Cholesky; on every row by iterative "
                  f"solves (θ from a row sample refined on all rows, the posterior by "
                  f"preconditioned CG) about {_seconds(seconds)}, within "
                  f"{'the budget' if budget else 'a quarter of an hour'} "
                  f"({_seconds(limit)}): the exact GP, no inducing-point approximation",
                  seconds)


def _sgpr_choice(n: int, d: int, budget: float | None, avail: int | None,
                 dtype: torch.dtype, why_not_exact: str, reserve: float = 0.0
                 ) -> Choice | None:
    """sgpr with the largest m (multiple of 64, within its range) that the budget (or
    SGPR_SECONDS), less ``reserve`` seconds (the kernel's choice), and half the available
    memory allow; None when not even the smallest m fits."""
    limit = (SGPR_SECONDS if budget is None else float(budget)) - reserve
    top = DEFAULT_M if budget is None else MAX_INDUCING
    if n < 2 * MIN_INDUCING:
        return None
    for passes in (False, True):  # every row held first; else read in passes, at any n
        if not passes and n > SGPR_HELD_ROWS:
            continue
        seconds = functools.partial(sgpr_passes_seconds, n) if passes else \
            functools.partial(sgpr_seconds, n)
        memory = functools.partial(sgpr_passes_bytes, d) if passes else \
            functools.partial(sgpr_bytes, n, d)
        sizes = [m for m in range(top, MIN_INDUCING - 1, -64) if seconds(m) <= limit
                 and (avail is None or memory(m, dtype) <= 0.5 * avail)]
        if sizes:
            break
    else:
        return None
    m = min(sizes[0], n)
    options = ({} if m == DEFAULT_M else {"m": m}) | (
        {"passes": True} if passes and n <= SGPR_HELD_ROWS else {})
    why = "within the budget" if budget else "the most accurate default on most large UCI sets"
    return Choice("sgpr", options,
                  f"{why_not_exact}; sgpr fits a sparse GP with m={m} free inducing inputs "
                  f"in about {_seconds(seconds(m) + reserve)}"
                  + (" with the kernel family chosen on a sample" if reserve else "")
                  + f" ({why}; " + ("a sample's search refined by passes over all rows, "
                                    "streamed from files or on a cluster if given)"
                                    if passes else "rows held in memory)"),
                  seconds(m) + reserve)


def _seconds(s: float) -> str:
    if s < 10:  # two significant figures: a small budget or estimate is not "0 s"
        return f"{s:.2g} s"
    if s < 120:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.3g} h"
