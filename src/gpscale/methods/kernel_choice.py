"""The kernel chosen from the data: when a user names no kernel (``kernel="auto"``), the
stationary ARD families of :data:`CANDIDATES` are each fitted by the exact GP on a
uniform sample of rows and scored by how well they predict rows they were not fitted on;
the best family is then fitted by the method on every row.

The score is the mean negative log predictive density (NLPD) of y:

- on up to :data:`HELD_OUT_ROWS` rows outside the sample, each candidate's posterior
  conditioned on the sample, when there are rows outside it;
- otherwise (the sample is every row) the leave-one-out NLPD from the Cholesky factor
  (Rasmussen & Williams 2006, eq. 5.12: μ₋ᵢ = yᵢ − [C⁻¹r]ᵢ / [C⁻¹]ᵢᵢ,
  σ²₋ᵢ = 1 / [C⁻¹]ᵢᵢ, r = y − m).

Why these and not the sample's evidence: benchmarks/results/kernel-choice/ compares the
criteria against the test accuracy of each family on every real set.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from ..kernels import Kernel, make_kernel
from ..linalg.cholesky import inverse_from_cholesky
from ..metrics import nlpd
from ..models import ExactGP
from ..train.starts import sample_rows
from .cost import exact_seconds
from .exact import fit_exact
from .registry import Method

__all__ = ["AUTO_KERNEL", "DEFAULT_KERNEL", "CANDIDATES", "KernelChoice", "choose_kernel",
           "kernel_for", "loo_predictions"]

#: the kernel name that asks for the family to be chosen from the data
AUTO_KERNEL = "auto"
#: what ``kernel="auto"`` fits with a method that does not choose
#: (:attr:`~gpscale.methods.Method.chooses_kernel`)
DEFAULT_KERNEL = "rbf-ard"

#: the families a kernel is chosen from (each with a lengthscale per input column)
CANDIDATES = ("rbf-ard", "matern12-ard", "matern32-ard", "matern52-ard", "rq-ard")
#: rows each candidate is fitted on
SAMPLE_ROWS = 1000
#: rows outside the sample each candidate is scored on
HELD_OUT_ROWS = 2000
#: L-BFGS iterations of each candidate's fit
CANDIDATE_ITER = 100
#: with a time budget, the candidates' fits take at most this share of it (by the exact
#: GP's cost model), which sizes their sample below SAMPLE_ROWS
BUDGET_SHARE = 0.1


@dataclass(frozen=True)
class KernelChoice:
    """Which kernel family was chosen from the data, on what, and every candidate's score
    (lower is better)."""

    kernel: str
    criterion: str
    rows: int
    scored_rows: int
    scores: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    def __str__(self) -> str:
        ranked = sorted(self.scores.items(), key=lambda kv: kv[1])
        listed = ", ".join(f"{k} {v:.4g}" for k, v in ranked)
        return (f"{self.kernel}, the lowest {self.criterion} of {len(self.scores)} kernel "
                f"families fitted on {self.rows} rows ({listed}; {self.seconds:.0f} s)")


def loo_predictions(model: ExactGP) -> tuple[torch.Tensor, torch.Tensor]:
    """Leave-one-out predictive means and variances of y at the model's rows from one
    Cholesky factor (R&W eq. 5.12); rows merged from copies leave out all their copies."""
    with torch.no_grad():
        L = torch.linalg.cholesky(model.covariance())
        Cinv = inverse_from_cholesky(L)
        r = model.y - model.mean_constant
        diag = torch.diagonal(Cinv)
        var = 1.0 / diag
        return model.y - (Cinv @ r) * var, var


def choose_kernel(X: torch.Tensor, y: torch.Tensor, *, candidates: tuple[str, ...] = CANDIDATES,
                  rows: int = SAMPLE_ROWS, held_out: int = HELD_OUT_ROWS, seed: int = 0,
                  **fit_options: Any) -> tuple[KernelChoice, dict[str, ExactGP]]:
    """Fit every candidate family by :func:`~gpscale.methods.exact.fit_exact` on ``rows``
    uniformly sampled rows of (X, y) (standardised) and score each (module docstring).
    Returns the choice and the candidates' fitted models. A candidate whose fit fails
    scores +inf; ``fit_options`` go to each fit."""
    t0 = time.perf_counter()
    n, d = int(X.shape[0]), int(X.shape[1])
    keep = sample_rows(n, min(rows, n), seed, X.device)
    outside = torch.ones(n, dtype=torch.bool, device=X.device)
    outside[keep] = False
    held = outside.nonzero().reshape(-1)
    gen = torch.Generator().manual_seed(int(seed))
    held = held[torch.randperm(held.numel(), generator=gen)[:held_out].to(held.device)]
    criterion = "held-out NLPD" if held.numel() else "leave-one-out NLPD"
    options = {"max_iter": CANDIDATE_ITER, "seed": seed, **fit_options}
    scores: dict[str, float] = {}
    models: dict[str, ExactGP] = {}
    for name in candidates:
        try:
            with warnings.catch_warnings():  # a candidate's convergence is not the fit's
                warnings.simplefilter("ignore")
                model, _ = fit_exact(X[keep], y[keep], make_kernel(name, d),
                                     solver="cholesky", **options)
            scores[name] = _score(model, X[held], y[held]) if held.numel() else \
                _loo_score(model)
            models[name] = model
        except (RuntimeError, ValueError):  # a Cholesky that failed: not this family
            scores[name] = float("inf")
    best = min(scores, key=lambda k: scores[k])
    choice = KernelChoice(best, criterion, int(keep.numel()),
                          int(held.numel()) if held.numel() else int(keep.numel()), scores,
                          time.perf_counter() - t0)
    return choice, models


def _score(model: ExactGP, X: torch.Tensor, y: torch.Tensor) -> float:
    pred = model.predict(X, include_noise=True)
    return nlpd(y.cpu().numpy(), pred.mean.cpu().numpy(), pred.var.cpu().numpy())


def _loo_score(model: ExactGP) -> float:
    mean, var = loo_predictions(model)  # var holds the row's noise (σ²/c for c copies)
    return nlpd(model.y.cpu().numpy(), mean.cpu().numpy(), var.cpu().numpy())


def sample_size(budget: float | None, candidates: int = len(CANDIDATES)) -> int:
    """Rows of the candidates' sample: :data:`SAMPLE_ROWS`, fewer (in hundreds, at least
    100) where their fits by the exact GP's cost model would take more than
    :data:`BUDGET_SHARE` of ``budget`` seconds."""
    rows = SAMPLE_ROWS
    while budget is not None and rows > 100 and \
            candidates * exact_seconds(rows) > BUDGET_SHARE * budget:
        rows -= 100
    return rows


def kernel_for(method: Method, X: torch.Tensor, y: torch.Tensor, *, seed: int | None = None,
               budget: float | None = None) -> tuple[Kernel, str, KernelChoice | None]:
    """The kernel a fit with ``kernel="auto"`` uses: chosen from the (standardised) rows
    by :func:`choose_kernel` when ``method`` chooses, else :data:`DEFAULT_KERNEL`.
    Returns (a fresh kernel, its name, the choice or None)."""
    d = int(X.shape[1])
    if not method.chooses_kernel:
        return make_kernel(DEFAULT_KERNEL, d), DEFAULT_KERNEL, None
    choice, _ = choose_kernel(X, y, rows=sample_size(budget), seed=0 if seed is None else seed)
    return make_kernel(choice.kernel, d), choice.kernel, choice
