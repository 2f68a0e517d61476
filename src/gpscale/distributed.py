"""The seam to dask.distributed: the feature-GP statistics pass and its gradient pass
over row partitions, run in-process or as tasks on the workers that read the data.

A finite-feature GP needs only S = (ΦᵀΦ, Φᵀy, yᵀy, n), a sum over rows. Here the rows
come in *partitions* (anything with ``chunks(rows)`` yielding raw (X, y) numpy chunks and
``num_rows``); each partition's share is a pure function of (feature map, partition,
scaler), so it runs unchanged in this process or on a dask worker, and only p x p
results travel: workers add them up pairwise-in-groups (a fixed tree, in partition
order) and the client receives one S. The in-process loop sums along the same tree
(streamed, O(FAN_IN · log k) results held), so both paths give the same numbers.

The gradient of any scalar of (ΦᵀΦ, Φᵀy) in the feature map's parameters θ is a second
pass with the upstream gradients G = ∂/∂(ΦᵀΦ), g = ∂/∂(Φᵀy):
∂/∂Φ ⟨G, ΦᵀΦ⟩ + ⟨g, Φᵀy⟩ = Φ(G + Gᵀ) + y gᵀ, contracted through each chunk's recomputed
Φ(θ) by autograd. :class:`StreamedStatistics` wires the two passes into torch autograd.

A partition is any picklable object with ``num_rows`` and ``chunks(rows)`` yielding
(X, y) pairs (numpy arrays or tensors): the partitions of a :mod:`gpscale.io` source,
or :class:`gpscale.io.rows.TensorPartition` for rows held in memory. Optionally
``delayed``: a dask ``Delayed`` computing the rows where they live, as an (X, y) pair,
or as anything a ``to_xy(value) -> (X, y)`` attribute converts (give it as a plain or
static function: it travels to the worker with the task).

dask.distributed is optional (``pip install 'gpscale[distributed]'``) and imported only
when a cluster is asked for (:func:`connect`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import itertools
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from .kernels.chunked import PreparedColumns, block_matmul, dense_block, prepare_columns
from .linalg.gram import add_upper_gram_, mirror_upper
from .linalg.lowrank import extend_rows, ordered_sum, pivot_columns
from .linalg.operator import KernelOperator, contract_rows, row_blocks
from .preprocessing import Moments, Standardizer, chunk_moments
from .sizes import CHUNK_BYTES

if TYPE_CHECKING:
    from .io.batch import Partition
from .validation import as_matrix, as_vector

#: partition results added per task (and per node of the in-process tree)
FAN_IN = 8
#: rows per chunk of the standardisation pass (it holds one (rows, d) block at a time)
MOMENT_ROWS = 65_536
_INSTALL = "pip install 'gpscale[distributed]'"
_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[\w.-]+):(\d{1,5})$")


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
    _worker_threads()
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
    _worker_threads()
    dtype = dtype or _dtype_of(features)
    params = _trainable(features)
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
    partitions = _check_partitions(partitions)
    if client is None:
        return _stream_sum(partition_statistics(features, part, scaler, rows, dtype)
                           for part in partitions)
    return _cluster_sum(client, partition_statistics, partitions, features, scaler, rows,
                        dtype=dtype)


def statistics_gradients(
    features: torch.nn.Module, partitions: Sequence[Partition], g_gram: torch.Tensor,
    g_proj: torch.Tensor, *, scaler: Any = None, client: Any = None, rows: int | None = None,
    dtype: torch.dtype | None = None,
) -> list[torch.Tensor]:
    """Σ over ``partitions`` of :func:`partition_gradients` (same loop / tree as
    :func:`statistics`): the gradient of ⟨g_gram, ΦᵀΦ⟩ + ⟨g_proj, Φᵀy⟩ in each trainable
    parameter of ``features``."""
    partitions = _check_partitions(partitions)
    if not _trainable(features):
        return []
    g_gram, g_proj = g_gram.detach(), g_proj.detach()
    if client is None:
        return _stream_sum(partition_gradients(features, part, scaler, rows, g_gram, g_proj,
                                               dtype) for part in partitions)
    return _cluster_sum(client, partition_gradients, partitions, features, scaler, rows,
                        g_gram, g_proj, dtype=dtype)


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
    partitions = _check_partitions(partitions)
    params = _trainable(features)
    gram, proj, yy, n = StreamedStatistics.apply(features, partitions, scaler, client, rows,
                                                 dtype, *params)
    return Statistics(gram, proj, yy, int(n))


def partition_moments(partition: Partition, rows: int = MOMENT_ROWS) -> tuple[Any, Any]:
    """:class:`~gpscale.preprocessing.Moments` of X's columns and of y over one partition."""
    return chunk_moments(partition.chunks(rows))


def _value_moments(value: Any, to_xy: Any, rows: int) -> tuple[Any, Any]:
    return partition_moments(_as_partition(value, to_xy), rows)


def source_scaler(partitions: Sequence[Partition], client: Any = None,
                  rows: int = MOMENT_ROWS) -> Standardizer:
    """The :class:`~gpscale.preprocessing.Standardizer` of all the partitions' rows from
    one pass: per-partition moments (on the workers when ``client`` is given), merged
    here in partition order."""
    partitions = _check_partitions(partitions)
    if client is None:
        parts = [partition_moments(p, rows) for p in partitions]
    else:
        futures = []
        for part in partitions:
            delayed = getattr(part, "delayed", None)
            if delayed is None:
                futures.append(client.submit(partition_moments, part, rows, pure=False))
            else:
                futures.append(client.submit(_value_moments, client.compute(delayed),
                                             getattr(part, "to_xy", None), rows, pure=False))
        parts = client.gather(futures)
    mx = Moments.combine(p[0] for p in parts)
    my = None if parts[0][1] is None else Moments.combine(p[1] for p in parts)
    return Standardizer.from_moments(mx, my)


def fold_map(client: Any, fn: Callable[..., Any], items: Iterable[Any], **shared: Any) -> list:
    """``[fn(item, **shared) for item in items]``, in order: a loop when ``client`` is
    None, else one task per item (e.g. K-fold ADMM folds, CholQR candidate batches).

    ``fn`` must be a pure, module-level function (it is pickled by reference, and the
    items and results must pickle too); each ``shared`` value is sent to the cluster
    once, not once per item. Torch uses the worker's thread count inside ``fn``."""
    items = list(items)
    if client is None:
        return [fn(item, **shared) for item in items]
    shipped = {k: client.scatter([v], hash=False)[0] for k, v in shared.items()}
    futures = [client.submit(_call, fn, item, pure=False, **shipped) for item in items]
    return client.gather(futures)


# -- kernel products: the exact GP's reduction -----------------------------------------

def _block_products(bounds: Sequence[tuple[int, int]], form: Any, X: torch.Tensor,
                    cols: Any, columns: tuple[int, int], V: torch.Tensor) -> torch.Tensor:
    """K(X[s:e], X[c0:c1]) V for consecutive row blocks (s, e), stacked, with (c0, c1) =
    ``columns``: one task's share of a product (a pure function of the kernel's form,
    the rows, their prepared columns and V;
    :func:`gpscale.kernels.chunked.block_matmul`)."""
    _worker_threads()
    cols = _column_range(cols, columns)
    return torch.cat([block_matmul(form, X[s:e], cols, V) for s, e in bounds])


def _column_range(cols: PreparedColumns, columns: tuple[int, int]) -> PreparedColumns:
    """The prepared columns of rows c0..c1 (the same centre, so the same numbers)."""
    c0, c1 = columns
    if (c0, c1) == (0, cols.B.shape[0]):
        return cols
    return PreparedColumns(cols.B[c0:c1], cols.centre)


def even_runs(items: Sequence[Any], count: int) -> list[list[Any]]:
    """``items`` cut into ``count`` consecutive runs (fewer where there are fewer items)
    whose lengths differ by at most one, the longer first: 25 row blocks in 4 tasks are
    7, 6, 6, 6 (so two workers hold 13 and 12), not 7, 7, 7, 4 (14 and 11)."""
    count = min(max(1, int(count)), len(items))
    if not count:
        return []
    size, extra = divmod(len(items), count)
    edges = list(itertools.accumulate([size + 1] * extra + [size] * (count - extra),
                                      initial=0))
    return [list(items[a:b]) for a, b in zip(edges, edges[1:])]


class ClusterOperator(KernelOperator):
    """A :class:`~gpscale.linalg.operator.KernelOperator` whose products K(X, X) V run
    on a dask cluster: X, the kernel's form and the prepared columns go to every worker
    once, when the operator is made; each product then sends V (n x k) and gets back
    the row blocks of K V, about ``tasks_per_worker`` tasks per worker, each a run of the
    operator's own row blocks (so the blocks and their sums are the in-process ones).
    Products and contractions of one rectangle of K, K(X[r0:r1], X[c0:c1]), run there
    too (:meth:`range_products`, :meth:`range_contraction`: GPCV-ADMM's K_VT and K_TT
    on the rows [X_T; X_V]). Products with other rows (predictions) stay in process; the
    preconditioner's factor is built and kept on the workers (:meth:`factor_store`)."""

    def __init__(self, kernel: Any, X: torch.Tensor, noise: torch.Tensor | float,
                 client: Any, block: int | None = None,
                 block_dtype: torch.dtype | None = None, tasks_per_worker: int = 2) -> None:
        super().__init__(kernel, X, noise, block, block_dtype)
        self.client = client
        self._tasks = tasks_per_worker * max(1, len(client.scheduler_info().get("workers",
                                                                                 {})))
        self._groups = self._runs((0, self.n))
        cols = type(self.cols)(*(_cpu(t) for t in self.cols))
        self._there = client.scatter([self.form, _cpu(self.X), cols], broadcast=True,
                                     hash=False)

    def _runs(self, rows: tuple[int, int]) -> list[list[tuple[int, int]]]:
        """The row blocks of rows r0..r1 in runs of nearly equal length, one per task."""
        r0, r1 = rows
        blocks = [(r0 + s, r0 + e) for s, e in row_blocks(r1 - r0, self.block)]
        return even_runs(blocks, self._tasks)

    def _range(self, span: tuple[int, int] | None) -> tuple[int, int]:
        a, b = (0, self.n) if span is None else (int(span[0]), int(span[1]))
        if not 0 <= a <= b <= self.n:
            raise ValueError(f"row range {span} is not within the operator's {self.n} rows")
        return a, b

    def _rectangle(self, rows: tuple[int, int] | None, columns: tuple[int, int] | None
                   ) -> tuple[int, tuple[int, int], list[list[tuple[int, int]]]]:
        """(r0, (c0, c1), the tasks' runs of row blocks) of K(X[r0:r1], X[c0:c1])."""
        (r0, r1), span = self._range(rows), self._range(columns)
        groups = self._groups if (r0, r1) == (0, self.n) else self._runs((r0, r1))
        return r0, span, groups

    def row_products(self, X1: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        if X1 is not self.X:
            return super().row_products(X1, V)
        return self.range_products(None, None, V)

    @torch.no_grad()
    def range_products(self, rows: tuple[int, int] | None, columns: tuple[int, int] | None,
                       V: torch.Tensor) -> torch.Tensor:
        """K(X[r0:r1], X[c0:c1]) V on the workers, for row ranges ``rows`` = (r0, r1) and
        ``columns`` = (c0, c1) of the operator's X (None: all rows); V ((c1 − c0,) or
        (c1 − c0, k), in X's dtype) is sent once."""
        _, span, groups = self._rectangle(rows, columns)
        if V.shape[0] != span[1] - span[0]:
            raise ValueError(f"V has {V.shape[0]} rows for {span[1] - span[0]} columns")
        V2 = V[:, None] if V.ndim == 1 else V
        if groups:
            form, X, cols = self._there
            V_there = self.client.scatter(_cpu(V2), broadcast=True, hash=False)
            futures = [self.client.submit(_block_products, g, form, X, cols, span, V_there,
                                          pure=False) for g in groups]
            out = torch.cat(self.client.gather(futures)).to(V.device)
        else:
            out = V2.new_zeros(0, V2.shape[1])
        return out[:, 0] if V.ndim == 1 else out

    def contraction(self, left: torch.Tensor, right: torch.Tensor) -> list[torch.Tensor]:
        """As :meth:`KernelOperator.contraction`, one task per group of row blocks (the
        kernel at its current values, left and right sent once per call); the
        gradients are summed here, in the order of the kernel's trainable parameters."""
        return self.range_contraction(None, None, left, right)

    def range_contraction(self, rows: tuple[int, int] | None,
                          columns: tuple[int, int] | None, left: torch.Tensor,
                          right: torch.Tensor) -> list[torch.Tensor]:
        """Gradients of ⟨left rightᵀ, K(X[r0:r1], X[c0:c1])⟩ in the kernel's trainable
        parameters (their order), left (r1 − r0) x k and right (c1 − c0) x k: one task
        per run of row blocks, summed here."""
        r0, span, groups = self._rectangle(rows, columns)
        form, X, cols = self._there
        here = self.kernel if self.X.device.type == "cpu" else copy.deepcopy(self.kernel).cpu()
        kernel, lr = self.client.scatter([here, [_cpu(left), _cpu(right)]],
                                         broadcast=True, hash=False)
        futures = [self.client.submit(_block_contractions, g, kernel, form, cols, X, r0, span,
                                      lr, pure=False) for g in groups]
        parts = self.client.gather(futures)
        device = left.device
        if not parts:
            return [torch.zeros_like(p) for p in self.kernel.parameters() if p.requires_grad]
        return [sum(p[i] for p in parts).to(device) for i in range(len(parts[0]))]

    def factor_store(self, capacity: int, scale: torch.Tensor | None = None) -> ClusterFactor:
        """A preconditioner's factor whose row blocks are built and kept on the workers
        (:class:`ClusterFactor`), not in this process."""
        return ClusterFactor(self, capacity, scale)

    def factor_memory(self) -> int | None:
        """The workers' memory limits added up (None where a worker has none): the
        factor's rows live there."""
        limits = [w.get("memory_limit") or 0
                  for w in self.client.scheduler_info().get("workers", {}).values()]
        return sum(limits) if limits and all(limits) else None


class ClusterFactor:
    """A tall factor L (n x r) whose rows live on the dask workers, one block of rows per
    task group of a :class:`ClusterOperator`, each block pinned to one worker: randomly
    pivoted Cholesky builds it there (:func:`gpscale.linalg.lowrank.rp_cholesky` with
    ``store=``), and the Woodbury apply of the preconditioner
    (:func:`gpscale.linalg.lowrank.low_rank_inverse`) multiplies with it there. Only
    n-vectors and r-sized blocks travel; the client never holds n x r numbers, so the
    factor may use the workers' memory added up (:meth:`ClusterOperator.factor_memory`).

    Rounds of the build (:func:`~gpscale.linalg.lowrank.rp_cholesky` draws the pivots S
    and finds H = G_S's eigendecomposition T in the client): :meth:`pivot_block` has
    every worker form G_b = K(X_b, X_S) − L_b L_Sᵀ for its block (kept there) and send
    back the rows of G at S; :meth:`extend` has it write F_b = G_b T into its block, in
    place, and send back ‖F_i‖² of its rows: the in-process steps
    (:class:`~gpscale.linalg.lowrank.DenseFactor`), one block of rows at a time. A
    block is preallocated at ``capacity`` columns and trimmed to the rank found by
    :meth:`factor`. The blocks are freed with this object."""

    def __init__(self, op: ClusterOperator, capacity: int,
                 scale: torch.Tensor | None = None) -> None:
        self.client, self.n, self.capacity = op.client, op.n, int(capacity)
        self.dtype, self.device = op.dtype, op.device
        self.rank = 0
        self._op, self._scale = op, None if scale is None else scale.to(op.X)
        self._bounds = [(g[0][0], g[-1][1]) for g in op._groups]
        workers = sorted(self.client.scheduler_info().get("workers", {}))
        self._where = [[workers[i % len(workers)]] for i in range(len(self._bounds))]
        self._blocks = [self.client.submit(_empty_rows, e - s, self.capacity, self.dtype,
                                           workers=w, pure=False)
                        for (s, e), w in zip(self._bounds, self._where)]
        self._scales = [None] * len(self._bounds) if scale is None else [
            self.client.scatter(_cpu(self._scale[s:e]), workers=w, hash=False)
            for (s, e), w in zip(self._bounds, self._where)]
        self._G: list[Any] = []

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.rank)

    def _on_blocks(self, fn: Callable[..., Any], blocks: Sequence[Any], *args: Any,
                   per_block: Sequence[Sequence[Any]] = ()) -> list[Any]:
        """Futures of ``fn(blocks[i], *per_block[i], *args)``, each on its block's worker."""
        extra = per_block or [()] * len(blocks)
        return [self.client.submit(fn, b, *x, *args, workers=w, pure=False)
                for b, w, x in zip(blocks, self._where, extra)]

    def _each(self, fn: Callable[..., Any], *args: Any, per_block: Sequence[Any] = ()
              ) -> list[Any]:
        """``fn(block, *per_block[i], *args)`` on every block's worker, gathered in order."""
        return self.client.gather(self._on_blocks(fn, self._blocks, *args,
                                                  per_block=per_block))

    def _local(self, S: torch.Tensor) -> tuple[list[torch.Tensor], list[tuple]]:
        """For each block: the positions in S of its pivots, and their row numbers in it."""
        picks = [((S >= s) & (S < e)).nonzero().reshape(-1) for s, e in self._bounds]
        return picks, [(_cpu(S[i] - s),) for i, (s, _) in zip(picks, self._bounds)]

    # -- the build (rp_cholesky's store) ---------------------------------------------
    def pivot_block(self, S: torch.Tensor, m: int) -> torch.Tensor:
        """Has every worker form G_b = K(X_b, X_S) − L_b L_Sᵀ (scaled) and returns G_S."""
        op, S = self._op, S.to(self.device)
        picks, local = self._local(S)
        L_S = op.X.new_zeros(S.numel(), m)
        if m:
            for i, rows in zip(picks, self._each(_rows_of, m, per_block=local)):
                L_S[i] = rows.to(L_S)
        cols = prepare_columns(op.form, op.X[S])
        s_S = None if self._scale is None else _cpu(self._scale[S])
        form, X, _ = op._there
        shared = self.client.scatter([type(cols)(*(_cpu(t) for t in cols)), _cpu(L_S), s_S],
                                     broadcast=True, hash=False)
        per = [(X, b, sc) for b, sc in zip(self._bounds, self._scales)]
        self._G = self._on_blocks(_block_pivot_columns, self._blocks, form, *shared, m,
                                  per_block=per)
        H = L_S.new_zeros(S.numel(), S.numel())
        for i, rows in zip(picks, self.client.gather(
                self._on_blocks(_rows_of, self._G, None, per_block=local))):
            H[i] = rows.to(H)
        return H

    def extend(self, T: torch.Tensor, m: int) -> torch.Tensor:
        """Every block writes F_b = G_b T into columns m, m + 1, ... and returns ‖F_i‖²."""
        T_there = self.client.scatter(_cpu(T), broadcast=True, hash=False)
        per = [(G,) for G in self._G]
        parts = self._each(_extend_block, T_there, m, per_block=per)
        self._G = []
        return torch.cat(parts).to(self.device)

    def factor(self, m: int) -> ClusterFactor:
        """This factor, of rank m (blocks trimmed to m columns when fewer)."""
        if m < self.capacity:
            self._blocks = [self.client.submit(_first_columns, b, m, workers=w, pure=False)
                            for b, w in zip(self._blocks, self._where)]
        self.rank = self.capacity = m
        return self

    # -- products (low_rank_inverse's and the probes' operations) --------------------
    def __matmul__(self, W: torch.Tensor) -> torch.Tensor:
        """L W (n x k) from W (r x k)."""
        W_there = self.client.scatter(_cpu(W), broadcast=True, hash=False)
        return torch.cat(self._each(_rows_times, W_there)).to(W)

    def _by_row_block(self, fn: Callable[..., Any], *args: Any, per_block: Sequence = ()
                      ) -> torch.Tensor:
        """The sum over the operator's row blocks of ``fn(rows of L, *per_block[i],
        *args)``, added here in block order (as
        :class:`~gpscale.linalg.lowrank.BlockedFactor` adds them), one part at a time.
        At most two parts per worker are asked for ahead of the sum, so that a worker
        does not hold every part of its rows at once (LᵀL's are r x r each)."""
        extra = per_block or [()] * len(self._blocks)
        tasks = [(b, w, s - group[0][0], e - group[0][0], x)
                 for b, w, x, group in zip(self._blocks, self._where, extra, self._op._groups)
                 for s, e in group]
        ahead = 2 * len({w[0] for w in self._where})

        def parts() -> Iterator[torch.Tensor]:
            pending: collections.deque = collections.deque()
            for i in range(len(tasks)):
                while len(pending) < ahead and i + len(pending) < len(tasks):
                    b, w, lo, hi, x = tasks[i + len(pending)]
                    pending.append(self.client.submit(fn, b, lo, hi, *x, *args, workers=w,
                                                      pure=False))
                yield pending.popleft().result()

        return ordered_sum(parts()).to(self.device)

    def t_matmul(self, R: torch.Tensor) -> torch.Tensor:
        """Lᵀ R (r x k) from R (n x k)."""
        parts = [(self.client.scatter(_cpu(R[s:e]), workers=w, hash=False),)
                 for (s, e), w in zip(self._bounds, self._where)]
        return self._by_row_block(_rows_t_times, per_block=parts).to(R)

    def gram(self) -> torch.Tensor:
        """LᵀL (r x r)."""
        return self._by_row_block(_gram_of)


def _empty_rows(rows: int, capacity: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(rows, capacity, dtype=dtype)


def _rows_of(block: torch.Tensor, local: torch.Tensor, m: int | None) -> torch.Tensor:
    return block[local, :m].clone()


def _block_pivot_columns(block: torch.Tensor, X: torch.Tensor, bounds: tuple[int, int],
                         scale: Any, form: Any, cols: Any, L_S: torch.Tensor, s_S: Any,
                         m: int) -> torch.Tensor:
    """One block's G_b = K(X_b, X_S) − L_b L_Sᵀ in a round of :meth:`ClusterFactor.pivot_block`."""
    _worker_threads()
    s, e = bounds
    return pivot_columns(dense_block(form, X[s:e], cols).to(block.dtype), block[:, :m], L_S,
                         scale, s_S)


def _extend_block(block: torch.Tensor, G: torch.Tensor, T: torch.Tensor, m: int
                  ) -> torch.Tensor:
    """One block's share of :meth:`ClusterFactor.extend`: writes into ``block`` in place
    (the worker's own object, held by the factor's future)."""
    _worker_threads()
    return extend_rows(block, G, T, m)


def _first_columns(block: torch.Tensor, m: int) -> torch.Tensor:
    return block[:, :m].clone()


def _rows_times(block: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    _worker_threads()
    return block @ W.to(block)


def _rows_t_times(block: torch.Tensor, lo: int, hi: int, R: torch.Tensor) -> torch.Tensor:
    _worker_threads()
    return block[lo:hi].mT @ R[lo:hi].to(block)


def _gram_of(block: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    _worker_threads()
    return block[lo:hi].mT @ block[lo:hi]


def _block_contractions(bounds: Sequence[tuple[int, int]], kernel: Any, form: Any, cols: Any,
                        X: torch.Tensor, r0: int, columns: tuple[int, int],
                        left_right: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One task's share of a distributed contraction
    (:func:`gpscale.linalg.operator.contract_rows`) of the rows from r0 (where ``left``
    starts) against the columns ``columns``."""
    _worker_threads()
    c0, c1 = columns
    return contract_rows(kernel, form, _column_range(cols, columns), X[r0:],
                         [(s - r0, e - r0) for s, e in bounds], *left_right, X2=X[c0:c1])


def _cpu(t: Any) -> Any:
    return t.cpu() if isinstance(t, torch.Tensor) else t


# -- connecting -----------------------------------------------------------------------

@contextlib.contextmanager
def connect(scheduler: Any = None, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for the duration of a ``with`` block, or None.

    ``scheduler``: an address ``"tcp://host:port"`` (closed on exit) or an existing
    ``Client`` (left open); ``workers=N``: a new ``LocalCluster`` of N single-threaded
    worker processes, shut down on exit; neither: None, i.e. compute in-process.

    An address is probed first, within dask's ``distributed.comm.timeouts.connect``
    (30 s by default; ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=60s`` to change it):
    dask itself waits forever for the greeting of a server that accepts the connection
    and never answers. A server that is not a dask scheduler, a scheduler lost during
    the block and a task every worker died on are each a ConnectionError in one line
    (see :func:`_cluster_errors`), not dask's internal errors."""
    if scheduler is not None and workers is not None:
        raise ValueError("give either scheduler= (a running cluster) or workers= (a local "
                         f"one), not both; got scheduler={scheduler!r}, workers={workers!r}")
    if scheduler is None and workers is None:
        yield None
        return
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) \
                or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        dist = _import_distributed()
        with dist.LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True,
                               dashboard_address=None) as cluster, \
                dist.Client(cluster) as client, _cluster_errors(client, "the local cluster"):
            yield client
        return
    if isinstance(scheduler, str):
        match = _ADDRESS.match(scheduler.strip())
        if not match or int(match.group(1)) > 65535:
            raise ValueError(f"scheduler must be an address like 'tcp://host:8786', got "
                             f"{scheduler!r}")
        address = scheduler.strip()
        dist = _import_distributed()
        _probe(address, connect_timeout())
        where = f"the dask scheduler at {address}"
        with dist.Client(address) as client, _cluster_errors(client, where):
            yield client
        return
    dist = _import_distributed()
    if not isinstance(scheduler, dist.Client):
        raise ValueError("scheduler must be an address like 'tcp://host:8786' or a "
                         f"distributed.Client, got {type(scheduler).__name__}")
    with _cluster_errors(scheduler, f"the dask scheduler at {_address_of(scheduler)}"):
        yield scheduler


def connect_timeout() -> float:
    """Seconds to wait for a scheduler to answer: dask's
    ``distributed.comm.timeouts.connect`` (environment:
    ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT``)."""
    try:
        import dask.config
        from dask.utils import parse_timedelta
    except ImportError as err:
        raise ImportError(f"running on a dask cluster needs dask.distributed: {_INSTALL}") \
            from err
    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))


_RAISE_TIMEOUT = "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=60s raises the limit"


def _probe(address: str, timeout: float) -> None:
    """Connect to ``address`` and exchange dask's greeting, all within ``timeout``
    seconds (plus a second's grace, so that dask's own connect timeout speaks first for
    a port nobody listens on); ConnectionError saying what went wrong otherwise. Runs
    in a thread of its own (with its own event loop), so it works under a running loop
    too (Jupyter) and is abandoned, not awaited, when it hangs."""
    outcome: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(_greet(address, timeout), timeout + 1.0))
            outcome["error"] = None
        except BaseException as err:  # noqa: BLE001 - reported by the caller's thread
            outcome["error"] = err

    worker = threading.Thread(target=run, name="gpscale-probe", daemon=True)
    worker.start()
    worker.join(timeout + 5.0)
    if "error" not in outcome or isinstance(outcome["error"], asyncio.TimeoutError):
        raise ConnectionError(f"{address} accepted the connection but did not answer within "
                              f"{timeout:g} s, as a dask scheduler does at once: check that "
                              f"the address is a running dask scheduler ({_RAISE_TIMEOUT})")
    err = outcome["error"]
    if err is None:
        return
    if isinstance(err, OSError):
        raise ConnectionError(f"cannot reach a dask scheduler at {address} within "
                              f"{timeout:g} s ({_first_line(err)}); check the address and "
                              f"that the scheduler is running ({_RAISE_TIMEOUT})") from None
    raise ConnectionError(f"{address} answered, but not as a dask scheduler does "
                          f"({type(err).__name__}: {_first_line(err)}): it is not a dask "
                          "scheduler, or not one this dask can talk to; check the address "
                          "and port") from None


async def _greet(address: str, timeout: float) -> None:
    from distributed.comm import connect as comm_connect

    comm = await comm_connect(address, timeout=timeout)
    await comm.close()


@contextlib.contextmanager
def _cluster_errors(client: Any, where: str) -> Iterator[None]:
    """Errors inside the block that come from the cluster, in one line naming ``where``
    (ConnectionError): the scheduler lost (dask then fails with whatever it was doing,
    e.g. an AttributeError of a closed client), a task killed on every worker it was
    tried on, a task cancelled. Other errors pass unchanged."""
    try:
        yield
    except Exception as err:
        message = _cluster_failure(client, err, where)
        if message is None:
            raise
        raise ConnectionError(message) from err


def _cluster_failure(client: Any, err: Exception, where: str) -> str | None:
    """What went wrong on the cluster to cause ``err``, or None when it is not the
    cluster's doing."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError, FuturesCancelledError
    from distributed.comm import CommClosedError

    detail = f"{type(err).__name__}: {_first_line(err)}"
    if getattr(client, "status", "running") not in ("running", "closing") \
            or isinstance(err, (CommClosedError, ConnectionError)):
        return (f"lost the connection to {where} while in use ({detail}); check that "
                "the scheduler is running and run again")
    if isinstance(err, KilledWorker):
        return (f"a worker of {where} died running a task, and so did every other worker "
                f"it was given to ({detail}); look at the workers' logs (memory?)")
    if isinstance(err, (FutureCancelledError, FuturesCancelledError)):
        return (f"{where} cancelled a task ({detail}); a worker holding its data "
                "may have died, or the scheduler restarted: run again")
    return None


def _address_of(client: Any) -> str:
    scheduler = getattr(client, "scheduler", None)
    return str(getattr(scheduler, "address", None) or "(unknown address)")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no message"


# -- helpers --------------------------------------------------------------------------

def _import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(f"running on a dask cluster needs dask.distributed: {_INSTALL}") \
            from err
    return distributed


def _worker_threads() -> None:
    """On a dask worker, let torch use the worker's threads (once per process; a
    no-op here, so the client's torch settings are never touched)."""
    dist = sys.modules.get("distributed")
    if dist is None:
        return
    try:
        worker = dist.get_worker()
    except ValueError:
        return
    state = getattr(worker, "state", worker)
    threads = max(1, int(state.nthreads))
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _call(fn: Callable[..., Any], item: Any, **shared: Any) -> Any:
    _worker_threads()
    return fn(item, **shared)


def _trainable(features: torch.nn.Module) -> list[torch.Tensor]:
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


def _check_partitions(partitions: Iterable[Partition]) -> list[Partition]:
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
        raise ValueError("partitions must be a sequence of partitions (objects with "
                         f"chunks(rows)), got {type(partitions).__name__}")
    partitions = list(partitions)
    if not partitions:
        raise ValueError("partitions is empty; give at least one partition of rows")
    for i, part in enumerate(partitions):
        if not callable(getattr(part, "chunks", None)):
            raise ValueError(f"partitions[{i}] ({type(part).__name__}) has no chunks(rows) "
                             "method; use a gpscale.io source's partitions")
    return partitions


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


class _Rows:
    """The computed value of a partition's ``delayed``, as a partition (on the worker)."""

    def __init__(self, value: Any, to_xy: Callable[[Any], tuple] | None) -> None:
        xy = to_xy(value) if to_xy is not None else value
        if not (isinstance(xy, (tuple, list)) and len(xy) == 2):
            raise ValueError("a partition's delayed must compute an (X, y) pair, or the "
                             "partition must have to_xy(value) -> (X, y); got "
                             f"{type(xy).__name__}")
        self.X, self.y = np.asarray(xy[0]), np.asarray(xy[1])
        self.num_rows = len(self.X)

    def chunks(self, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for s in range(0, self.num_rows, rows):
            yield self.X[s : s + rows], self.y[s : s + rows]


def _as_partition(value: Any, to_xy: Callable[[Any], tuple] | None) -> Any:
    """A computed ``delayed``: already a partition (``gpscale.io`` makes them so), or rows."""
    return value if hasattr(value, "chunks") else _Rows(value, to_xy)


def _on_rows(fn: Callable[..., Any], features, value, to_xy, *args: Any, dtype=None) -> Any:
    return fn(features, _as_partition(value, to_xy), *args, dtype=dtype)


def _add(a: Sequence[Any], b: Sequence[Any]) -> Any:
    total = [x + y for x, y in zip(a, b)]
    return Statistics(*total) if isinstance(a, Statistics) else total


def _sum(items: Sequence[Any]) -> Any:
    """Left-to-right sum of partition results (Statistics or lists of tensors)."""
    total = items[0]
    for item in items[1:]:
        total = _add(total, item)
    return total


def _stream_sum(results: Iterable[Any]) -> Any:
    """The sum :func:`_cluster_sum` forms (groups of FAN_IN consecutive results, level by
    level, the last group of a level possibly short), holding < FAN_IN per level."""
    levels: list[list[Any]] = []
    for item in results:
        i = 0
        while True:
            if i == len(levels):
                levels.append([])
            levels[i].append(item)
            if len(levels[i]) < FAN_IN:
                break
            item, levels[i] = _sum(levels[i]), []
            i += 1
    carry = None
    for i, level in enumerate(levels):
        group = level + ([carry] if carry is not None else [])
        carry = _sum(group) if group else None
        if i == len(levels) - 1:
            return carry
    raise AssertionError("unreachable: no partitions")  # pragma: no cover


def _cluster_sum(client, fn, partitions, features, scaler, rows, *args, dtype=None):
    """One task per partition, then sums of FAN_IN consecutive results on the workers
    until one remains; only that one comes back to the client."""
    # the feature map (and G, g) go to every worker once per call, not once per task
    features, *args = client.scatter([features, *args], broadcast=True, hash=False)
    level = []
    for part in partitions:
        delayed = getattr(part, "delayed", None)
        if delayed is None:
            level.append(client.submit(fn, features, part, scaler, rows, *args, dtype=dtype,
                                       pure=False))
        else:  # computed where the collection lives; the statistics task follows it there
            value = client.compute(delayed)
            level.append(client.submit(_on_rows, fn, features, value,
                                       getattr(part, "to_xy", None), scaler, rows, *args,
                                       dtype=dtype, pure=False))
    while len(level) > 1:
        level = [group[0] if len(group) == 1 else client.submit(_sum, group, pure=False)
                 for group in (level[s : s + FAN_IN] for s in range(0, len(level), FAN_IN))]
    return level[0].result()
