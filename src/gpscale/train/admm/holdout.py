"""Hold-out GPCV-ADMM (Xu, Yin, Zhang, Luo, Cui; Algorithm 1), method ``admm-hocv``.

``fit_admm_hocv(model)`` splits the model's data into D_T and D_V (seeded, validation
fraction ½ by default, or the part the caller names), runs Algorithm 1 (see
:mod:`gpscale.train.admm.core`) and leaves the model holding the learned
hyperparameters. Nothing here is O(n³): the z-steps are (preconditioned) conjugate
gradients (the z⁰ solve) and conjugate-direction steps. :data:`TANGENT` is the preset
of our tangent θ-step.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ...models.exact import ExactGP
from ...rng import as_generator
from ..result import FitResult
from .core import HoldoutADMM
from .options import DEFAULT_PRESET, TANGENT, ADMMOptions, make_options
from .run import check_fit_args, finish_fit, run_holdout

__all__ = ["fit_admm_hocv", "holdout_split", "validation_split", "TANGENT"]


def holdout_split(n: int, val_fraction: float = 0.5,
                  seed: int | torch.Generator | None = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (train, validation) index split of range(n), seeded, on the CPU."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction!r}")
    n_v = int(round(val_fraction * n))
    if n_v < 1 or n - n_v < 1:
        raise ValueError(f"n={n} points are too few for val_fraction={val_fraction}: "
                         "both parts need at least one point")
    perm = torch.randperm(n, generator=as_generator(seed))
    return perm[n_v:].sort().values, perm[:n_v].sort().values


def validation_split(n: int, validation: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices of range(n) from a given validation part: a boolean
    mask of length n or distinct integer indices in [0, n) (a tensor, array or list).
    Sorted, on the CPU; both parts must be non-empty."""
    v = torch.as_tensor(validation).cpu()
    v = v.long() if v.numel() == 0 else v  # an empty list comes as float
    if v.dtype == torch.bool:
        if v.shape != (n,):
            raise ValueError(f"a validation mask needs shape ({n},) (one entry per data "
                             f"point), got {tuple(v.shape)}")
        mask = v.clone()
    elif v.dtype.is_floating_point or v.dtype.is_complex or v.ndim != 1:
        raise ValueError("validation must be a boolean mask or a 1-D sequence of integer "
                         f"indices, got dtype {v.dtype} with shape {tuple(v.shape)}")
    else:
        if v.numel() and (int(v.min()) < 0 or int(v.max()) >= n):
            raise ValueError(f"validation indices must lie in [0, {n}), got "
                             f"{int(v.min())} … {int(v.max())}")
        if v.unique().numel() != v.numel():
            raise ValueError("validation indices must be distinct (a repeated index "
                             "would weight its point twice)")
        mask = torch.zeros(n, dtype=torch.bool)
        mask[v.long()] = True
    n_v = int(mask.sum())
    if n_v == 0 or n_v == n:
        raise ValueError(f"the validation part has {n_v} of {n} points; both the training "
                         "and the validation part need at least one point")
    return (~mask).nonzero()[:, 0], mask.nonzero()[:, 0]


def fit_admm_hocv(
    model: ExactGP,
    *,
    val_fraction: float = 0.5,
    seed: int | torch.Generator | None = 0,
    validation: Any = None,
    options: ADMMOptions | None = None,
    preset: str = DEFAULT_PRESET,
    progress: bool = False,
    on_divergence: str = "warn",
    scale: str = "ml",
    client: Any = None,
    **overrides: Any,
) -> FitResult:
    """Hold-out GPCV-ADMM (Algorithm 1) on the model's data; method ``admm-hocv``.

    The validation part D_V is a seeded random ``val_fraction`` of the points, or the
    points ``validation`` names (a boolean mask or integer indices; it overrides
    ``val_fraction`` and ``seed``) — e.g. the latest times, for a model meant to
    forecast, where a random D_V scores interpolation. Options
    are :class:`ADMMOptions` fields (``rho=5, eps=1e-2, max_iter=100, ...``), given as
    ``options`` and/or keywords. ``objective`` and the history's ``cv_loss`` are the
    validation MSE ‖y_V − K_VT z‖²/n_V. On divergence the best θ is kept and a
    RuntimeWarning (``on_divergence="warn"``) or
    :class:`~gpscale.train.admm.run.ADMMDivergenceError` is raised.
    ``scale="ml"`` (default) then sets the overall variance scale, which CV leaves
    undetermined, to its maximum-likelihood value by one CG solve (``"keep"``: as ADMM
    left it; see :mod:`gpscale.train.admm.scale`). With ``client`` (a dask.distributed
    Client) the kernel products and contractions that are recomputed by row blocks
    (``memory="chunked"``, or K_TT and K_VT beyond ``dense_bytes``) and the scale's
    solve run on its workers (:class:`~gpscale.train.admm.ops.KernelOps`).

    ``preset="paper"`` runs the paper's Algorithm 1 (ρ = 5, λ⁰ = 1, coordinate descent
    with line minimisation for θ, the z-step by CG to the minimiser of (13), z⁰ at a
    perturbed θ⁰, maxItr = 100 iterations without the ε test, as the authors' code and
    Fig. 2 run it; ``eps=1e-2`` restores Alg. 1's test; :class:`ADMMOptions`). The
    default, :data:`~gpscale.train.admm.options.DEFAULT_PRESET`, is ``"lbfgs-cg"`` (L-BFGS
    θ-steps and the z-step by CG to tolerance, z held in the θ-step): the paper's steps
    leave θ near θ⁰ (see ``DEFAULT_PRESET``). ``"tangent"`` is our tangent θ-step, which
    reaches the CV optimum in few iterations (:data:`TANGENT`); keyword options override
    the preset. With z held in the θ-step θ
    moves little per iteration under a fixed ρ (:mod:`gpscale.train.admm.core`,
    "Convergence"); ``adaptive_rho=True, rho_mu=2.0, lam_init="adjoint"`` with a
    smaller ``eps`` gets nearer the CV optimum (the variants side by side:
    benchmarks/results/admm-quality.md, benchmarks/results/admm-paper-steps/).
    """
    check_fit_args(model, on_divergence, scale)
    opts = make_options(options, preset, **overrides)
    t0 = time.perf_counter()
    idx_T, idx_V = (holdout_split(model.n, val_fraction, seed) if validation is None
                    else validation_split(model.n, validation))
    idx_T, idx_V = idx_T.to(model.X.device), idx_V.to(model.X.device)
    state = HoldoutADMM(model, model.X[idx_T], model.y[idx_T], model.X[idx_V],
                        model.y[idx_V], opts, client)
    state.init()
    out = run_holdout(state, opts.max_iter, progress, "GPCV-ADMM (hold-out)", t0)
    return finish_fit(out, model, "admm-hocv", t0, on_divergence, scale, opts, client)
