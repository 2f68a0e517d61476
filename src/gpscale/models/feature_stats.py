"""The feature-GP statistics pass and its gradient pass over row partitions, in this
process or as tasks on the dask workers that read the data (:mod:`gpscale.parallel`).

A finite-feature GP needs only S = (ΦᵀΦ, Φᵀy, yᵀy, n), a sum over rows. Here the rows
come in *partitions* (see :mod:`gpscale.parallel.reduce`); each partition's share is a
pure function of (feature map, partition, scaler), so it runs unchanged in this process
or on a dask worker, and only p x p results travel: the partition results are added
along one fixed tree, in partition order, on the workers or here (streamed), so both
paths give the same numbers.

The gradient of any scalar of (ΦᵀΦ, Φᵀy) in the feature map's parameters θ is a second
pass with the upstream gradients G = ∂/∂(ΦᵀΦ), g = ∂/∂(Φᵀy):
∂/∂Φ ⟨G, ΦᵀΦ⟩ + ⟨g, Φᵀy⟩ = Φ(G + Gᵀ) + y gᵀ, contracted through each chunk's recomputed
Φ(θ) by autograd. :class:`StreamedStatistics` wires the two passes into torch autograd.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from ..linalg.gram import add_upper_gram_, mirror_upper
from ..parallel.cluster import sum_over_partitions, worker_threads
from ..parallel.reduce import check_partitions, stream_sum
from ..sizes import CHUNK_BYTES
from ..validation import as_matrix, as_vector

if TYPE_CHECKING:
    from ..io.batch import Partition


class Statistics(NamedTuple):
    """Sufficient statistics of a finite-feature GP: ΦᵀΦ (p, p), Φᵀy (p,), yᵀy, n."""

    gram: torch.Tensor
    proj: torch.Tensor
    yy: torch.Tensor
    n: int


# -- pure task functions (run on a worker or here) ------------------------------------

def partition_statistics(
    features: torch.nn.Module, partition: Partition, scaler: Any = None,
    rows: int | None = None, dtype: torch.dtype | None = None,
) -> Statistics:
    """(ΦᵀΦ, Φᵀy, yᵀy, n) of one partition, read and summed chunk by chunk in order.

    ``scaler`` (``transform_x``/``transform_y``, e.g. a ``Standardizer``) is applied to
    each raw chunk; ``dtype`` defaults to the feature map's."""
    worker_threads()
    dtype = dtype or _dtype_of(features)
    device = _device_of(features)
    p = features.num_features
    gram = torch.zeros(p, p, dtype=dtype, device=device)
    proj = torch.zeros(p, dtype=dtype, device=device)
    yy = torch.zeros((), dtype=dtype, device=device)
    n = 0
    with torch.no_grad():
        for X, y in _chunks(partition, scaler, chunk_rows(features, rows), dtype, device):
            phi = features(X)
            add_upper_gram_(gram, phi)
            proj.addmv_(phi.mT, y)
            yy += y @ y
            n += X.shape[0]
    return Statistics(mirror_upper(gram), proj, yy, n)


def partition_gradients(
    features: torch.nn.Module, partition: Partition, scaler: Any, rows: int | None,
    g_gram: torch.Tensor, g_proj: torch.Tensor, dtype: torch.dtype | None = None,
) -> list[torch.Tensor]:
    """∂/∂θ [⟨G, ΦᵀΦ⟩ + ⟨g, Φᵀy⟩] over one partition, for each trainable parameter θ of
    ``features`` (``requires_grad``, in ``features.parameters()`` order); zeros for a
    parameter Φ does not use. Each chunk's Φ is recomputed, ∂/∂Φ = Φ(G + Gᵀ) + y gᵀ."""
    worker_threads()
    dtype = dtype or _dtype_of(features)
    params = trainable(features)
    acc = [torch.zeros_like(t, requires_grad=False) for t in params]
    if not params:
        return acc
    sym = (g_gram + g_gram.mT).detach().to(dtype)
    g_proj = g_proj.detach().to(dtype)
    for X, y in _chunks(partition, scaler, chunk_rows(features, rows), dtype,
                        _device_of(features)):
        with torch.enable_grad():
            phi = features(X)
        g_phi = phi.detach() @ sym + torch.outer(y, g_proj)
        parts = torch.autograd.grad(phi, params, g_phi, allow_unused=True)
        for a, part in zip(acc, parts):
            if part is not None:
                a += part
    return acc


# -- reducers -------------------------------------------------------------------------

def statistics(
    features: torch.nn.Module, partitions: Sequence[Partition], *, scaler: Any = None,
    client: Any = None, rows: int | None = None, dtype: torch.dtype | None = None,
) -> Statistics:
    """Σ over ``partitions`` of :func:`partition_statistics`: a loop here when ``client``
    is None, else one task per partition on the cluster and a tree sum on the workers
    (the same tree, in partition order, as the loop). Not differentiable: see
    :func:`streamed_statistics`."""
    partitions = check_partitions(partitions)
    if client is None:
        return stream_sum(partition_statistics(features, part, scaler, rows, dtype)
                          for part in partitions)
    return sum_over_partitions(client, partition_statistics, partitions, features, scaler,
                               rows, dtype=dtype)


def statistics_gradients(
    features: torch.nn.Module, partitions: Sequence[Partition], g_gram: torch.Tensor,
    g_proj: torch.Tensor, *, scaler: Any = None, client: Any = None, rows: int | None = None,
    dtype: torch.dtype | None = None,
) -> list[torch.Tensor]:
    """Σ over ``partitions`` of :func:`partition_gradients` (same loop / tree as
    :func:`statistics`): the gradient of ⟨g_gram, ΦᵀΦ⟩ + ⟨g_proj, Φᵀy⟩ in each trainable
    parameter of ``features``."""
    partitions = check_partitions(partitions)
    if not trainable(features):
        return []
    g_gram, g_proj = g_gram.detach(), g_proj.detach()
    if client is None:
        return stream_sum(partition_gradients(features, part, scaler, rows, g_gram, g_proj,
                                              dtype) for part in partitions)
    return sum_over_partitions(client, partition_gradients, partitions, features, scaler,
                               rows, g_gram, g_proj, dtype=dtype)


class StreamedStatistics(torch.autograd.Function):
    """(ΦᵀΦ, Φᵀy, yᵀy, n) over partitions, differentiable in the feature parameters.

    ``apply(features, partitions, scaler, client, rows, dtype, *params)`` with ``params``
    the trainable parameters of ``features`` in ``parameters()`` order (as
    :func:`streamed_statistics` passes them). Backward runs :func:`statistics_gradients`
    on the same partitions (and the same cluster)."""

    @staticmethod
    def forward(ctx, features, partitions, scaler, client, rows, dtype, *params):  # noqa: D102
        s = statistics(features, partitions, scaler=scaler, client=client, rows=rows,
                       dtype=dtype)
        ctx.args = (features, partitions, scaler, client, rows, dtype)
        ctx.save_for_backward(*params)
        n = torch.tensor(s.n)
        ctx.mark_non_differentiable(s.yy, n)
        return s.gram, s.proj, s.yy, n

    @staticmethod
    def backward(ctx, g_gram, g_proj, _g_yy, _g_n):  # noqa: D102
        ctx.saved_tensors  # noqa: B018 - raises if a parameter was changed in place since
        features, partitions, scaler, client, rows, dtype = ctx.args
        needs = ctx.needs_input_grad[6:]
        if not any(needs):
            return (None,) * (6 + len(needs))
        grads = statistics_gradients(features, partitions, g_gram, g_proj, scaler=scaler,
                                     client=client, rows=rows, dtype=dtype)
        return (None,) * 6 + tuple(g if need else None for g, need in zip(grads, needs))


def streamed_statistics(
    features: torch.nn.Module, partitions: Sequence[Partition], scaler: Any = None,
    client: Any = None, rows: int | None = None, dtype: torch.dtype | None = None,
) -> Statistics:
    """:func:`statistics` with gradients: ΦᵀΦ and Φᵀy carry autograd history to the
    trainable parameters of ``features`` (yᵀy and n do not depend on them)."""
    partitions = check_partitions(partitions)
    params = trainable(features)
    gram, proj, yy, n = StreamedStatistics.apply(features, partitions, scaler, client, rows,
                                                 dtype, *params)
    return Statistics(gram, proj, yy, int(n))


# -- helpers --------------------------------------------------------------------------

def trainable(features: torch.nn.Module) -> list[torch.Tensor]:
    """The parameters of ``features`` that require a gradient, in ``parameters()`` order."""
    return [t for t in features.parameters() if t.requires_grad]


def _dtype_of(features: torch.nn.Module) -> torch.dtype:
    for t in itertools.chain(features.parameters(), features.buffers()):
        if t.is_floating_point():
            return t.dtype
    return torch.float64


def _device_of(features: torch.nn.Module) -> torch.device:
    for t in itertools.chain(features.parameters(), features.buffers()):
        return t.device
    return torch.device("cpu")


def chunk_rows(features: torch.nn.Module, rows: int | None = None) -> int:
    """Rows per chunk of a pass: ``rows``, checked, or by default as many as keep one
    chunk of Φ and its temporaries near ``CHUNK_BYTES``."""
    if rows is None:
        return max(1, CHUNK_BYTES // (8 * 4 * features.num_features))
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise ValueError(f"rows (chunk size) must be an integer >= 1, got {rows!r}")
    return int(rows)


def _chunks(partition: Partition, scaler: Any, rows: int, dtype: torch.dtype,
            device: torch.device | None = None):
    """The partition's chunks, scaled and checked, as torch (X, y) on ``device``."""
    for X, y in partition.chunks(rows):
        if scaler is not None:
            X, y = scaler.transform_x(X), scaler.transform_y(y)
        if len(X) == 0 and len(y) == 0:
            continue
        X, y = as_matrix(X, "X", dtype, device), as_vector(y, "y", dtype, device)
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"a chunk of {type(partition).__name__} has {X.shape[0]} rows "
                             f"of X but {y.shape[0]} targets")
        yield X, y
