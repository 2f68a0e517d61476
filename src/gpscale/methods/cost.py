"""Every method's cost model: estimated wall time (one thread) and peak memory of a fit,
read by ``method="auto"`` (:mod:`gpscale.methods.auto`), by the exact GP's choice of
solver and by the size guards.

The models are fixed formulas with measured rates, not timings taken at run time, so
that the same call gets the same answer on any machine and load. Where each rate was
measured: ``benchmarks/results/design-measurements.md`` (section "The exact GP's
constants and cost models").
"""

from __future__ import annotations

import warnings

import torch

from ..models.exact_cg import precond_cap
from ..models.iterative_variance import PATHWISE_SAMPLES
from ..sizes import CHUNK_BYTES, available_memory
from ..train.exact_refine import PROBES
from ..train.warning_types import SizeWarning
from .rff import AUTO_ABOVE, AUTO_SUBSAMPLE, DEFAULT_NUM_FEATURES

__all__ = ["exact_seconds", "exact_bytes", "exact_cost", "iterative_seconds",
           "kernel_choice_seconds",
           "refine_seconds", "refine_evaluations", "product_seconds", "solve_seconds",
           "fit_seconds",
           "too_large", "sample_size", "size_guard", "sgpr_seconds", "sgpr_bytes",
           "rff_seconds", "sgpr_passes_seconds", "sgpr_passes_bytes"]

# -- the exact GP by Cholesky ------------------------------------------------------------
#: seconds per n³ of one NLML + gradient evaluation in a fit, and evaluations per fit
EXACT_N3_SECONDS, EXACT_EVALS = 3.5e-11, 40
#: below this n the size guard estimates nothing and the exact GP keeps its Cholesky
#: solver (the model puts such a fit under 90 s and 0.4 GB)
GUARD_MIN_N = 4000
#: the size guard warns when one exact fit is estimated to take longer than this (s)
MAX_FIT_SECONDS = 600.0
#: methods that scale past the exact GP, named by the size guard (sgpr first: the
#: large-n default for vector inputs, see :mod:`gpscale.methods.auto`)
SCALABLE_METHODS = ("sgpr", "rff", "grief-ii", "svgp", "cholqr-vfe", "minimax", "admm-hocv")

# -- the exact GP by CG ------------------------------------------------------------------
#: products in the posterior's solve; the tiled product's and randomly pivoted
#: Cholesky's rates (flop/s), from the fits in benchmarks/results/exact-large/
CG_PRODUCTS, PRODUCT_FLOPS, PRECOND_FLOPS = 15, 4e10, 2e10
#: ``refine="auto"``: gradient evaluations on every row within REFINE_SECONDS, at most
#: REFINE_MAX, none below REFINE_MIN; REFINE_CG CG iterations per evaluation
REFINE_SECONDS, REFINE_MAX, REFINE_MIN, REFINE_CG = 300.0, 50, 5, 15
#: the contraction pass's rate: an RBF's float32 tiles, other kernels' float64 slabs
CONTRACTION_FLOPS = (1.8e10, 4e9)
#: θ comes from an exact fit on a row sample whose Cholesky fit takes at most this long
SUBSAMPLE_SECONDS = 90.0

# -- sgpr --------------------------------------------------------------------------------
#: sgpr's inducing inputs unless m= is given, and its warm start: above WARM_ABOVE rows
#: the search starts on a sample of WARM_ROWS rows (sgpr's schedule, which the model
#: costs)
DEFAULT_M = 512
WARM_ABOVE, WARM_ROWS = 16_000, 8_000
#: seconds per n·m² of one evaluation, and evaluations on the warm sample and on all rows
SGPR_NM2_SECONDS, SGPR_WARM_EVALS, SGPR_FULL_EVALS = 1.7e-10, 150, 150
#: float64 numbers sgpr holds per row and inducing point (K_ZX, A, the gradient, ...)
SGPR_WORDS_PER_NM = 8

# -- rff ---------------------------------------------------------------------------------
#: rff's default number of features (declared once, by the method)
DEFAULT_FEATURES = DEFAULT_NUM_FEATURES
#: seconds of rff's default θ search on RFF_SEARCH_ROWS rows
RFF_SEARCH_SECONDS, RFF_SEARCH_ROWS = 90.0, 40_000
#: float64 multiply-add rate of ΦᵀΦ on 2 threads (benchmarks/results/scale-1e7/scale.md)
PASS_FLOPS = 7e10


def exact_seconds(n: int, evals: int = EXACT_EVALS) -> float:
    """Rough wall time of an exact fit on n rows: ``evals`` evaluations of cost ∝ n³."""
    return evals * EXACT_N3_SECONDS * float(n) ** 3


def exact_bytes(n: int, d: int, dtype: torch.dtype = torch.float64) -> float:
    """Peak memory of an exact fit on n rows and d columns: three n × n matrices (module
    doc of :mod:`gpscale.models.exact`) and a few copies of the rows."""
    item = torch.empty((), dtype=dtype).element_size()
    return 3.0 * n * n * item + 4.0 * n * d * item


def exact_cost(n: int, d: int, dtype: torch.dtype = torch.float64,
               evals: int = EXACT_EVALS) -> dict[str, float]:
    """The exact fit's estimated peak memory (bytes, :func:`exact_bytes`) and wall time
    (seconds, :func:`exact_seconds`) on n rows and d columns."""
    return {"memory_bytes": exact_bytes(n, d, dtype), "seconds": exact_seconds(n, evals)}


def product_seconds(n: int, d: int, rhs: int = 1 + PATHWISE_SAMPLES) -> float:
    """One product C V on n rows with ``rhs`` right-hand sides, float32 tiles: per kernel
    entry a GEMM over d + 2 augmented columns, one map and ``rhs`` multiply-adds."""
    return float(n) * n * (2.0 * (d + 2) + 2.0 * rhs) / PRODUCT_FLOPS


def refine_seconds(n: int, d: int, rbf: bool = True) -> float:
    """One gradient evaluation of ``refine`` on n rows of d columns: :data:`REFINE_CG`
    products with y − m and the probes (:func:`product_seconds`), and the contraction
    pass (per kernel entry a GEMM over the 1 + t right-hand sides, the kernel and its
    lengthscale sums): float32 tiles for an RBF (``rbf``), float64 ``Kernel.vjp`` slabs
    otherwise (:data:`CONTRACTION_FLOPS`)."""
    k = 1 + PROBES
    rate = CONTRACTION_FLOPS[0 if rbf else 1]
    contraction = float(n) * n * (2.0 * k + 4.0 * (d + 2) + 30.0) / rate
    return REFINE_CG * product_seconds(n, d, k) + contraction


def refine_evaluations(n: int, d: int, rbf: bool = True) -> int:
    """``refine="auto"``: as many gradient evaluations as :func:`refine_seconds` fits in
    :data:`REFINE_SECONDS`, at most :data:`REFINE_MAX`; none where fewer than
    :data:`REFINE_MIN` fit (a few L-BFGS steps move little)."""
    k = int(REFINE_SECONDS // refine_seconds(n, d, rbf))
    return min(REFINE_MAX, k) if k >= REFINE_MIN else 0


def sample_size(n: int) -> int:
    """Rows of the hyperparameter fit on the iterative path: the most, in hundreds, whose
    Cholesky fit the cost model puts within :data:`SUBSAMPLE_SECONDS` (at most n)."""
    rows = (SUBSAMPLE_SECONDS / (EXACT_EVALS * EXACT_N3_SECONDS)) ** (1 / 3)
    return min(n, max(2, 100 * int(rows // 100)))


def solve_seconds(n: int, d: int, rank: int | None = None) -> float:
    """Rough wall time of the posterior's solve by CG on n rows of d columns: the
    preconditioner's factor of ``rank`` columns (default its largest,
    :func:`~gpscale.models.exact_cg.precond_cap` with the memory unknown: the rank it
    needs grows as the noise shrinks against the signal, and only a fit knows the noise)
    and :data:`CG_PRODUCTS` products with the mean's and the variance cache's
    right-hand sides (:func:`product_seconds`)."""
    rank = precond_cap(n) if rank is None else min(int(rank), n)
    return float(n) * rank * rank / PRECOND_FLOPS + CG_PRODUCTS * product_seconds(n, d)


def iterative_seconds(n: int, d: int, rbf: bool = True) -> float:
    """Rough wall time of the exact GP solved by CG at its defaults on n rows of d
    columns: the θ fit on :func:`sample_size` rows (:func:`exact_seconds`), the
    posterior's solve (:func:`solve_seconds`, the preconditioner at its largest rank)
    and ``refine="auto"``'s evaluations (:func:`refine_evaluations`; ``rbf``: the
    kernel's contraction is the tiled one)."""
    return exact_seconds(sample_size(n)) + solve_seconds(n, d) \
        + refine_evaluations(n, d, rbf) * refine_seconds(n, d, rbf)


def too_large(n: int, d: int, dtype: torch.dtype = torch.float64, rbf: bool = True
              ) -> bool:
    """Whether the exact GP's ``solver="auto"`` leaves Cholesky for CG: from
    :data:`GUARD_MIN_N` rows on, when its n x n matrices would not fit in memory or when
    the cost model puts the iterative path (:func:`iterative_seconds`, ``rbf`` as there)
    ahead of it (:func:`exact_seconds`): for an RBF about 4 700 rows with d = 8, 5 100
    with d = 32; for other kernels about 5 100 and 6 000. The Cholesky fit reaches the
    optimum on every row, where the iterative one refines a sample's θ by stochastic
    steps; ``solver="cholesky"`` asks for it at any size."""
    if n < GUARD_MIN_N:
        return False
    est, avail = exact_cost(n, d, dtype), available_memory()
    return est["seconds"] > iterative_seconds(n, d, rbf) or (
        avail is not None and est["memory_bytes"] > 0.8 * avail)


def fit_seconds(n: int, d: int, solver: str = "auto", rbf: bool = True) -> float:
    """The exact GP's cost model with ``solver`` ("auto": the one :func:`too_large`
    picks): :func:`exact_seconds` or :func:`iterative_seconds`."""
    if solver == "auto":
        solver = "cg" if too_large(n, d, rbf=rbf) else "cholesky"
    return iterative_seconds(n, d, rbf) if solver == "cg" else exact_seconds(n)


def size_guard(n: int, d: int, dtype: torch.dtype = torch.float64) -> dict | None:
    """Warn (:class:`SizeWarning`) with the estimate when an exact Cholesky fit on n rows
    would not fit in memory or would take longer than :data:`MAX_FIT_SECONDS`; returns
    the estimate (None below :data:`GUARD_MIN_N` rows, where nothing is estimated)."""
    if n < GUARD_MIN_N:
        return None
    est = exact_cost(n, d, dtype)
    avail = available_memory()
    too_big = avail is not None and est["memory_bytes"] > 0.8 * avail
    too_slow = est["seconds"] > MAX_FIT_SECONDS
    if too_big or too_slow:
        mem = f"{est['memory_bytes'] / 2**30:.1f} GiB"
        have = f" of {avail / 2**30:.1f} GiB available" if avail is not None else ""
        warnings.warn(
            f"the exact GP on n={n} rows needs about {mem}{have} and about "
            f"{est['seconds'] / 60:.0f} minutes at one thread's speed (dense n x n "
            f"Cholesky, O(n³) per evaluation); methods that scale: "
            f"{', '.join(SCALABLE_METHODS)} "
            "(method=...), or fit on a subset of the rows", SizeWarning, stacklevel=3)
    return est


def kernel_choice_seconds(n: int, rows: int, candidates: int) -> float:
    """Rough wall time of choosing the kernel family (:mod:`gpscale.methods.kernel_choice`)
    on n rows: ``candidates`` exact fits on ``rows`` sampled rows; where the sample is
    every row, the chosen candidate is the exact method's fit itself, so one of them is
    the fit's own time, not extra."""
    if rows >= n:
        return (candidates - 1) * exact_seconds(n)
    return candidates * exact_seconds(rows)


def sgpr_seconds(n: int, m: int | None = None) -> float:
    """Rough wall time of an sgpr fit on n rows with m inducing inputs: the search on its
    sample of rows (when n is large enough to take one), then on all n rows; ∝ m²."""
    m = DEFAULT_M if m is None else m
    warm = SGPR_WARM_EVALS * WARM_ROWS if n > WARM_ABOVE else 0
    return SGPR_NM2_SECONDS * m * m * (warm + SGPR_FULL_EVALS * n)


def sgpr_bytes(n: int, d: int, m: int, dtype: torch.dtype = torch.float64) -> float:
    """Memory an sgpr fit holds: a few m × n matrices and the rows."""
    return (SGPR_WORDS_PER_NM * m + d + 2) * n * torch.empty((), dtype=dtype).element_size()


def rff_seconds(n: int, num_features: int = DEFAULT_FEATURES) -> float:
    """Rough wall time of an rff fit on n rows: the θ search on the rows it sees, plus one
    statistics pass over all n rows when the search ran on a sample; both ∝ p²."""
    scale = (num_features / DEFAULT_FEATURES) ** 2
    seen = AUTO_SUBSAMPLE if n > AUTO_ABOVE else n
    search = RFF_SEARCH_SECONDS * seen / RFF_SEARCH_ROWS * scale
    final = 2.0 * n * num_features**2 / PASS_FLOPS if n > AUTO_ABOVE else 0.0
    return search + final


# -- sgpr from passes over the rows --------------------------------------------------------
#: sgpr holds up to this many rows in memory and searches on all of them; past it (and for
#: rows not in memory) it searches on a sample of SGPR_SAMPLE_ROWS rows and refines by at
#: most SGPR_REFINE_ITER L-BFGS iterations of passes over all rows
#: (:mod:`gpscale.train.sgpr_passes`): at 250 000 rows sgpr_seconds is near half an hour
SGPR_HELD_ROWS = 250_000
SGPR_SAMPLE_ROWS, SGPR_REFINE_ITER = 20_000, 20
#: L-BFGS evaluations per refinement iteration (line searches included); seconds per
#: n·m² of an evaluation by passes (a statistics pass, ΦᵀΦ of the whitened features, and
#: a gradient pass of the plain ones), and the share of it the statistics pass alone, the
#: final one, takes; at n = 10⁶, m = 512 on one worker of one thread
#: (benchmarks/results/sgpr-scale/)
SGPR_EVALS_PER_ITER, SGPR_PASS_NM2_SECONDS, SGPR_STATS_SHARE = 1.25, 2.2e-10, 0.41


def sgpr_passes_seconds(n: int, m: int | None = None) -> float:
    """Rough wall time of sgpr reading its rows in passes (:mod:`gpscale.train.sgpr_passes`),
    one thread, no cluster: the in-memory search on its sample (:func:`sgpr_seconds` of
    min(n, :data:`SGPR_SAMPLE_ROWS`) rows), :data:`SGPR_REFINE_ITER` L-BFGS iterations on
    all n rows (each evaluation ∝ n m², :data:`SGPR_PASS_NM2_SECONDS`) and the final
    statistics pass."""
    m = DEFAULT_M if m is None else m
    search = sgpr_seconds(min(n, SGPR_SAMPLE_ROWS), m)
    evals = SGPR_REFINE_ITER * SGPR_EVALS_PER_ITER if n > SGPR_SAMPLE_ROWS else 0.0
    return search + SGPR_PASS_NM2_SECONDS * m * m * n * (evals + SGPR_STATS_SHARE)


def sgpr_passes_bytes(d: int, m: int, dtype: torch.dtype = torch.float64) -> float:
    """Memory sgpr holds reading its rows in passes, whatever n: its sample's in-memory
    search (:func:`sgpr_bytes`), one chunk of a pass (:data:`~gpscale.sizes.CHUNK_BYTES`)
    and a few m × m matrices."""
    item = torch.empty((), dtype=dtype).element_size()
    return sgpr_bytes(SGPR_SAMPLE_ROWS, d, m, dtype) + CHUNK_BYTES + 10.0 * m * m * item
