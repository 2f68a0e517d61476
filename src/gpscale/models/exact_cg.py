"""The exact GP's iterative solver: no n x n matrix, no O(n³) step.

A strategy of :class:`~gpscale.models.exact.ExactGP` (``solver=ConjugateGradients()``):
the weights

    α = C⁻¹ (y − m),   C = K(X, X) + σ²I,

come from preconditioned conjugate gradients (Hestenes & Stiefel 1952; as in BBMM,
Gardner et al. 2018): every product C V is a pass over row blocks of K
(:class:`~gpscale.kernels.operator.KernelOperator`, float32 tiles with float64 sums
by default), the preconditioner is P = L Lᵀ + σ²I applied by Woodbury, with L from
randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2023;
:func:`~gpscale.models.precond.low_rank_factor`), grown until tr(K − LLᵀ) ≤ nσ²/4 or its
cap (:func:`precond_cap`), and the variance cache's right-hand sides ride in the same
passes as y − m (:mod:`gpscale.models.iterative_variance`).

Rows merged from copies of one input (:mod:`gpscale.models.copies`) carry noise σ²/c:
C = K + σ² diag(1/c), and the preconditioner is P = S⁻¹(L Lᵀ + σ²I)S⁻¹ with S = diag(√c)
and L from randomly pivoted Cholesky of S K S (the system C is similar to).

**Stop rule, in the data's units.** CG stops when ‖r‖ ≤ tol · ‖y − m‖, r = y − m − Cα̂.
The error of the posterior mean at the training inputs is then K C⁻¹ r, and K C⁻¹ =
I − σ²C⁻¹ has eigenvalues in [0, 1), so its root mean square over the n inputs is at
most tol × RMS(y − m): with standardised y, ``tol`` = 1e-3 bounds it by a thousandth
of y's standard deviation (the error at a test point near the data is of the same
size). Predictive means then agree with a Cholesky solve to about ``tol``.

The NLML's stochastic gradient on every row, from the same solves:
:mod:`gpscale.models.exact_cg_gradient`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import torch

from ..deadline import Deadline
from ..kernels.cluster_operator import ClusterOperator
from ..kernels.operator import KernelOperator
from ..linalg.cg import cg
from ..linalg.lowrank import low_rank_inverse
from ..progress import MORE_TIME, progress_bar
from .base import MeanAndVariance
from .iterative_variance import LanczosVariance, PathwiseVariance, variance_cache
from .precond import check_preconditioner, low_rank_factor

__all__ = ["ConjugateGradients", "DENSE_OBJECTIVE_MAX",
           "FLOAT32_MIN_NOISE", "LOOSE_TOL", "PRECOND_BYTES", "PRECOND_MIN_RANK", "PRECOND_TOL",
           "FLOAT32_MIN_TOL", "precond_cap"]

#: the smallest ``tol`` solved with float32 tiles: their rounding (about 1e-7 per entry,
#: times |K||α|, which grows as σ² shrinks) leaves a true relative residual of up to a
#: few 1e-4 that the CG recurrence no longer sees
FLOAT32_MIN_TOL = 1e-3
#: rpchol's stop, tr(K − LLᵀ) ≤ PRECOND_TOL · nσ²: a mean excess of 1/4 over the
#: preconditioned spectrum's floor (benchmarks/results/design-measurements.md)
PRECOND_TOL = 0.25
#: float32 tiles need σ² ≥ this · √n · mean k(x, x), 8 x float32's unit roundoff, or CG
#: diverges (benchmarks/results/design-measurements.md)
FLOAT32_MIN_NOISE = 8 * 2.0**-24
#: memory for the preconditioner's factor L (n x r) when ``precond_rank`` is None ...
PRECOND_BYTES = 3 * 2**29
#: ... but at least this rank where half the available memory holds it: the rank a good
#: preconditioner needs grows with n (benchmarks/results/exact-cluster/fit-198000/)
PRECOND_MIN_RANK = 4096
#: a solve that reaches its deadline ends once every column's relative residual is within
#: this (ten times the default ``tol``: the posterior mean within 1 % of y's spread)
LOOSE_TOL = 1e-2
#: a solve in float32 tiles whose largest relative residual climbs above 1 and DIVERGED
#: times its best, or finds no new best in STALLED iterations, is solved again in
#: float64 (their rounding outweighed σ² for this kernel's values:
#: benchmarks/results/design-measurements.md)
DIVERGED, STALLED = 10.0, 20
#: ``objective()`` (the exact NLML by one Cholesky) is offered up to this many rows
DENSE_OBJECTIVE_MAX = 8000

_CACHES = {"pathwise": PathwiseVariance, "lanczos": LanczosVariance}
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: the preconditioners CG builds here (GRIEF's needs a separable kernel: ADMM's option)
_PRECONDITIONERS = ("rpchol", "pivchol", "none")


def precond_cap(n: int, itemsize: int = 8, available: int | None = None) -> int:
    """The largest rank of the default preconditioner's factor (n x r, ``itemsize``
    bytes an entry): what :data:`PRECOND_BYTES` holds, raised to
    :data:`PRECOND_MIN_RANK` where that is more and ``available`` bytes (None: not
    known) hold twice the factor (else to the rank that half of them hold); at most n."""
    rank = PRECOND_BYTES // (n * itemsize)
    if rank < PRECOND_MIN_RANK:
        room = PRECOND_MIN_RANK if available is None else available // (2 * n * itemsize)
        rank = max(rank, min(PRECOND_MIN_RANK, room))
    return min(n, rank)


class ConjugateGradients:
    """How an :class:`~gpscale.models.exact.ExactGP` solves by preconditioned CG (see
    the module docstring).

    Parameters
    ----------
    tol : CG stops at ‖y − m − Cα‖ ≤ tol ‖y − m‖ (module docstring).
    max_iter : most CG iterations (each one pass over K).
    precond_rank : the largest rank r of the preconditioner P = L Lᵀ + σ²I (0: none;
        None: :func:`precond_cap`, i.e. as many columns as fit in :data:`PRECOND_BYTES`,
        at least :data:`PRECOND_MIN_RANK` where memory allows, at most n).
    precond_tol : "rpchol" stops adding columns once tr(K − L Lᵀ) ≤ precond_tol · n σ²
        (the preconditioned spectrum is about 1 + eig(K − LLᵀ)/σ², so this bounds its
        mean excess over 1). Default :data:`PRECOND_TOL`.
    precond : how L is found (:mod:`gpscale.models.precond`): "rpchol" (randomly pivoted
        Cholesky in blocks), "pivchol" (greedy pivoted Cholesky, exactly ``precond_rank``
        columns) or "none".
    block : rows per block of a product (the unit of work a distributed product sends
        to a worker; default :data:`~gpscale.kernels.operator.BLOCK_ROWS`).
    block_dtype : "float32" (default): tiles of K formed and multiplied in float32 and
        summed in float64 (stationary kernels; about 1e-7 relative error per entry, far
        below what ``tol`` = 1e-3 allows, and faster than float64 tiles), or
        "float64" (used anyway when ``tol`` < :data:`FLOAT32_MIN_TOL` or σ² is too small
        for float32's rounding: :meth:`solve_dtype`). Predictions are
        always computed in float64.
    variance : "auto" (pathwise sampling where the kernel has a spectral density, else
        Lanczos), "pathwise" or "lanczos" (:mod:`~gpscale.models.iterative_variance`).
    variance_options : ``num_samples``, ``num_features`` (pathwise) or ``block_size``,
        ``steps`` (lanczos).
    seed : seeds the variance cache's draws and the preconditioner's pivots.
    client : a dask.distributed Client: the products K V run on its workers
        (:class:`gpscale.kernels.cluster_operator.ClusterOperator`), and the preconditioner's factor
        is built and kept there (:class:`gpscale.kernels.cluster_operator.ClusterFactor`); not saved
        with the model.

    Held for prediction (saved with the model): ``alpha``, ``solved_theta`` (the
    hyperparameters they were solved for; empty: never solved) and the variance
    ``cache``; ``solve_info`` says how the last solve went, ``refined`` how θ was
    refined on every row (empty: it was not).
    """

    name = "cg"

    @property
    def title(self) -> str:
        """The summary's header: the solver, and how good its variances are."""
        note = getattr(self.cache, "note", None)
        return "Exact GP (iterative: preconditioned CG)" + ("" if note is None
                                                           else f"; {note()}")

    def __init__(self, tol: float = 1e-3, max_iter: int = 1000,
                 precond_rank: int | None = None, precond_tol: float = PRECOND_TOL,
                 precond: str = "rpchol", block: int | None = None,
                 block_dtype: str = "float32", variance: str = "auto",
                 variance_options: dict[str, Any] | None = None, seed: int = 0,
                 client: Any = None) -> None:
        if not 0.0 < tol < 1.0:
            raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
        if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
            raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
        check_preconditioner(precond, 0 if precond_rank is None else precond_rank,
                             _PRECONDITIONERS)
        if not precond_tol >= 0.0:
            raise ValueError(f"precond_tol must be >= 0, got {precond_tol!r}")
        if block_dtype not in _DTYPES:
            raise ValueError(f"block_dtype must be 'float64' or 'float32', got {block_dtype!r}")
        self.tol, self.max_iter, self.precond_rank = float(tol), max_iter, precond_rank
        self.precond, self.precond_tol = precond, float(precond_tol)
        self.block, self.block_dtype, self.seed = block, block_dtype, seed
        self.variance, self.variance_options = variance, dict(variance_options or {})
        #: a dask.distributed Client whose workers compute the products (not saved)
        self.client = client
        self.cache: Any = None
        self.alpha: torch.Tensor | None = None
        self.solved_theta: torch.Tensor | None = None
        self.solve_info: dict[str, Any] = {}
        self.refined: dict[str, Any] = {}
        self.rank_used = 0

    def attach(self, model: Any) -> None:
        """Ready the solver for ``model``'s kernel and rows (the variance cache's kind
        depends on the kernel)."""
        self.cache = variance_cache(self.variance, model.kernel, self.variance_options)
        self.alpha = torch.zeros_like(model.y)
        self.solved_theta = torch.zeros(0, dtype=model.X.dtype, device=model.X.device)

    # -- solving --------------------------------------------------------------------
    def solve_dtype(self, model: Any) -> str:
        """The tiles' dtype in :meth:`solve`: ``block_dtype``, but float64 whenever
        ``tol`` < :data:`FLOAT32_MIN_TOL` or σ² < :data:`FLOAT32_MIN_NOISE` · √n · mean
        k(x, x): float32 tiles cannot reach the tolerance, or their rounding (relative
        2⁻²⁴ an entry, about √n of it in a row's product) outweighs σ² and CG diverges."""
        if self.tol < FLOAT32_MIN_TOL or self.block_dtype == "float64":
            return "float64"
        head = model.X[:1024]
        signal = float(model.kernel.diag(head).detach().mean()) if head.shape[0] else 0.0
        noise = float(model.noise.detach())
        return "float64" if noise < FLOAT32_MIN_NOISE * math.sqrt(model.n) * signal \
            else "float32"

    def operator(self, model: Any, block_dtype: str | None = None) -> KernelOperator:
        """C = K + σ²I (σ² diag(1/c) with copies) as a :class:`KernelOperator` at the
        model's current hyperparameters."""
        dt = _DTYPES[block_dtype or self.block_dtype]
        noise = model.noise_diagonal()
        if self.client is not None:
            return ClusterOperator(model.kernel, model.X, noise,
                                               self.client, self.block, dt)
        return KernelOperator(model.kernel, model.X, noise, self.block, dt)

    def precond_factor(self, model: Any, op: KernelOperator) -> Any:
        """L (n x r) of the preconditioner at the current hyperparameters, of rank at most
        ``precond_rank`` (:func:`gpscale.models.precond.low_rank_factor`; "rpchol" grown
        until tr(K − LLᵀ) ≤ ``precond_tol`` · nσ²); None for "none" or rank 0. With
        copies, L is a factor of S K S, S = diag(√c). "rpchol" builds L where ``op``
        keeps it (:meth:`KernelOperator.factor_store`): here, or with a ``client`` on the
        workers, and the default rank's memory is that place's."""
        n = model.n
        rank = min(self.precond_rank, n) if self.precond_rank is not None else \
            precond_cap(n, model.X.element_size(), op.factor_memory())
        scale = model.copy_scale()
        L = low_rank_factor(
            self.precond, model.kernel, model.X, rank, scale=scale, seed=self.seed,
            abs_tol=self.precond_tol * n * float(model.noise.detach()),
            store=(lambda: op.factor_store(rank, scale)))
        self.rank_used = 0 if L is None else L.shape[1]
        return L

    @torch.no_grad()
    def rank_for(self, sample: Any, n: int) -> int:
        """The rank :meth:`precond_factor` will reach on n rows, estimated from ``sample``,
        an exact GP fitted on m rows drawn uniformly from them: "rpchol" on the sample to
        the same trace error per row, tr(K − LLᵀ) ≤ ``precond_tol``·mσ². K's eigenvalues
        on m rows are about m/n times those on n rows (the Nyström scaling), so the tail
        past a rank r well below m meets the tolerance on both; where the sample needs
        m/2 or more, the rank on n rows is at least that and the cap is taken."""
        cap = self.precond_rank if self.precond_rank is not None else precond_cap(n)
        if self.precond != "rpchol":
            return min(cap, n)
        m = sample.n
        L = low_rank_factor("rpchol", sample.kernel, sample.X, max(1, m // 2),
                            scale=sample.copy_scale(), seed=self.seed,
                            abs_tol=self.precond_tol * m * float(sample.noise.detach()))
        rank = 0 if L is None else L.shape[1]
        return min(cap, n) if rank >= m // 2 else min(rank, cap)

    def preconditioner(self, model: Any, L: Any, gram: torch.Tensor | None = None):
        """R ↦ P⁻¹R, P = L Lᵀ + σ²I by Woodbury (with copies: S⁻¹(L Lᵀ + σ²I)S⁻¹,
        S = diag(√c)); None when there is no factor."""
        if L is None:
            return None
        return low_rank_inverse(L, model.noise.detach(), gram=gram, scale=model.copy_scale())

    def run_cg(self, model: Any, op: KernelOperator, B: torch.Tensor, precond: Any,
               start: torch.Tensor | None, callback: Any = None, stop: Any = None):
        """The batched preconditioned CG with C behind both the posterior's solve and
        the NLML's gradient (``callback``, ``stop``: :func:`gpscale.linalg.cg.cg`'s).
        Returns (solution, CGInfo, the operator it ended with): a solve in float32 tiles
        that diverges or stalls (:data:`DIVERGED`, :data:`STALLED`) is ended and run
        again in float64 tiles, which the solver keeps from then on (``block_dtype``)."""
        best, since, diverged = math.inf, 0, False

        def watch(rel: torch.Tensor) -> bool:
            nonlocal best, since, diverged
            if op.block_dtype == torch.float32:
                top = float(rel.max())
                best, since = (top, 0) if top < best else (best, since + 1)
                diverged = top > max(1.0, DIVERGED * best) or since >= STALLED
            return diverged or (stop is not None and stop(rel))

        sol, info = cg(op.matmul, B, precond, start, self.tol, self.max_iter, callback, watch)
        if not diverged:
            return sol, info, op
        self.block_dtype = "float64"
        warnings.warn("CG diverged or stalled with float32 kernel tiles (their rounding "
                      "outweighs the noise for these hyperparameters); solving in float64 "
                      "from here on", RuntimeWarning, stacklevel=3)
        return self.run_cg(model, self.operator(model, "float64"), B, precond, start,
                           callback, stop)

    @torch.no_grad()
    def solve(self, model: Any, x0: torch.Tensor | None = None, warm: bool = True,
              progress: bool | None = False, deadline: Deadline | None = None
              ) -> dict[str, Any]:
        """α = C⁻¹(y − m) and the variance cache, in one batched PCG. Starts from ``x0``
        (α's start), else (``warm``) from the α and cache held, else from zero.
        ``progress``: a bar of CG's iterations and its largest relative residual
        (:func:`gpscale.progress.progress_bar`). ``deadline``: once it has passed, CG
        ends as soon as every relative residual is within :data:`LOOSE_TOL` (and warns,
        saying the residual it reached). Returns (and keeps in ``solve_info``)
        iterations, residual, passes, seconds, ``residuals``: the largest relative
        residual after each iteration, and ``stopped``: "time allowance" when the
        deadline ended it."""
        t0 = time.perf_counter()
        op = self.operator(model, self.solve_dtype(model))
        precond = self.preconditioner(model, self.precond_factor(model, op))
        t_pre = time.perf_counter() - t0
        r = model.y - model.mean_constant.detach()
        probes = self.cache.probes(model.kernel, model.X, model.noise_diagonal(), self.seed)
        B = torch.cat([r[:, None], probes], 1)
        start = None
        if warm and self.solved_theta.numel():
            start = B.new_zeros(B.shape)
            start[:, 0] = self.alpha
            old = self.cache.W
            if isinstance(self.cache, PathwiseVariance) and old is not None and \
                    old.shape == probes.shape:
                start[:, 1:] = old
        if x0 is not None:
            start = B.new_zeros(B.shape) if start is None else start
            start[:, 0] = x0.to(B)
        residuals: list[float] = []
        with progress_bar(progress, unit="pass", desc=f"CG on {model.n} rows") as bar:
            # no total: max_iter is a guard, and an ETA to it would mislead
            def step(iteration: int, rel: torch.Tensor) -> None:
                residuals.append(float(rel.max()))
                bar.update()
                bar.set_postfix(residual=f"{residuals[-1]:.2e}", target=f"{self.tol:g}")

            def late(rel: torch.Tensor) -> bool:
                return deadline is not None and deadline.passed() and \
                    float(rel.max()) <= LOOSE_TOL

            sol, info, op = self.run_cg(model, op, B, precond, start, step, late)
        stopped = "" if info.converged or not late(info.rel_residual) else "time allowance"
        self.alpha = sol[:, 0].clone()
        self.cache.finish(sol[:, 1:], op)
        self.solved_theta = model.theta()
        self.solve_info = {
            "iterations": info.iterations, "residual": float(info.rel_residual[0]),
            "residual_max": float(info.rel_residual.max()) if B.shape[1] else 0.0,
            "converged": info.converged, "passes": op.passes,
            "precond_rank": self.rank_used, "precond_seconds": t_pre,
            "seconds": time.perf_counter() - t0, "residuals": residuals, "stopped": stopped}
        if stopped:
            warnings.warn(f"CG stopped at the fit's time allowance after {info.iterations} "
                          "iterations, at relative residual "
                          f"{float(info.rel_residual.max()):.2e} (tol {self.tol:g} asked): "
                          "predictive means are about that fraction of y's spread from the "
                          f"exact solve's. {MORE_TIME}",
                          RuntimeWarning, stacklevel=3)
        elif not info.converged:
            warnings.warn(f"CG stopped after {info.iterations} iterations at relative "
                          f"residual {float(info.rel_residual.max()):.2e} > tol {self.tol:g};"
                          " raise max_iter or precond_rank", RuntimeWarning, stacklevel=3)
        return self.solve_info

    def ensure_solved(self, model: Any) -> None:
        """Solve unless α and the cache are for the model's current hyperparameters."""
        theta = model.theta()
        if self.solved_theta.shape != theta.shape or not torch.equal(self.solved_theta, theta):
            self.solve(model)

    def freeze(self) -> None:
        """Let go of the cluster (predictions compute here); the solution stays."""
        self.client = None

    # -- prediction -----------------------------------------------------------------
    @torch.no_grad()
    def predict(self, model: Any, Xs: torch.Tensor, include_noise: bool, block: int,
                full_cov: bool = False) -> MeanAndVariance:
        """Posterior mean K(X*, X)α + m and variance of f at ``Xs`` (of y with
        ``include_noise``: + σ²) from α and the variance cache; test points in blocks."""
        if full_cov:
            raise ValueError("full_cov=True needs the Cholesky solver (the CG solver "
                             "estimates variances only); move the hyperparameters to a "
                             "few thousand rows with model.with_solver('cholesky', X, y)")
        self.ensure_solved(model)
        op = self.operator(model, "float64")
        W = torch.cat([self.alpha[:, None], self.cache.W], 1)
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s:s + block]
            KW = op.cross_matmul(Xb, W)
            means.append(KW[:, 0] + model.mean_constant)
            var = self.cache.variance(Xb, KW[:, 1:], model.kernel.diag(Xb))
            variances.append(var + model.noise if include_noise else var)
        if not means:
            empty = Xs.new_zeros(0)
            return MeanAndVariance(empty, empty.clone())
        return MeanAndVariance(torch.cat(means), torch.cat(variances))

    def check_objective(self, model: Any) -> None:
        """The exact NLML takes one Cholesky: offered up to :data:`DENSE_OBJECTIVE_MAX`
        rows; beyond, hyperparameters come from a sample and :class:`StochasticGradient`."""
        if model.n > DENSE_OBJECTIVE_MAX:
            raise NotImplementedError(
                f"the exact GP solved by CG has no NLML value at n = {model.n} > "
                f"{DENSE_OBJECTIVE_MAX} (its gradient is estimated: StochasticGradient); "
                "fit hyperparameters on a subsample with the Cholesky solver and move them "
                "with ExactGP.with_solver")

    # -- persistence ----------------------------------------------------------------
    def state(self, model: Any) -> dict[str, torch.Tensor]:
        """α, the hyperparameters they were solved for, and the variance cache
        (``cache.*``); solves first if the held solution is not for the current θ."""
        self.ensure_solved(model)
        state = {"alpha": self.alpha, "solved_theta": self.solved_theta}
        state.update({f"cache.{k}": v for k, v in self.cache.state().items()})
        return state

    def load(self, state: dict[str, torch.Tensor], like: torch.Tensor
             ) -> tuple[set[str], list[str]]:
        """Take α, solved_theta and the cache from a saved state: (the keys taken, the
        keys missing)."""
        taken, missing = {k for k in state if k.startswith("cache.")}, []
        for key in ("alpha", "solved_theta"):
            if key in state:
                setattr(self, key, state[key].to(like.device, like.dtype))
                taken.add(key)
            else:
                missing.append(key)
        for name in list(self.cache.state()):
            key = f"cache.{name}"
            if key in state:
                setattr(self.cache, name, state[key].to(like))
            else:
                missing.append(key)
        return taken, missing

    def apply(self, fn: Any) -> None:
        """``.to(device / dtype)`` of the model moves the solution and the cache too."""
        for key in ("alpha", "solved_theta"):
            value = getattr(self, key)
            if value is not None:
                setattr(self, key, fn(value))
        for name, value in self.cache.state().items():
            if value is not None:
                setattr(self.cache, name, fn(value))

    def state_bytes(self, model: Any) -> dict[str, int]:
        """Bytes held for prediction: the rows (X, y, their copies), α, and the variance
        cache."""
        size = lambda t: int(t.numel() * t.element_size())  # noqa: E731
        copies = model.copies
        rows = size(model.X) + size(model.y) + (
            0 if copies is None else size(copies.counts) + size(copies.spread))
        return {"rows": rows, "weights": size(self.alpha),
                "variance_cache": sum(size(t) for t in self.cache.state().values())}

    def config(self, model: Any) -> dict[str, Any]:
        """The solver's part of the model's config (what :meth:`from_config` reads)."""
        self.ensure_solved(model)
        return {
            "solver": "cg", "tol": self.tol, "max_iter": self.max_iter,
            "precond_rank": self.precond_rank, "precond": self.precond,
            "precond_tol": self.precond_tol, "block": self.block,
            "block_dtype": self.block_dtype, "seed": self.seed,
            "variance": self.cache.kind, "variance_options": self.cache.config(),
            "cg_iterations": self.solve_info.get("iterations"),
            "cg_residual": self.solve_info.get("residual"),
            "cg_converged": self.solve_info.get("converged"),
            "precond_rank_used": self.solve_info.get("precond_rank"),
            "refined": dict(self.refined), "bytes": self.state_bytes(model),
            "variance_error": getattr(self.cache, "error", dict)()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ConjugateGradients:
        return cls(tol=config["tol"], max_iter=config["max_iter"],
                   precond_rank=config["precond_rank"], precond=config.get("precond", "rpchol"),
                   precond_tol=config.get("precond_tol", 4.0), block=config["block"],
                   block_dtype=config["block_dtype"], variance=config["variance"],
                   variance_options=dict(config["variance_options"]), seed=config["seed"])

    def restore(self, config: dict[str, Any], state: dict[str, torch.Tensor],
                dtype: torch.dtype) -> None:
        """After :meth:`attach` on a loaded model: an empty cache of the saved shapes and
        the saved solve's summary, into which the saved tensors are then loaded."""
        n, d = state["X"].shape
        self.cache = _CACHES[config["variance"]].empty(self.variance_options, n, d, dtype)
        self.solve_info = {"iterations": config.get("cg_iterations"),
                           "residual": config.get("cg_residual"),
                           "converged": config.get("cg_converged"),
                           "precond_rank": config.get("precond_rank_used")}
        self.solved_theta = torch.zeros(state["solved_theta"].shape, dtype=dtype)
        self.refined = dict(config.get("refined") or {})
