"""Exact GP regression by iterative solves: no n x n matrix, no O(n³) step.

Same model as :class:`~gpscale.models.exact.ExactGP` (y = f(X) + ε, f ~ GP(m, k),
ε ~ N(0, σ²), m zero or constant, the same parameters), but the weights

    α = C⁻¹ (y − m),   C = K(X, X) + σ²I,

come from preconditioned conjugate gradients (Hestenes & Stiefel 1952; as in BBMM,
Gardner et al. 2018): every product C V is a pass over row blocks of K
(:class:`~gpscale.linalg.operator.KernelOperator`, float32 tiles with float64 sums
by default), the preconditioner is P = L Lᵀ + σ²I applied by Woodbury, with L from
randomly pivoted Cholesky (Chen, Epperly, Tropp & Webber 2023;
:func:`~gpscale.linalg.lowrank.rp_cholesky`), grown until tr(K − LLᵀ) ≤ nσ²/4 or its
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

Hyperparameters are not learned here (no stochastic log-determinant yet): fit them on
a subsample (:class:`ExactGP`) and hand them over with :meth:`IterativeExactGP.from_exact`.
"""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

import torch
from torch import nn

from ..kernels import Kernel
from ..linalg.cg import cg
from ..linalg.cluster_operator import ClusterOperator
from ..linalg.lowrank import low_rank_inverse, pivoted_cholesky, rp_cholesky
from ..linalg.operator import KernelOperator
from ..params import Positive
from ..progress import progress_bar
from ..validation import as_test_inputs, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data
from .copies import Copies, MergedRows, keep_copies, noise_diagonal
from .exact import ExactGP, gaussian_nll
from .iterative_variance import LanczosVariance, PathwiseVariance, variance_cache

__all__ = ["IterativeExactGP", "DENSE_OBJECTIVE_MAX", "PRECOND_BYTES", "PRECOND_MIN_RANK",
           "PRECOND_TOL", "FLOAT32_MIN_TOL", "precond_cap"]

#: the smallest ``tol`` solved with float32 tiles: their rounding (about 1e-7 per entry,
#: times |K||α|, which grows as σ² shrinks) leaves a true relative residual of up to a
#: few 1e-4 that the CG recurrence no longer sees
FLOAT32_MIN_TOL = 1e-3
#: rpchol's stop, tr(K − LLᵀ) ≤ PRECOND_TOL · nσ²: a mean excess of 1/4 over the
#: preconditioned spectrum's floor. On elevators fold 0 (14 940 rows, σ² = 0.14, 65
#: right-hand sides, one thread) the earlier 4.0 stopped at rank 128 and CG took 67
#: iterations (166 s); 0.25 gave rank 256, 11 iterations, 45 s (0.05: the same rank);
#: the mean excess bounds the iterations only loosely, a few large eigenvalues of
#: K − LLᵀ are what the extra columns remove. (Those counts were with the Woodbury apply
#: in float32, which stalled CG: :func:`~gpscale.linalg.lowrank.low_rank_inverse`. In
#: float64, elevators fold 1 at the sample's θ: rank 256, tr(K − LLᵀ) = 0.013 nσ², 5
#: iterations; rank 1 024, 3.) Past :func:`precond_cap` the rank stops there.
PRECOND_TOL = 0.25
#: memory for the preconditioner's factor L (n x r) when ``precond_rank`` is None ...
PRECOND_BYTES = 3 * 2**29
#: ... but at least this rank (past about 49 000 float64 rows) where half the available
#: memory holds it (:func:`precond_cap`). The rank a good preconditioner needs grows with
#: n: on 198 000 rows of the exact-cluster set (8 inputs, σ² = 0.015 in y's units), the
#: trace error tr(K − LLᵀ)/nσ² was 13.1, 5.9 and 2.3 at ranks 1 016 (what PRECOND_BYTES
#: allows there), 2 048 and 4 096, and after 20 CG iterations y's relative residual was
#: 1.02, 0.28 and 0.024 (benchmarks/results/exact-cluster/fit-198000/session20). At
#: rank 4 096 (6.5 GB) the factor took 105 s, the whole preconditioner with LᵀL and its
#: Woodbury factor 184-199 s in the whole fits: about two of their 41 passes
PRECOND_MIN_RANK = 4096
#: ``objective()`` (the exact NLML by one Cholesky) is offered up to this many rows
DENSE_OBJECTIVE_MAX = 8000
_CACHES = {"pathwise": PathwiseVariance, "lanczos": LanczosVariance}
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
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


class IterativeExactGP(MergedRows, GPModel):
    """Exact GP with α = C⁻¹(y − m) by preconditioned CG (see the module docstring).

    Parameters
    ----------
    kernel, X, y, noise, mean, dtype, device, noise_floor : as :class:`ExactGP`.
    mean_constant : the constant mean m (with ``mean="constant"``).
    tol : CG stops at ‖y − m − Cα‖ ≤ tol ‖y − m‖ (module docstring).
    max_iter : most CG iterations (each one pass over K).
    precond_rank : the largest rank r of the preconditioner P = L Lᵀ + σ²I (0: none;
        None: :func:`precond_cap`, i.e. as many columns as fit in :data:`PRECOND_BYTES`,
        at least :data:`PRECOND_MIN_RANK` where memory allows, at most n).
    precond_tol : "rpchol" stops adding columns once tr(K − L Lᵀ) ≤ precond_tol · n σ²
        (the preconditioned spectrum is about 1 + eig(K − LLᵀ)/σ², so this bounds its
        mean excess over 1). Default :data:`PRECOND_TOL`.
    precond : how L is found: "rpchol" (randomly pivoted Cholesky in blocks), "pivchol"
        (greedy pivoted Cholesky, one kernel row per pivot, exactly ``precond_rank``
        columns) or "none".
    block : rows per block of a product (the unit of work a distributed product sends
        to a worker; default :data:`~gpscale.linalg.operator.BLOCK_ROWS`).
    block_dtype : "float32" (default): tiles of K formed and multiplied in float32 and
        summed in float64 (stationary kernels; about 1e-7 relative error per entry, far
        below what ``tol`` = 1e-3 allows, and faster than float64 tiles), or
        "float64" (used anyway when ``tol`` < :data:`FLOAT32_MIN_TOL`). Predictions are
        always computed in float64.
    variance : "auto" (pathwise sampling where the kernel has a spectral density, else
        Lanczos), "pathwise" or "lanczos" (:mod:`~gpscale.models.iterative_variance`).
    variance_options : ``num_samples``, ``num_features`` (pathwise) or ``block_size``,
        ``steps`` (lanczos).
    seed : seeds the variance cache's draws.
    copies : as :class:`ExactGP` (rows that are means of copies of one input).
    client : a dask.distributed Client: the products K V run on its workers
        (:class:`gpscale.linalg.cluster_operator.ClusterOperator`), and the
        preconditioner's factor is built and kept there
        (:class:`gpscale.linalg.cluster_operator.ClusterFactor`); not saved with the model.
    """

    title = "Exact GP (iterative: preconditioned CG)"
    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(
        self, kernel: Kernel, X, y, noise: float = 0.1, mean: str = "zero",
        dtype: torch.dtype = torch.float64, device: torch.device | str | None = None,
        noise_floor: float | None = None, *, mean_constant: float = 0.0,
        tol: float = 1e-3, max_iter: int = 1000, precond_rank: int | None = None,
        precond_tol: float = PRECOND_TOL, precond: str = "rpchol", block: int | None = None,
        block_dtype: str = "float32", variance: str = "auto",
        variance_options: dict[str, Any] | None = None, seed: int = 0, client: Any = None,
        copies: Copies | None = None,
    ) -> None:
        super().__init__()
        if mean not in ("zero", "constant"):
            raise ValueError(f"mean must be 'zero' or 'constant', got {mean!r}")
        if not 0.0 < tol < 1.0:
            raise ValueError(f"tol must lie in (0, 1), got {tol!r}")
        if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
            raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
        if precond not in _PRECONDITIONERS:
            raise ValueError(f"precond must be one of {_PRECONDITIONERS}, got {precond!r}")
        if precond_rank is not None and (isinstance(precond_rank, bool) or not isinstance(
                precond_rank, int) or precond_rank < 0):
            raise ValueError(f"precond_rank must be None or an int >= 0, got {precond_rank!r}")
        if not precond_tol >= 0.0:
            raise ValueError(f"precond_tol must be >= 0, got {precond_tol!r}")
        if block_dtype not in _DTYPES:
            raise ValueError(f"block_dtype must be 'float64' or 'float32', got {block_dtype!r}")
        X, y = check_xy(X, y, dtype, device)
        self.kernel = kernel.to(dtype=dtype, device=X.device)
        if noise_floor is not None:
            IterativeExactGP.noise.set_floor(self, noise_floor)
            if not float(noise) > noise_floor:
                raise ValueError(f"the initial noise ({float(noise):g}) must be above the "
                                 f"noise floor ({noise_floor:g}); pass a larger noise")
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.mean_kind = mean
        self.mean_constant = nn.Parameter(
            torch.tensor(float(mean_constant) if mean == "constant" else 0.0, dtype=dtype,
                         device=X.device), requires_grad=(mean == "constant"))
        self.register_buffer("X", X)
        self.register_buffer("y", y)
        keep_copies(self, copies)
        self.register_buffer("alpha", torch.zeros_like(y))
        #: the hyperparameters α and the cache were solved for (empty: never solved)
        self.register_buffer("solved_theta", torch.zeros(0, dtype=dtype, device=X.device))
        self.tol, self.max_iter, self.precond_rank = float(tol), max_iter, precond_rank
        self.precond, self.precond_tol = precond, float(precond_tol)
        self.block, self.block_dtype, self.seed = block, block_dtype, seed
        #: a dask.distributed Client whose workers compute the products (not saved)
        self.client = client
        self.cache = variance_cache(variance, self.kernel, dict(variance_options or {}))
        self.solve_info: dict[str, Any] = {}
        #: how θ was refined on every row (evaluations, seconds, reason; empty: it was not)
        self.refined: dict[str, Any] = {}
        self.to(X.device)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def noise_diagonal(self) -> torch.Tensor | float:
        """σ² of each row (n,) with copies (σ²/c), else σ² (0-d), detached."""
        return noise_diagonal(self.noise.detach(), self.copies)

    def copy_scale(self) -> torch.Tensor | None:
        """√c with copies (the preconditioner's S), else None."""
        copies = self.copies
        return None if copies is None else copies.counts.sqrt()

    @classmethod
    def from_exact(cls, exact: ExactGP, X=None, y=None, *, solve: bool = True,
                   noise_floor: float | None = None, **options: Any) -> IterativeExactGP:
        """The same hyperparameters (kernel, σ², mean, noise floor) on the rows X, y
        (default: the exact model's own), solved unless ``solve=False``.
        ``noise_floor``: another floor (below σ²; σ² keeps its value).
        ``options``: the solver keywords of :class:`IterativeExactGP`."""
        X = exact.X if X is None else X
        y = exact.y if y is None else y
        own = ExactGP.noise.floor_of(exact)
        floor = own if noise_floor is None else float(noise_floor)
        options.setdefault("copies", exact.copies if y is exact.y else None)
        model = cls(copy.deepcopy(exact.kernel), X, y, noise=float(exact.noise.detach()),
                    mean=exact.mean_kind, dtype=exact.X.dtype, device=exact.X.device,
                    noise_floor=None if floor == ExactGP.noise.floor else floor,
                    mean_constant=float(exact.mean_constant.detach()), **options)
        with torch.no_grad():  # the raw numbers, so that σ² and m are bit-identical
            if floor == own:
                model.raw_noise.copy_(exact.raw_noise)
            model.mean_constant.copy_(exact.mean_constant)
        if solve:
            model.solve()
        return model

    # -- solving --------------------------------------------------------------------
    def _theta(self) -> torch.Tensor:
        flat = [p.detach().reshape(-1).to(self.X.dtype) for p in self.parameters()]
        return torch.cat(flat) if flat else self.X.new_zeros(0)

    @property
    def solve_dtype(self) -> str:
        """The tiles' dtype in :meth:`solve`: ``block_dtype``, but float64 whenever
        ``tol`` < :data:`FLOAT32_MIN_TOL` (float32 tiles cannot reach it)."""
        return "float64" if self.tol < FLOAT32_MIN_TOL else self.block_dtype

    def operator(self, block_dtype: str | None = None) -> KernelOperator:
        """C = K + σ²I (σ² diag(1/c) with copies) as a :class:`KernelOperator` at the
        current hyperparameters."""
        dt = _DTYPES[block_dtype or self.block_dtype]
        noise = self.noise_diagonal()
        if self.client is not None:
            return ClusterOperator(self.kernel, self.X, noise, self.client, self.block, dt)
        return KernelOperator(self.kernel, self.X, noise, self.block, dt)

    @torch.no_grad()
    def solve(self, x0: torch.Tensor | None = None, warm: bool = True,
              progress: bool | None = False) -> dict[str, Any]:
        """α = C⁻¹(y − m) and the variance cache, in one batched PCG. Starts from ``x0``
        (α's start), else (``warm``) from the α and cache held, else from zero.
        ``progress``: a bar of CG's iterations and its largest relative residual
        (:func:`gpscale.progress.progress_bar`). Returns (and keeps in ``solve_info``)
        iterations, residual, passes, seconds, and ``residuals``: the largest relative
        residual after each iteration."""
        t0 = time.perf_counter()
        op = self.operator(self.solve_dtype)
        precond = self.preconditioner(op)
        t_pre = time.perf_counter() - t0
        r = self.y - self.mean_constant.detach()
        probes = self.cache.probes(self.kernel, self.X, self.noise_diagonal(), self.seed)
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
        with progress_bar(progress, unit="pass", desc=f"CG on {self.n} rows") as bar:
            # no total: max_iter is a guard, and an ETA to it would mislead
            def step(iteration: int, rel: torch.Tensor) -> None:
                residuals.append(float(rel.max()))
                bar.update()
                bar.set_postfix(residual=f"{residuals[-1]:.2e}", target=f"{self.tol:g}")

            sol, info = cg(op.matmul, B, precond, start, self.tol, self.max_iter, step)
        self.alpha = sol[:, 0].clone()
        self.cache.finish(sol[:, 1:], op)
        self.solved_theta = self._theta()
        self.solve_info = {
            "iterations": info.iterations, "residual": float(info.rel_residual[0]),
            "residual_max": float(info.rel_residual.max()) if B.shape[1] else 0.0,
            "converged": info.converged, "passes": op.passes,
            "precond_rank": self._rank_used, "precond_seconds": t_pre,
            "seconds": time.perf_counter() - t0, "residuals": residuals}
        if not info.converged:
            warnings.warn(f"CG stopped after {info.iterations} iterations at relative "
                          f"residual {float(info.rel_residual.max()):.2e} > tol {self.tol:g};"
                          " raise max_iter or precond_rank", RuntimeWarning, stacklevel=2)
        return self.solve_info

    def freeze(self) -> IterativeExactGP:
        """Let go of the cluster (predictions compute here); the solution stays."""
        self.client = None
        return self

    def preconditioner(self, op: KernelOperator):
        """R ↦ P⁻¹R, P = L Lᵀ + σ²I by Woodbury, L from :meth:`precond_factor` (with
        copies: S⁻¹(L Lᵀ + σ²I)S⁻¹, S = diag(√c)); None for "none" or rank 0."""
        L = self.precond_factor(op)
        if L is None:
            return None
        return low_rank_inverse(L, self.noise.detach(), scale=self.copy_scale())

    def precond_factor(self, op: KernelOperator) -> torch.Tensor | None:
        """L (n x r) of the preconditioner at the current hyperparameters, of rank at most
        ``precond_rank``: randomly pivoted Cholesky ("rpchol", Chen et al. 2023; kernel
        rows in blocks, GEMMs) grown until tr(K − LLᵀ) ≤ ``precond_tol`` · nσ², or
        greedy pivoted Cholesky ("pivchol"); None for "none" or rank 0. With copies, L
        is a factor of S K S, S = diag(√c) (:meth:`preconditioner`). "rpchol" builds L
        where ``op`` keeps it (:meth:`KernelOperator.factor_store`): here, or with a
        ``client`` on the workers (:class:`gpscale.linalg.cluster_operator.ClusterFactor`),
        and the default rank's memory is that place's."""
        rank = min(self.precond_rank, self.n) if self.precond_rank is not None else \
            precond_cap(self.n, self.X.element_size(), op.factor_memory())
        self._rank_used = 0 if self.precond == "none" else rank
        if self.precond == "none" or rank == 0:
            return None
        scale = self.copy_scale()
        if self.precond == "pivchol":
            L = pivoted_cholesky(self.kernel, self.X, rank)
            L = L if scale is None else L * scale[:, None]
        else:
            L = rp_cholesky(self.kernel, self.X, rank, seed=self.seed,
                            abs_tol=self.precond_tol * self.n * float(self.noise.detach()),
                            scale=scale, store=op.factor_store(rank, scale))
        self._rank_used = L.shape[1]
        return L

    def _ensure_solved(self) -> None:
        theta = self._theta()
        if self.solved_theta.shape != theta.shape or not torch.equal(self.solved_theta, theta):
            self.solve()

    # -- prediction -----------------------------------------------------------------
    @torch.no_grad()
    def predict(self, X_new, *, include_noise: bool = False, block: int = 4096
                ) -> MeanAndVariance:
        """Posterior mean K(X*, X)α + m and variance of f at ``X_new`` (of y with
        ``include_noise``: + σ²), as :meth:`ExactGP.predict`; test points in blocks."""
        Xs = as_test_inputs(X_new, self.X)
        self._ensure_solved()
        op = self.operator("float64")
        W = torch.cat([self.alpha[:, None], self.cache.W], 1)
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s:s + block]
            KW = op.cross_matmul(Xb, W)
            means.append(KW[:, 0] + self.mean_constant)
            var = self.cache.variance(Xb, KW[:, 1:], self.kernel.diag(Xb))
            variances.append(var + self.noise if include_noise else var)
        if not means:
            empty = Xs.new_zeros(0)
            return MeanAndVariance(empty, empty.clone())
        return MeanAndVariance(torch.cat(means), torch.cat(variances))

    # -- objective --------------------------------------------------------------------
    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The exact NLML by one Cholesky, for n ≤ :data:`DENSE_OBJECTIVE_MAX` only
        (beyond that, fit hyperparameters on a subsample: see the module docstring)."""
        no_data(self, data)
        if self.n > DENSE_OBJECTIVE_MAX:
            raise NotImplementedError(
                f"IterativeExactGP has no NLML at n = {self.n} > {DENSE_OBJECTIVE_MAX} (no "
                "stochastic log-determinant yet); fit hyperparameters on a subsample "
                "with ExactGP and use IterativeExactGP.from_exact")
        copies = self.copies
        noise = noise_diagonal(self.noise, copies) * self.X.new_ones(self.n)
        value = gaussian_nll(self.kernel(self.X) + torch.diag_embed(noise),
                             self.y - self.mean_constant)
        return value if copies is None else value + copies.nlml_term(self.noise)

    # -- persistence ----------------------------------------------------------------
    def saved_state(self) -> dict[str, torch.Tensor]:
        """The ``state_dict`` plus the variance cache (``cache.*``); solves first if the
        held solution is not for the current hyperparameters."""
        self._ensure_solved()
        state = dict(self.state_dict())
        state.update({f"cache.{k}": v for k, v in self.cache.state().items()})
        return state

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        for name in list(self.cache.state()):
            key = f"{prefix}cache.{name}"
            if key in state_dict:
                setattr(self.cache, name, state_dict[key].to(self.X))
            elif strict:
                missing_keys.append(key)
        rest = {k: v for k, v in state_dict.items() if not k.startswith(f"{prefix}cache.")}
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _apply(self, fn, recurse=True):  # .to(device / dtype) moves the cache too
        super()._apply(fn, recurse)
        for name, value in self.cache.state().items():
            if value is not None:
                setattr(self.cache, name, fn(value))
        return self

    def state_bytes(self) -> dict[str, int]:
        """Bytes held for prediction: the rows (X, y, their copies), α, and the variance
        cache."""
        size = lambda t: int(t.numel() * t.element_size())  # noqa: E731
        copies = self.copies
        rows = size(self.X) + size(self.y) + (
            0 if copies is None else size(copies.counts) + size(copies.spread))
        return {"rows": rows, "weights": size(self.alpha),
                "variance_cache": sum(size(t) for t in self.cache.state().values())}

    def to_config(self) -> dict[str, Any]:
        self._ensure_solved()
        config: dict[str, Any] = {
            "mean": self.mean_kind, "dtype": dtype_name(self.X), "solver": "cg",
            "tol": self.tol, "max_iter": self.max_iter, "precond_rank": self.precond_rank,
            "precond": self.precond, "precond_tol": self.precond_tol,
            "block": self.block, "block_dtype": self.block_dtype, "seed": self.seed,
            "variance": self.cache.kind, "variance_options": self.cache.config(),
            "cg_iterations": self.solve_info.get("iterations"),
            "cg_residual": self.solve_info.get("residual"),
            "cg_converged": self.solve_info.get("converged"),
            "precond_rank_used": self.solve_info.get("precond_rank"),
            "refined": dict(self.refined), "bytes": self.state_bytes()}
        floor = IterativeExactGP.noise.floor_of(self)
        if floor != IterativeExactGP.noise.floor:
            config["noise_floor"] = floor
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> IterativeExactGP:
        floor = config.get("noise_floor")
        dtype = getattr(torch, config["dtype"])
        vopts = dict(config["variance_options"])
        model = cls(kernel, state["X"], state["y"], mean=config["mean"], dtype=dtype,
                    noise_floor=floor, noise=0.1 if floor is None else max(0.1, 2.0 * floor),
                    tol=config["tol"], max_iter=config["max_iter"],
                    precond_rank=config["precond_rank"],
                    precond=config.get("precond", "rpchol"),
                    precond_tol=config.get("precond_tol", 4.0), block=config["block"],
                    block_dtype=config["block_dtype"], variance=config["variance"],
                    variance_options=vopts, seed=config["seed"],
                    copies=Copies.from_state(state))
        n, d = state["X"].shape
        model.cache = _CACHES[config["variance"]].empty(vopts, n, d, dtype)
        model.solve_info = {"iterations": config.get("cg_iterations"),
                            "residual": config.get("cg_residual"),
                            "converged": config.get("cg_converged"),
                            "precond_rank": config.get("precond_rank_used")}
        model.solved_theta = torch.zeros(state["solved_theta"].shape, dtype=dtype)
        model.refined = dict(config.get("refined") or {})
        return model
