"""K(X, X) + σ²I as a row-block operator whose products run on a dask cluster
(:class:`ClusterOperator`), and a preconditioner's factor whose rows live there
(:class:`ClusterFactor`): the exact GP's reduction beyond one machine.

Each task runs a pure function of the kernel's form, the rows and their prepared columns
(:func:`gpscale.kernels.chunked.block_matmul` and friends), over a run of the operator's
own row blocks, so the blocks and their sums are the in-process ones. The tasks go
through :mod:`gpscale.parallel.cluster`.
"""

from __future__ import annotations

import collections
import copy
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from ..linalg.lowrank import extend_rows, ordered_sum, pivot_columns
from ..parallel import cluster
from .chunked import PreparedColumns, block_matmul, dense_block, prepare_columns
from .operator import KernelOperator, contract_rows, row_blocks


def _block_products(bounds: Sequence[tuple[int, int]], form: Any, X: torch.Tensor,
                    cols: Any, columns: tuple[int, int], V: torch.Tensor) -> torch.Tensor:
    """K(X[s:e], X[c0:c1]) V for consecutive row blocks (s, e), stacked, with (c0, c1) =
    ``columns``: one task's share of a product (a pure function of the kernel's form,
    the rows, their prepared columns and V;
    :func:`gpscale.kernels.chunked.block_matmul`)."""
    cluster.worker_threads()
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
    """A :class:`~gpscale.kernels.operator.KernelOperator` whose products K(X, X) V run
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
        self._tasks = tasks_per_worker * max(1, len(cluster.worker_info(client)))
        self._groups = self._runs((0, self.n))
        cols = type(self.cols)(*(_cpu(t) for t in self.cols))
        self._there = cluster.scatter(client, [self.form, _cpu(self.X), cols],
                                      broadcast=True)

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
            V_there = cluster.scatter(self.client, _cpu(V2), broadcast=True)
            futures = [cluster.submit(self.client, _block_products, g, form, X, cols, span,
                                      V_there) for g in groups]
            out = torch.cat(cluster.gather(self.client, futures)).to(V.device)
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
        kernel, lr = cluster.scatter(self.client, [here, [_cpu(left), _cpu(right)]],
                                     broadcast=True)
        futures = [cluster.submit(self.client, _block_contractions, g, kernel, form, cols, X,
                                  r0, span, lr) for g in groups]
        parts = cluster.gather(self.client, futures)
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
                  for w in cluster.worker_info(self.client).values()]
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
        workers = sorted(cluster.worker_info(self.client))
        self._where = [[workers[i % len(workers)]] for i in range(len(self._bounds))]
        self._blocks = [cluster.submit(self.client, _empty_rows, e - s, self.capacity,
                                       self.dtype, workers=w)
                        for (s, e), w in zip(self._bounds, self._where)]
        self._scales = [None] * len(self._bounds) if scale is None else [
            cluster.scatter(self.client, _cpu(self._scale[s:e]), workers=w)
            for (s, e), w in zip(self._bounds, self._where)]
        self._G: list[Any] = []

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.rank)

    def _on_blocks(self, fn: Callable[..., Any], blocks: Sequence[Any], *args: Any,
                   per_block: Sequence[Sequence[Any]] = ()) -> list[Any]:
        """Futures of ``fn(blocks[i], *per_block[i], *args)``, each on its block's worker."""
        extra = per_block or [()] * len(blocks)
        return [cluster.submit(self.client, fn, b, *x, *args, workers=w)
                for b, w, x in zip(blocks, self._where, extra)]

    def _each(self, fn: Callable[..., Any], *args: Any, per_block: Sequence[Any] = ()
              ) -> list[Any]:
        """``fn(block, *per_block[i], *args)`` on every block's worker, gathered in order."""
        return cluster.gather(self.client, self._on_blocks(fn, self._blocks, *args,
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
        shared = cluster.scatter(self.client,
                                 [type(cols)(*(_cpu(t) for t in cols)), _cpu(L_S), s_S],
                                 broadcast=True)
        per = [(X, b, sc) for b, sc in zip(self._bounds, self._scales)]
        self._G = self._on_blocks(_block_pivot_columns, self._blocks, form, *shared, m,
                                  per_block=per)
        H = L_S.new_zeros(S.numel(), S.numel())
        for i, rows in zip(picks, cluster.gather(self.client,
                self._on_blocks(_rows_of, self._G, None, per_block=local))):
            H[i] = rows.to(H)
        return H

    def extend(self, T: torch.Tensor, m: int) -> torch.Tensor:
        """Every block writes F_b = G_b T into columns m, m + 1, ... and returns ‖F_i‖²."""
        T_there = cluster.scatter(self.client, _cpu(T), broadcast=True)
        per = [(G,) for G in self._G]
        parts = self._each(_extend_block, T_there, m, per_block=per)
        self._G = []
        return torch.cat(parts).to(self.device)

    def factor(self, m: int) -> ClusterFactor:
        """This factor, of rank m (blocks trimmed to m columns when fewer)."""
        if m < self.capacity:
            self._blocks = [cluster.submit(self.client, _first_columns, b, m, workers=w)
                            for b, w in zip(self._blocks, self._where)]
        self.rank = self.capacity = m
        return self

    # -- products (low_rank_inverse's and the probes' operations) --------------------
    def __matmul__(self, W: torch.Tensor) -> torch.Tensor:
        """L W (n x k) from W (r x k)."""
        W_there = cluster.scatter(self.client, _cpu(W), broadcast=True)
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
                    pending.append(cluster.submit(self.client, fn, b, lo, hi, *x, *args,
                                                  workers=w))
                yield cluster.result(pending.popleft())

        return ordered_sum(parts()).to(self.device)

    def t_matmul(self, R: torch.Tensor) -> torch.Tensor:
        """Lᵀ R (r x k) from R (n x k)."""
        parts = [(cluster.scatter(self.client, _cpu(R[s:e]), workers=w),)
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
    cluster.worker_threads()
    s, e = bounds
    return pivot_columns(dense_block(form, X[s:e], cols).to(block.dtype), block[:, :m], L_S,
                         scale, s_S)


def _extend_block(block: torch.Tensor, G: torch.Tensor, T: torch.Tensor, m: int
                  ) -> torch.Tensor:
    """One block's share of :meth:`ClusterFactor.extend`: writes into ``block`` in place
    (the worker's own object, held by the factor's future)."""
    cluster.worker_threads()
    return extend_rows(block, G, T, m)


def _first_columns(block: torch.Tensor, m: int) -> torch.Tensor:
    return block[:, :m].clone()


def _rows_times(block: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    cluster.worker_threads()
    return block @ W.to(block)


def _rows_t_times(block: torch.Tensor, lo: int, hi: int, R: torch.Tensor) -> torch.Tensor:
    cluster.worker_threads()
    return block[lo:hi].mT @ R[lo:hi].to(block)


def _gram_of(block: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    cluster.worker_threads()
    return block[lo:hi].mT @ block[lo:hi]


def _block_contractions(bounds: Sequence[tuple[int, int]], kernel: Any, form: Any, cols: Any,
                        X: torch.Tensor, r0: int, columns: tuple[int, int],
                        left_right: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One task's share of a distributed contraction
    (:func:`gpscale.kernels.operator.contract_rows`) of the rows from r0 (where ``left``
    starts) against the columns ``columns``."""
    cluster.worker_threads()
    c0, c1 = columns
    return contract_rows(kernel, form, _column_range(cols, columns), X[r0:],
                         [(s - r0, e - r0) for s, e in bounds], *left_right, X2=X[c0:c1])


def _cpu(t: Any) -> Any:
    return t.cpu() if isinstance(t, torch.Tensor) else t


