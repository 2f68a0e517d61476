"""GPCV-ADMM (Xu, Yin, Zhang, Luo, Cui): cross-validation training of an exact GP in
O(n²) per iteration, and the CG predictive mean that goes with it.

This package's entry is this module: the library, the benchmarks and the tests import
from ``gpscale.train.admm`` only. Trainers (each returns a
:class:`~gpscale.train.FitResult` and leaves the model holding the learned θ):

- :func:`fit_admm_hocv`: hold-out CV, Algorithm 1 (method ``admm-hocv``);
- :func:`fit_admm_kfold`: naive K-fold, §3.2 (``admm-kfold``);
- :func:`fit_admm_consensus`: K-fold by consensus ADMM, eq. (15–16)
  (``admm-consensus``).

Options are :class:`ADMMOptions` (the paper's Algorithm 1 by default), built by
:func:`make_options`; :data:`PRESETS` names this library's variants (``preset=`` of
every trainer: :data:`LBFGS_CG`, :data:`TANGENT`). A diverged run raises
:class:`ADMMDivergenceError` when asked to. :func:`cg_predict` is the posterior mean
with no O(n³) step, for any exact GP.

The modules, each one idea, import each other in one direction:

==============  ==========================================================================
``options``     :class:`ADMMOptions`, :data:`PRESETS`, :func:`make_options`, :func:`dense_blocks`
``ops``         kernel-block products (K_VT, K_VTᵀ, C), rank-1 contractions, full CG solve
``lagrangian``  the augmented Lagrangian L_ρ of eq. (11) and its θ-gradient (17–18)
``linesearch``  line minimisation along one direction (the θ-step's μ₁)
``coordinate``  the paper's θ-step: eq. (12) by coordinate descent (§5.3)
``theta``       raw-space θ-steps along −g or L-BFGS with Armijo steps (ours)
``tangent``     our tangent θ-step (``coupling="tangent"``)
``core``        :class:`HoldoutADMM`: the state (θ, z, λ) and the three steps (11a–c)
``scale``       the ML overall variance scale after CV training
``run``         the iteration loop, its stopping rules, the :class:`FitResult`
``holdout``     :func:`fit_admm_hocv`, the splits, :data:`TANGENT`
``kfold``       :func:`fit_admm_kfold`, :func:`fit_admm_consensus`, folds as tasks
``predict``     :func:`cg_predict`
==============  ==========================================================================
"""

from .coordinate import CoordinateThetaStep
from .core import THETA_STEPS, HoldoutADMM, theta_step_class
from .holdout import TANGENT, fit_admm_hocv, holdout_split, validation_split
from .kfold import (
    FoldSpec,
    fit_admm_consensus,
    fit_admm_kfold,
    fold_specs,
    kfold_cv_loss,
    kfold_indices,
)
from .linesearch import line_minimise
from .ops import KernelOps, rank1_vjp, solve_full
from .options import DEFAULT_PRESET, LBFGS_CG, PRESETS, ADMMOptions, dense_blocks, make_options
from .predict import cg_predict
from .run import SCALE_PRECOND_RANK, ADMMDivergenceError, check_choices, scale_cg_options
from .scale import calibrate_scale, ml_scale_factor, scale_handles
from .tangent import TangentThetaStep
from .theta import DescentMemory, PaperThetaStep

__all__ = [
    # trainers and their options
    "fit_admm_hocv", "fit_admm_kfold", "fit_admm_consensus", "ADMMOptions",
    "make_options", "PRESETS", "DEFAULT_PRESET", "LBFGS_CG", "TANGENT",
    "ADMMDivergenceError", "check_choices",
    # prediction without O(n³)
    "cg_predict", "solve_full",
    # splits and folds
    "holdout_split", "validation_split", "kfold_indices", "kfold_cv_loss", "FoldSpec",
    "fold_specs",
    # the algorithm's parts (for tests and benchmarks)
    "HoldoutADMM", "THETA_STEPS", "theta_step_class", "CoordinateThetaStep",
    "PaperThetaStep", "TangentThetaStep", "DescentMemory", "line_minimise",
    "KernelOps", "rank1_vjp", "dense_blocks",
    # the overall scale after CV training
    "calibrate_scale", "ml_scale_factor", "scale_handles", "scale_cg_options",
    "SCALE_PRECOND_RANK",
]
