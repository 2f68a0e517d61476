"""Exact GP regression: the "GPML" ML-II baseline of all four papers, one model whose
solver is a strategy: :class:`Cholesky` (below) or preconditioned conjugate gradients
(:class:`~gpscale.models.exact_cg.ConjugateGradients`, no n x n matrix).

NLML(θ) = ½ rᵀC⁻¹r + ½ log|C| + (n/2) log 2π,  C = K_θ + σ²I,  r = y − m.

With the Cholesky solver, one Cholesky per evaluation. The gradient is
∂NLML/∂θ = ½ tr((C⁻¹ − ααᵀ) ∂C/∂θ) = ⟨G, ∂C/∂θ⟩,  α = C⁻¹r,  G = ½(C⁻¹ − ααᵀ),
formed by one kernel contraction ``kernel.vjp(X, X, G)`` (closed forms for the
stationary kernels: a few passes over one n x n buffer and an n x n x d matrix
product) instead of one n x n derivative matrix per hyperparameter. Peak memory is
three n x n matrices (L, G and the contraction's buffer).

Rows that repeat an input can be merged beforehand (:mod:`gpscale.models.copies`):
the model then holds the distinct inputs with y's mean at each and ``copies``, and its
C = K + σ² diag(1/c) and NLML (plus a term in σ² alone) are those of all the rows.

Successive evaluations of a fit share a :class:`~gpscale.linalg.cholesky.JitterLadder`
(``model.jitter``): a covariance that needs jitter is not re-tried from zero jitter at
every evaluation.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import torch
from torch import nn

from ..kernels import Kernel
from ..linalg import robust_cholesky
from ..linalg.cholesky import JitterLadder, inverse_from_cholesky
from ..params import LOG_2PI, Positive
from ..validation import as_test_inputs, check_xy
from .base import MODEL_CLASSES, GPModel, MeanAndVariance, dtype_name, no_data
from .copies import Copies, MergedRows, keep_copies, noise_diagonal
from .exact_cg import ConjugateGradients


class _GaussianNLL(torch.autograd.Function):
    """NLML of r ~ N(0, C), with the trace-form gradient dC = ½(C⁻¹ − ααᵀ)."""

    @staticmethod
    def forward(ctx, C, r):  # noqa: D102
        L = robust_cholesky(C)
        alpha = torch.cholesky_solve(r[:, None], L)[:, 0]
        n = r.shape[0]
        value = 0.5 * (r @ alpha) + torch.log(torch.diagonal(L)).sum() + 0.5 * n * LOG_2PI
        ctx.save_for_backward(L, alpha)
        return value

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        L, alpha = ctx.saved_tensors
        grad_C = None
        if ctx.needs_input_grad[0]:
            grad_C = inverse_from_cholesky(L)
            grad_C.sub_(torch.outer(alpha, alpha)).mul_(0.5 * g)
        grad_r = g * alpha if ctx.needs_input_grad[1] else None
        return grad_C, grad_r


def gaussian_nll(C: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """−log N(r | 0, C), differentiable in C and r with the fast trace-form gradient."""
    return _GaussianNLL.apply(C, r)


class _ExactNLML(torch.autograd.Function):
    """NLML of an ExactGP; the gradient goes through ``kernel.vjp`` (see module doc)."""

    @staticmethod
    def forward(ctx, model, r, noise, *params):  # noqa: D102
        with torch.no_grad():
            C = model.kernel(model.X)
            C.diagonal().add_(noise_diagonal(noise, model.copies))
            L = robust_cholesky(C, ladder=model.jitter)
            del C
            alpha = torch.cholesky_solve(r[:, None], L)[:, 0]
            value = (0.5 * (r @ alpha) + torch.log(torch.diagonal(L)).sum()
                     + 0.5 * r.shape[0] * LOG_2PI)
        ctx.model = model
        ctx.save_for_backward(L, alpha, *params)
        return value

    @staticmethod
    def backward(ctx, g):  # noqa: D102
        L, alpha, *params = ctx.saved_tensors
        model = ctx.model
        G = inverse_from_cholesky(L)
        G.addr_(alpha, alpha, beta=0.5 * g, alpha=-0.5 * g)  # G = g/2 (C⁻¹ − ααᵀ)
        grad_noise = None
        if ctx.needs_input_grad[2]:  # ∂C/∂σ² = diag(1/c), I without copies
            diag = torch.diagonal(G)
            grad_noise = (diag if model.copies is None else diag / model.copies.counts).sum()
        grad_r = g * alpha if ctx.needs_input_grad[1] else None
        grads, _ = model.kernel.vjp(model.X, model.X, G)
        del G
        param_grads = [grads.get(p) if need else None
                       for p, need in zip(params, ctx.needs_input_grad[3:])]
        return (None, grad_r, grad_noise, *param_grads)


class Solver(Protocol):
    """What an :class:`ExactGP` asks of its solver (:class:`Cholesky`,
    :class:`~gpscale.models.exact_cg.ConjugateGradients`)."""

    name: str
    title: str

    def attach(self, model: ExactGP) -> None: ...
    def solve(self, model: ExactGP, **options: Any) -> dict[str, Any]: ...
    def predict(self, model: ExactGP, Xs: torch.Tensor, include_noise: bool,
                block: int, full_cov: bool = False) -> MeanAndVariance: ...
    def check_objective(self, model: ExactGP) -> None: ...
    def state(self, model: ExactGP) -> dict[str, torch.Tensor]: ...
    def load(self, state: dict[str, torch.Tensor], like: torch.Tensor
             ) -> tuple[set[str], list[str]]: ...
    def apply(self, fn: Any) -> None: ...
    def freeze(self) -> None: ...
    def config(self, model: ExactGP) -> dict[str, Any]: ...


class Cholesky:
    """The exact GP's direct solver: C = L Lᵀ factorised at every NLML evaluation (module
    docstring), and once per set of hyperparameters for prediction (kept)."""

    name = "cholesky"
    title = ""

    def __init__(self) -> None:
        self._cache: tuple[Any, torch.Tensor, torch.Tensor] | None = None

    def attach(self, model: ExactGP) -> None:
        self._cache = None

    def solve(self, model: ExactGP, **_: Any) -> dict[str, Any]:
        self.factor(model)
        return {}

    def factor(self, model: ExactGP) -> tuple[torch.Tensor, torch.Tensor]:
        """(L, α) with L Lᵀ = C and α = C⁻¹(y − m) at the current hyperparameters."""
        key = tuple(p._version for p in model.parameters()) + (id(model.X), model.X._version)
        if self._cache is None or self._cache[0] != key:
            with torch.no_grad():
                L = robust_cholesky(model.covariance())
                alpha = torch.cholesky_solve((model.y - model.mean_constant)[:, None], L)[:, 0]
            self._cache = (key, L, alpha)
        return self._cache[1], self._cache[2]

    @torch.no_grad()
    def predict(self, model: ExactGP, Xs: torch.Tensor, include_noise: bool, block: int,
                full_cov: bool = False) -> MeanAndVariance:
        """Posterior mean and variance (or covariance with ``full_cov``) at ``Xs``, test
        points in blocks of ``block`` rows."""
        L, alpha = self.factor(model)
        kernel = model.kernel
        if full_cov:
            Ks = kernel(model.X, Xs)
            V = torch.linalg.solve_triangular(L, Ks, upper=False)
            cov = kernel(Xs) - V.mT @ V
            if include_noise:
                cov = cov + torch.diag_embed(model.noise.expand(Xs.shape[0]))
            return MeanAndVariance(Ks.mT @ alpha + model.mean_constant, cov)
        means, variances = [], []
        for s in range(0, Xs.shape[0], block):
            Xb = Xs[s : s + block]
            Ks = kernel(model.X, Xb)
            V = torch.linalg.solve_triangular(L, Ks, upper=False)
            means.append(Ks.mT @ alpha + model.mean_constant)
            var = (kernel.diag(Xb) - (V * V).sum(0)).clamp_min(0.0)
            variances.append(var + model.noise if include_noise else var)
        return MeanAndVariance(torch.cat(means), torch.cat(variances))

    def check_objective(self, model: ExactGP) -> None:
        return None

    def state(self, model: ExactGP) -> dict[str, torch.Tensor]:
        return {}

    def load(self, state: dict[str, torch.Tensor], like: torch.Tensor
             ) -> tuple[set[str], list[str]]:
        return set(), []

    def apply(self, fn: Any) -> None:
        self._cache = None

    def freeze(self) -> None:
        return None

    def config(self, model: ExactGP) -> dict[str, Any]:
        return {}


#: the solvers by the name a config and ``solver=`` use
SOLVERS = {"cholesky": Cholesky, "cg": ConjugateGradients}


class ExactGP(MergedRows, GPModel):
    """Exact GP: y = f(X) + ε, f ~ GP(m, k), ε ~ N(0, σ²).

    Parameters
    ----------
    kernel : the covariance function k.
    X, y : training inputs (n, d) and targets (n,).
    noise : initial noise variance σ².
    mean : ``"zero"`` or ``"constant"`` (a learned constant m).
    noise_floor : the smallest σ² this model allows (default: the class's 1e-6).
    copies : :class:`~gpscale.models.copies.Copies` when each row of X, y stands for
        ``copies.counts`` rows at that input (y their mean; see
        :func:`~gpscale.models.copies.merge_copies`), None when each is one row.
    mean_constant : the constant mean's initial value (with ``mean="constant"``).
    solver : how C = K + σ²I is solved: ``"cholesky"`` (default, :class:`Cholesky`),
        ``"cg"`` or a :class:`~gpscale.models.exact_cg.ConjugateGradients` with its
        options (preconditioned CG, no n x n matrix: for many rows).
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(
        self,
        kernel: Kernel,
        X,
        y,
        noise: float = 0.1,
        mean: str = "zero",
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
        noise_floor: float | None = None,
        copies: Copies | None = None,
        *,
        mean_constant: float = 0.0,
        solver: str | Solver = "cholesky",
    ) -> None:
        super().__init__()
        if mean not in ("zero", "constant"):
            raise ValueError(f"mean must be 'zero' or 'constant', got {mean!r}")
        if isinstance(solver, str):
            if solver not in SOLVERS:
                raise ValueError(f"solver must be one of {sorted(SOLVERS)} or a solver "
                                 f"object, got {solver!r}")
            solver = SOLVERS[solver]()
        X, y = check_xy(X, y, dtype, device)
        self.kernel = kernel.to(dtype=dtype, device=X.device)
        if noise_floor is not None:
            ExactGP.noise.set_floor(self, noise_floor)
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
        #: where the NLML's Cholesky starts its jitter ladder (the rung that last worked)
        self.jitter = JitterLadder()
        self.solver = solver
        solver.attach(self)
        self.to(X.device)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def title(self) -> str:  # type: ignore[override]
        return self.solver.title

    def theta(self) -> torch.Tensor:
        """Every parameter's value, flattened (what a solution was solved for)."""
        flat = [p.detach().reshape(-1).to(self.X.dtype) for p in self.parameters()]
        return torch.cat(flat) if flat else self.X.new_zeros(0)

    def noise_diagonal(self) -> torch.Tensor | float:
        """σ² of each row (n,) with copies (σ²/c), else σ² (0-d), detached."""
        return noise_diagonal(self.noise.detach(), self.copies)

    def copy_scale(self) -> torch.Tensor | None:
        """√c with copies (a preconditioner's S), else None."""
        copies = self.copies
        return None if copies is None else copies.counts.sqrt()

    def covariance(self) -> torch.Tensor:
        """C = K(X, X) + σ²I (σ² diag(1/c) with copies)."""
        K = self.kernel(self.X)
        return K + torch.diag_embed(noise_diagonal(self.noise, self.copies) * K.new_ones(self.n))

    def nlml(self) -> torch.Tensor:
        """Negative log marginal likelihood by one Cholesky (differentiable in every
        parameter)."""
        self.solver.check_objective(self)
        params = [p for p in self.kernel.parameters() if p.requires_grad]
        value = _ExactNLML.apply(self, self.y - self.mean_constant, self.noise, *params)
        copies = self.copies
        return value if copies is None else value + copies.nlml_term(self.noise)

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The NLML (the model holds its training rows; ``data`` must be None)."""
        no_data(self, data)
        return self.nlml()

    def with_solver(self, solver: str | Solver, X=None, y=None, *,
                    noise_floor: float | None = None, copies: Copies | None | str = "same"
                    ) -> ExactGP:
        """A new model with these hyperparameters (kernel, σ², mean, noise floor) on the
        rows X, y (default: this model's own) solved by ``solver``. ``noise_floor``:
        another floor (at most σ²; σ² keeps its value). The fitted values are moved as they
        are, not checked again as a user's initial ones (σ² may sit at its floor).
        ``copies``: the new rows' copies
        (default: this model's when its own rows are kept, else none)."""
        X = self.X if X is None else X
        y = self.y if y is None else y
        own = ExactGP.noise.floor_of(self)
        floor = own if noise_floor is None else float(noise_floor)
        if isinstance(copies, str):
            copies = self.copies if y is self.y else None
        noise = float(self.noise.detach())
        # the constructor checks a user's initial σ²; a fitted σ² may sit at its floor, so
        # the model is built from a placeholder and given the fitted numbers after
        model = ExactGP(copy.deepcopy(self.kernel), X, y, noise=max(noise, 2.0 * floor),
                        mean=self.mean_kind, dtype=self.X.dtype, device=self.X.device,
                        noise_floor=None if floor == ExactGP.noise.floor else floor,
                        copies=copies, mean_constant=float(self.mean_constant.detach()),
                        solver=solver)
        with torch.no_grad():  # the raw numbers, so that σ² and m are bit-identical
            if floor == own:
                model.raw_noise.copy_(self.raw_noise)
            else:
                model.noise = noise
            model.mean_constant.copy_(self.mean_constant)
        return model

    def solve(self, **options: Any) -> dict[str, Any]:
        """Solve for the posterior at the current hyperparameters now (``options``: the
        CG solver's, :meth:`~gpscale.models.exact_cg.ConjugateGradients.solve`); returns
        how the solve went."""
        return self.solver.solve(self, **options)

    def freeze(self) -> ExactGP:
        """Let go of a cluster (predictions compute here); the solution stays."""
        self.solver.freeze()
        return self

    # -- prediction -----------------------------------------------------------------
    @torch.no_grad()
    def predict(
        self,
        X_new,
        *,
        include_noise: bool = False,
        full_cov: bool = False,
        block: int = 4096,
    ) -> MeanAndVariance:
        """Posterior mean and variance (or covariance with ``full_cov``; Cholesky solver
        only) at ``X_new``. ``include_noise`` adds σ² (predictive distribution of y
        rather than f). Test points are processed in blocks of ``block`` rows."""
        Xs = as_test_inputs(X_new, self.X)
        return self.solver.predict(self, Xs, include_noise, block, full_cov)

    # -- persistence ----------------------------------------------------------------
    def saved_state(self) -> dict[str, torch.Tensor]:
        """The ``state_dict`` plus what the solver keeps for prediction (the CG solver:
        α, the hyperparameters it was solved for, the variance cache)."""
        state = dict(self.state_dict())
        state.update(self.solver.state(self))
        return state

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        own = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
        taken, missing = self.solver.load(own, self.X)
        if strict:
            missing_keys.extend(f"{prefix}{k}" for k in missing)
        rest = {k: v for k, v in state_dict.items() if k[len(prefix):] not in taken}
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _apply(self, fn, recurse=True):  # .to(device / dtype) moves the solver's tensors
        super()._apply(fn, recurse)
        if "solver" in self.__dict__:
            self.solver.apply(fn)
        return self

    def state_bytes(self) -> dict[str, int] | None:
        """Bytes held for prediction by the CG solver (None for Cholesky)."""
        sizes = getattr(self.solver, "state_bytes", None)
        return None if sizes is None else sizes(self)

    def to_config(self) -> dict[str, Any]:
        config = {"mean": self.mean_kind, "dtype": dtype_name(self.X),
                  **self.solver.config(self)}
        floor = ExactGP.noise.floor_of(self)
        if floor != ExactGP.noise.floor:  # the noise is floor + softplus(raw_noise)
            config["noise_floor"] = floor
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> ExactGP:
        floor = config.get("noise_floor")
        dtype = getattr(torch, config["dtype"])
        kind = config.get("solver", "cholesky")
        solver = Cholesky() if kind == "cholesky" else ConjugateGradients.from_config(config)
        model = cls(kernel, state["X"], state["y"], mean=config["mean"], dtype=dtype,
                    noise_floor=floor, noise=0.1 if floor is None else max(0.1, 2.0 * floor),
                    copies=Copies.from_state(state), solver=solver)
        if kind != "cholesky":
            solver.restore(config, state, dtype)
        return model


#: files written when the iterative solver was a model class of its own name it
MODEL_CLASSES["IterativeExactGP"] = ExactGP
