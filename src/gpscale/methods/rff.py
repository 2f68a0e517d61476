"""``rff``: a finite-feature GP on orthogonal random Fourier features of the kernel's
spectral density (the weight-space model shared with MINIMAX/SCGD and GRIEF), ML-II by
L-BFGS from the streamed statistics ΦᵀΦ, Φᵀy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..deadline import Deadline
from ..features import RandomFourierFeatures
from ..features.rff import check_feature_memory
from ..io.rows import Rows, as_rows
from ..kernels import Kernel, spectral_facts
from ..models import FeatureGP
from ..sizes import available_memory
from ..train import FitResult, fit_lbfgs
from ..train.lbfgs import OUT_OF_TIME, warn_if_out_of_time
from ..validation import as_dtype, check_int, check_positive
from .options import takes_options
from .registry import register


def spectral_kind(kernel: Kernel, method: str) -> tuple[str, bool]:
    """('rbf' | 'matern12' | 'matern32' | 'matern52', ard) of a kernel whose spectral
    density the feature methods sample or expand, as the kernel itself says
    (:func:`gpscale.kernels.spectral_facts`, which also gives its initial values);
    ValueError naming the kernels that have one for any other."""
    facts = spectral_facts(kernel, method)
    return facts.name, facts.ard


def signal_variance(model: FeatureGP, outputscale: float) -> FeatureGP:
    """``model`` with its scalar weight w set to ``outputscale``: K = w ΦΦᵀ + σ²I with
    unit-variance features, so w is the kernel's signal variance s² (1, FeatureGP's
    own start, for a kernel without :class:`~gpscale.kernels.Scale`)."""
    model.weight = torch.full_like(model.weight, float(outputscale))
    return model


#: rff's number of features p when none is given
DEFAULT_NUM_FEATURES = 512
#: ``subsample="auto"`` learns θ on this many rows when n is over AUTO_ABOVE (the default
#: chosen by the measurement in benchmarks/results/scale-1e6)
AUTO_SUBSAMPLE, AUTO_ABOVE = 20_000, 100_000


def _feature_memory(options: dict[str, Any], num_features: int) -> None:
    """The planner's check, before any pass over the rows: p x p matrices that cannot fit
    are refused (:func:`check_feature_memory`); the options are checked too."""
    o = RFFOptions(**options)
    check_feature_memory(o.num_features, num_features, available_memory(), o.dtype)


@dataclass
class RFFOptions:
    """The options of ``method="rff"`` (:func:`fit_rff` says what each does), checked."""

    num_features: int = DEFAULT_NUM_FEATURES
    noise: float = 0.1
    max_iter: int = 200
    seed: int = 0
    subsample: int | str | None = "auto"
    refine: int = 0
    progress: bool = False
    device: torch.device | str | None = None
    dtype: torch.dtype | str = torch.float64
    time_limit: float | Deadline | None = None

    def __post_init__(self) -> None:
        self.num_features = check_int("num_features", self.num_features, 2)
        self.dtype = as_dtype(self.dtype)
        self.seed = check_int("seed", self.seed, 0)
        self.noise = check_positive("noise", self.noise)
        self.max_iter = check_int("max_iter", self.max_iter, 1)
        self.refine = check_int("refine", self.refine, 0)
        if self.subsample not in (None, "auto"):
            check_int("subsample", self.subsample, 2)
        Deadline.check(self.time_limit)


@register("rff", "random Fourier features (orthogonal), ML-II by L-BFGS: stationary "
          "kernels on many rows (10^5 and more), streamed from files or a cluster",
          reads="passes", size_check=_feature_memory)
@takes_options(RFFOptions)
def fit_rff(X: torch.Tensor | Rows, y: torch.Tensor | None, kernel: Kernel,
            **options: Any) -> tuple[FeatureGP, FitResult]:
    """Weight-space GP on ``num_features`` orthogonal random Fourier features of the
    kernel's spectral density, lengthscales, signal variance and noise by L-BFGS, starting
    from the kernel's lengthscales and signal variance. ``X``
    may be :class:`~gpscale.io.Rows` (y None): every L-BFGS evaluation is then a statistics
    pass and a gradient pass over the partitions, in process or on a dask cluster.

    At large n those passes dominate, so with ``subsample=m`` θ is learned (up to
    ``max_iter`` iterations) on a uniform random sample of about m rows held in memory,
    optionally refined by at most ``refine`` L-BFGS iterations on all rows (stopping
    early once the NLML stops moving); the model keeps the statistics of all rows, from
    one final pass. ``"auto"``: m = 20 000 when n is over 100 000, else every row.
    ``time_limit`` (seconds; ``method="auto"`` passes what is left of its budget): the
    searches stop between iterations once it has passed (and warn); the final pass
    runs."""
    o = RFFOptions(**options)
    deadline = Deadline.of(o.time_limit)
    facts = spectral_facts(kernel, "rff")
    rows = as_rows(X, y)
    d = rows.num_features
    dtype, device, noise, progress, seed = o.dtype, o.device, o.noise, o.progress, o.seed
    max_iter, refine = o.max_iter, o.refine
    check_feature_memory(o.num_features, d, available_memory(), dtype)  # before any work
    feats = RandomFourierFeatures(d, o.num_features,
                                  kernel=facts.density, lengthscale=facts.lengthscale,
                                  ard=facts.ard, seed=seed)

    def full(noise: float) -> FeatureGP:
        return FeatureGP(feats, rows=rows, noise=noise, dtype=dtype, device=device)

    n = rows.n
    m = _subsample_size(o.subsample, n)
    if m is None:
        model = signal_variance(full(noise), facts.outputscale)
        return model, warn_if_out_of_time(fit_lbfgs(
            model, max_iter=max_iter, progress=progress, method="rff", deadline=deadline),
            "rff's search")
    Xs, ys = rows.sample(m, seed)
    small = signal_variance(FeatureGP(feats, Xs, ys, noise=noise, dtype=dtype, device=device),
                            facts.outputscale)
    first = warn_if_out_of_time(fit_lbfgs(small, max_iter=max_iter, progress=progress,
                                          method="rff", deadline=deadline), "rff's search")
    model = full(float(small.noise.detach()))
    model.weight = small.weight.detach().clone()
    if refine == 0 or first.reason in ("interrupted", OUT_OF_TIME):
        return model, first
    result = warn_if_out_of_time(fit_lbfgs(model, max_iter=refine, progress=progress,
                                           method="rff", ftol=REFINE_FTOL,
                                           deadline=deadline), "rff's search")
    result.history = [{**h, "phase": "subsample"} for h in first.history] + [
        {**h, "phase": "all rows"} for h in result.history]
    result.n_evals += first.n_evals
    result.wall_s += first.wall_s
    return model, result


#: the full-data refinement stops once an iteration lowers the NLML by less than this
#: fraction of it
REFINE_FTOL = 1e-6



def _subsample_size(subsample: int | str | None, n: int) -> int | None:
    if subsample is None:
        return None
    if subsample == "auto":
        return AUTO_SUBSAMPLE if n > AUTO_ABOVE else None
    m = check_int("subsample", subsample, 2)
    return m if m < n else None
