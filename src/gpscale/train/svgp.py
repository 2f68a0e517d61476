"""SVGP training: minibatch maximisation of the ELBO (Hensman et al. 2013, 2015) over
q(u), the inducing locations Z, the kernel hyperparameters and σ².

This is the inducing-point baseline of the unbiased-stochastic paper (Shoham & Avron,
§4-5): m inducing points = batch size, the same kernels (a :class:`FeatureKernel` on
the same feature map), AdaDelta/Adam, and the learned hyperparameters scored by the
*exact* NLML of the weight-space model (``evaluate="feature-nlml"``), keeping the
iterate with the best score as the paper reports.

``X`` may be :class:`~gpscale.io.Rows` (y None), rows that stay in their files: Z is then
drawn by reservoir sampling in one pass (plus one pass per k-means iteration), the
optimal q(u) start is one more pass, the minibatches come from a
:class:`~gpscale.train.batches.ShuffledStream` (``buffer_rows``), and each
``"feature-nlml"`` checkpoint is one statistics pass of a ``FeatureGP(rows=...)`` over
the partitions (on their dask cluster, if any). The SVGP itself never holds rows.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Iterable

import torch

from ..features import FeatureMap
from ..features.kernel import FeatureKernel
from ..io.rows import Rows, as_rows
from ..kernels import Kernel, Scale
from ..linalg import CholeskyError
from ..models.feature import FeatureGP
from ..models.svgp import SVGP
from ..validation import check_positive, check_xy
from .batches import ShuffledStream
from .minibatch import (
    check_batch_size,
    check_lr_schedule,
    make_generator,
    make_optimizer,
    run_minibatch,
)
from .result import FitResult, theta_of

INIT_METHODS = ("random", "kmeans")


@torch.no_grad()
def exact_feature_nlml(features: FeatureMap, X: torch.Tensor, y: torch.Tensor, noise,
                       variance=1.0, chunk: int | None = None) -> float:
    """Exact NLML per point of the weight-space GP K = s² ΦΦᵀ + σ²I (s² = ``variance``;
    FeatureGP with weights="fixed" when s² = 1), from one streaming pass over X (or over
    the partitions of ``X = Rows``, y None)."""
    noise, variance = check_positive("noise", noise), check_positive("variance", variance)
    weights = "fixed" if variance == 1.0 else "scalar"
    rows = as_rows(X, y)
    ref = next(itertools.chain(features.parameters(), features.buffers()),
               torch.zeros((), dtype=torch.float64))
    ref = rows.held[0] if rows.held is not None else ref  # rows in memory: their dtype
    dtype = ref.dtype if ref.is_floating_point() else torch.float64
    model = FeatureGP(features, rows=rows, noise=noise, weights=weights, chunk=chunk,
                      dtype=dtype, device=ref.device)
    if weights == "scalar":
        model.weight = torch.tensor([variance], dtype=model.noise.dtype)
    return float(model.nlml()) / model.n


def _feature_parts(kernel: Kernel) -> tuple[FeatureMap, Callable[[], float]]:
    """(feature map, signal variance) of FeatureKernel or Scale(FeatureKernel)."""
    if isinstance(kernel, FeatureKernel):
        return kernel.features, lambda: 1.0
    if isinstance(kernel, Scale) and isinstance(kernel.base, FeatureKernel):
        return kernel.base.features, lambda: float(kernel.outputscale.detach())
    raise ValueError("evaluate='feature-nlml' needs kernel=FeatureKernel(features) or "
                     f"Scale(FeatureKernel(features)), got {type(kernel).__name__}")


def init_inducing(X: torch.Tensor, num_inducing: int, init: str = "random",
                  seed: int | torch.Generator | None = 0, iters: int = 10) -> torch.Tensor:
    """Initial Z: ``"random"`` rows of X (without replacement, seeded) or ``"kmeans"``
    (``iters`` Lloyd iterations started from those rows)."""
    n = X.shape[0]
    _check_init(num_inducing, n, init)
    gen = make_generator(seed)
    idx = torch.randperm(n, generator=gen)[: int(num_inducing)].to(X.device)
    Z = X[idx].clone()
    if init == "kmeans":
        for _ in range(iters):
            Z = _lloyd(Z, [X])
    return Z


def init_inducing_stream(stream: ShuffledStream, num_inducing: int, init: str = "random",
                         seed: int | torch.Generator | None = 0, iters: int = 10
                         ) -> torch.Tensor:
    """:func:`init_inducing` over rows read from a source: ``"random"``, a uniform sample
    of ``num_inducing`` rows without replacement by reservoir sampling (Vitter's
    Algorithm R: row i > m replaces a random slot with probability m / i), one pass;
    ``"kmeans"``: then ``iters`` Lloyd iterations, one pass each."""
    m = int(num_inducing)
    _check_init(num_inducing, stream.num_rows, init)
    gen = make_generator(seed)
    Z, seen = None, 0
    for Xc, _ in stream.chunks():
        if Z is None:
            Z = Xc.new_empty(m, Xc.shape[1])
        c = Xc.shape[0]
        k = max(0, min(c, m - seen))
        Z[seen:seen + k] = Xc[:k]
        if c > k:  # rows seen+k+1, ..., seen+c (1-based) each draw a slot in [0, i)
            i = torch.arange(seen + k + 1, seen + c + 1, dtype=torch.float64)
            slot = (torch.rand(c - k, generator=gen, dtype=torch.float64) * i).long()
            for r in torch.nonzero(slot < m).flatten().tolist():  # in order: later win
                Z[slot[r]] = Xc[k + r]
        seen += c
    if init == "kmeans":
        for _ in range(iters):
            Z = _lloyd(Z, (Xc for Xc, _ in stream.chunks()))
    return Z


def _check_init(num_inducing: int, n: int, init: str) -> None:
    if isinstance(num_inducing, bool) or int(num_inducing) != num_inducing or num_inducing < 1:
        raise ValueError(f"num_inducing must be a positive integer, got {num_inducing!r}")
    if num_inducing > n:
        raise ValueError(f"num_inducing={num_inducing} exceeds the number of training rows "
                         f"n={n}; use at most n inducing points")
    if init not in INIT_METHODS:
        raise ValueError(f"init must be one of {INIT_METHODS}, got {init!r}")


def _lloyd(Z: torch.Tensor, chunks: Iterable[torch.Tensor]) -> torch.Tensor:
    """One Lloyd (k-means) iteration over row chunks; an empty cluster's centre stays."""
    sums, counts = torch.zeros_like(Z), None
    for X in chunks:
        assign = torch.cdist(X, Z).argmin(1)
        sums.index_add_(0, assign, X)
        c = torch.bincount(assign, minlength=Z.shape[0])
        counts = c if counts is None else counts + c
    counts = counts.to(Z.dtype)[:, None]
    return torch.where(counts > 0, sums / counts.clamp_min(1.0), Z)


def make_svgp(X, y, kernel: Kernel, num_inducing: int, noise: float = 0.1,
              seed: int | torch.Generator | None = 0, init: str = "random",
              whiten: bool = True, dtype: torch.dtype = torch.float64,
              device: torch.device | str | None = None
              ) -> tuple[SVGP, torch.Tensor, torch.Tensor]:
    """The initial SVGP (q at the prior, Z from :func:`init_inducing`) and validated X, y."""
    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel must be a gpscale Kernel, got {type(kernel).__name__}")
    X, y = check_xy(X, y, dtype, device)
    check_positive("noise", noise)
    Z = init_inducing(X, num_inducing, init, seed)
    model = SVGP(kernel, Z, num_data=X.shape[0], noise=noise, whiten=whiten, dtype=dtype,
                 device=X.device)
    return model, X, y


def _evaluator(evaluate, model: SVGP, X: torch.Tensor, y: torch.Tensor
               ) -> Callable[[], float] | None:
    if evaluate is None:
        return None
    if isinstance(evaluate, str):
        if evaluate != "feature-nlml":
            raise ValueError(f"evaluate must be None, 'feature-nlml' or a callable, "
                             f"got {evaluate!r}")
        features, variance = _feature_parts(model.kernel)
        return lambda: exact_feature_nlml(features, X, y, model.noise, variance())
    if not callable(evaluate):
        raise ValueError(f"evaluate must be None, 'feature-nlml' or a callable, got "
                         f"{type(evaluate).__name__}")
    takes_model = len(inspect.signature(evaluate).parameters) > 0

    def run() -> float:
        with torch.no_grad():
            return float(evaluate(model) if takes_model else evaluate())
    return run


def svgp_theta(model: SVGP) -> dict[str, list[float]]:
    """Hyperparameters of an SVGP (kernel and σ²; not q(u) or Z) by name."""
    out = {"noise": [float(model.noise.detach())]}
    out.update({f"kernel.{k}": v for k, v in theta_of(model.kernel).items()})
    return out


def fit_svgp(X, y, kernel: Kernel, num_inducing: int, batch_size: int, epochs: float = 10,
             optimizer: str = "adam", lr: float | None = None, lr_schedule: str = "constant",
             noise: float = 0.1, seed: int = 0, evaluate=None, eval_every: int | None = None,
             max_time: float | None = None, init: str = "random", whiten: bool = True,
             q_init: str = "optimal", progress: bool = False,
             dtype: torch.dtype = torch.float64,
             device: torch.device | str | None = None,
             buffer_rows: int | None = None) -> tuple[SVGP, FitResult]:
    """Maximise the minibatch ELBO over q(u), Z, the kernel and σ² (``kernel`` is
    trained in place). ``evaluate``: None, ``"feature-nlml"`` (exact weight-space NLML
    per point of a FeatureKernel's feature map with the SVGP's σ², see
    :func:`exact_feature_nlml`) or a callable (of the model, or of nothing) returning a
    value to minimise; the best-scoring iterate is kept (:func:`run_minibatch`). Without
    it the last iterate is kept and the history records the minibatch −ELBO/n
    (``batch_objective``). ``q_init="optimal"`` (default) starts q(u) at its optimum
    for the initial kernel, σ² and Z (:meth:`SVGP.set_optimal_q`, one pass over the
    data); ``"prior"`` starts it at p(u). From the prior, the variance term of the ELBO
    first pushes the kernel's scale down, which can switch a ReLU feature network off
    for good before q(u) has learned anything. ``lr_schedule``: ``"constant"``,
    ``"cosine"`` or ``"power"`` (:data:`~gpscale.train.minibatch.LR_SCHEDULES`).
    ``X = Rows`` (y None): trained from a source, see the module docstring;
    ``buffer_rows``: its shuffle buffer (:class:`~gpscale.train.batches.ShuffledStream`)."""
    if q_init not in ("optimal", "prior"):
        raise ValueError(f"q_init must be 'optimal' or 'prior', got {q_init!r}")
    lr_schedule = check_lr_schedule(lr_schedule)
    data = as_rows(X, y)
    if data.held is None:  # rows in files or on a cluster: minibatches through a buffer
        X, y = data, None
        model, stream = _streamed_svgp(data, kernel, num_inducing, batch_size, noise, seed,
                                       init, whiten, dtype, device, buffer_rows)
        if q_init == "optimal":
            model.set_optimal_q_chunks(stream.chunks())
        batches, rows = stream.epoch, lambda batch: batch
    else:
        if buffer_rows is not None:
            raise ValueError("buffer_rows applies to rows streamed from a source; "
                             "minibatches of X, y in memory come from a full permutation")
        model, X, y = make_svgp(*data.held, kernel, num_inducing, noise, seed, init, whiten,
                                dtype, device)
        if q_init == "optimal":
            model.set_optimal_q(X, y)
        batches, rows = None, lambda batch: (X[batch], y[batch])
    n = model.num_data
    batch_size = check_batch_size(batch_size, n)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(optimizer, params, lr)

    def step(batch, t: int) -> float:
        opt.zero_grad(set_to_none=True)
        try:
            loss = -model.elbo(*rows(batch)) / n
        except CholeskyError:
            return math.nan  # diverged: the loop stops and keeps the best iterate
        loss.backward()
        opt.step()
        return float(loss.detach())

    gen = make_generator(seed)
    gen.manual_seed(gen.initial_seed() + 1)  # batches independent of the Z draw
    result = run_minibatch(step, params, n, batch_size, epochs,
                           evaluate=_evaluator(evaluate, model, X, y), eval_every=eval_every,
                           seed=gen, max_time=max_time, device=model.Z.device,
                           progress=progress, method="svgp", theta=lambda: svgp_theta(model),
                           optimizers=(opt,), lr_schedule=lr_schedule, batches=batches)
    return model, result


def _streamed_svgp(rows: Rows, kernel: Kernel, num_inducing: int,
                   batch_size: int, noise: float, seed, init: str, whiten: bool,
                   dtype: torch.dtype, device, buffer_rows: int | None
                   ) -> tuple[SVGP, ShuffledStream]:
    """:func:`make_svgp` on rows read from a source, and the stream of their minibatches."""
    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel must be a gpscale Kernel, got {type(kernel).__name__}")
    check_positive("noise", noise)
    stream = ShuffledStream.from_rows(rows, batch_size, buffer_rows=buffer_rows, dtype=dtype,
                                      device=device)
    Z = init_inducing_stream(stream, num_inducing, init, seed)
    model = SVGP(kernel, Z, num_data=stream.num_rows, noise=noise, whiten=whiten,
                 dtype=dtype, device=Z.device)
    return model, stream
