"""Fitting SGPR on rows read in passes (:class:`~gpscale.models.StreamedSGPR`).

Every evaluation on all rows is two passes over them (the statistics and their
gradient), so the search runs first where it is cheap: on a uniform sample of the rows
held in memory (:meth:`gpscale.io.Rows.sample`), by the in-memory SGPR fit with its
k-means placement of Z and its start policies (``fit_sample``). The model on all rows
continues from the sample's θ, Z and σ² for at most ``refine`` L-BFGS iterations by
passes, stopping early once an iteration lowers the bound by less than
:data:`REFINE_FTOL` of it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..deadline import Deadline
from ..io.rows import Rows
from ..models.sgpr import SGPR, StreamedSGPR
from .lbfgs import fit_lbfgs
from .result import FitResult

__all__ = ["REFINE_FTOL", "fit_sgpr_passes"]

#: the refinement on all rows stops once an iteration lowers the bound by less than this
#: fraction of it (rff's rule, :data:`gpscale.methods.rff.REFINE_FTOL`)
REFINE_FTOL = 1e-6


def fit_sgpr_passes(rows: Rows, fit_sample: Callable[[torch.Tensor, torch.Tensor],
                                                     tuple[SGPR, FitResult]],
                    sample: int, refine: int, seed: int = 0, progress: bool = False,
                    dtype: torch.dtype = torch.float64,
                    device: torch.device | str | None = None,
                    deadline: Deadline | None = None
                    ) -> tuple[StreamedSGPR, FitResult]:
    """θ, Z and σ² by ``fit_sample(X, y)`` on about ``sample`` uniform rows (seeded),
    then at most ``refine`` L-BFGS iterations of the bound on all rows by passes (none
    when the sample held every row or its search was interrupted). Returns the model
    on all rows (still reading them: ``freeze`` keeps its statistics) and the result,
    whose history marks each iteration's phase and whose counts add both phases.
    ``deadline``: the refinement starts no iteration past it."""
    Xs, ys = rows.sample(sample, seed)
    small, first = fit_sample(Xs.to(dtype=dtype, device=device),
                              ys.to(dtype=dtype, device=device))
    model = StreamedSGPR(small.kernel, small.Z.detach(), rows=rows,
                         noise=float(small.noise.detach()),
                         learn_z=small.Z.requires_grad, dtype=dtype, device=device)
    if refine == 0 or first.reason == "interrupted" or Xs.shape[0] >= model.n:
        return model, first
    result = fit_lbfgs(model, model.objective, max_iter=refine, progress=progress,
                       method="sgpr", ftol=REFINE_FTOL, warn=False, deadline=deadline)
    result.history = [{**h, "phase": "sample"} for h in first.history] + [
        {**h, "phase": "all rows"} for h in result.history]
    result.n_evals += first.n_evals
    result.wall_s += first.wall_s
    return model, result
