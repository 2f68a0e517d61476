"""Prototype: the stationary kernel without the 0/1 gap columns (GapVariance keeps them)."""
import torch
import gpscale.api as api, gpscale.methods.kernel_choice as kc
from gpscale.kernels import GapVariance
from gpscale.kernels.stationary import Matern, RBF, RationalQuadratic
from gpscale.kernels import Scale
def with_gaps(kernel, columns):
    columns = list(columns)
    if not columns:
        return kernel
    base = kernel.base
    d = base.lengthscale.numel()
    keep = [c for c in range(d) if c not in columns]
    if isinstance(base, Matern):
        nb = Matern(base.nu, 1.0, ard_dims=len(keep))
    elif isinstance(base, RationalQuadratic):
        nb = RationalQuadratic(1.0, 1.0, ard_dims=len(keep))
    else:
        nb = RBF(1.0, ard_dims=len(keep))
    nb.active_dims = keep
    return Scale(nb) + GapVariance(columns)
api.with_gaps = with_gaps
kc.with_gaps = with_gaps
