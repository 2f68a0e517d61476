"""The overall variance scale after cross-validation training.

The CV loss ‖y_V − K_VT C⁻¹ y_T‖² depends on the hyperparameters only through the
predictive mean, which is unchanged when every signal variance and σ² are multiplied
by the same c > 0 (K_VT and C both scale by c). GPCV-ADMM therefore learns the shape
(lengthscales, periods, the ratios of the variances) but leaves the overall scale
wherever the iterations happened to stop, and that scale sets every predictive
variance. Given the shape, the scale that maximises the marginal likelihood has a
closed form (the profile likelihood): with C = c C₁,

    −log p(y) = ½ [ yᵀC₁⁻¹y / c + n log c + log|C₁| + n log 2π ],   c* = yᵀC₁⁻¹y / n,

so from the current θ the factor is yᵀC⁻¹y / n, one preconditioned CG solve with the
full data: O(n²) per CG iteration, no O(n³) step, no change to the CV loss.
"""

from __future__ import annotations

from typing import Any

from ...kernels import Kernel, Scale
from ...kernels.base import Product, Sum
from ...kernels.stationary import Linear
from ...models.exact import ExactGP
from .ops import solve_full


def scale_handles(kernel: Kernel) -> list[tuple[Kernel, str]] | None:
    """Trainable positive parameters (module, name) with K(c · handles) = c · K, or None
    when the kernel has no such set (e.g. a fixed signal variance)."""
    if isinstance(kernel, Scale):
        return [(kernel, "outputscale")] if kernel.raw_outputscale.requires_grad else None
    if isinstance(kernel, Linear):
        return [(kernel, "variance")] if kernel.raw_variance.requires_grad else None
    if isinstance(kernel, Sum):
        parts = [scale_handles(k) for k in kernel.kernels]
        return None if any(p is None for p in parts) else [h for p in parts for h in p]
    if isinstance(kernel, Product):
        return next((h for h in map(scale_handles, kernel.kernels) if h is not None), None)
    return None


def ml_scale_factor(model: ExactGP, tol: float = 1e-8, max_iter: int | None = None,
                    precond_rank: int = 50, block: int | None = None,
                    preconditioner: str = "pivchol", dense_bytes: int = 2**30,
                    client: Any = None) -> float:
    """c = (y − m)ᵀ C⁻¹ (y − m) / n at the model's θ: multiplying every signal variance
    and σ² by c maximises the marginal likelihood over the overall scale (CG solve:
    :func:`~gpscale.train.admm.ops.solve_full`, on ``client``'s workers when given)."""
    alpha, _ = solve_full(model, tol, max_iter, precond_rank, block, preconditioner,
                          dense_bytes, client)
    r = model.y - model.mean_constant.detach()
    return float(r @ alpha) / r.shape[0]


def calibrate_scale(model: ExactGP, **cg_options) -> float | None:
    """Rescale the model's signal variance(s) and σ² to the maximum-likelihood scale
    given their shape (module docstring). Returns the factor applied, or None when the
    kernel's variances or the noise are not all trainable (the user fixed the scale)."""
    handles = scale_handles(model.kernel)
    if handles is None or not model.raw_noise.requires_grad:
        return None
    c = ml_scale_factor(model, **cg_options)
    if not c > 0 or c != c:
        return None
    for module, name in [*handles, (model, "noise")]:
        floor = getattr(type(module), name).floor_of(module)  # values at a floor stay
        setattr(module, name, (getattr(module, name).detach() * c).clamp_min(floor))
    return c
