"""The variance a row's missing inputs add to f: a table's gaps modelled, not imputed.

A table row whose number ``x_c`` is missing in training is encoded at the column's mean
with a 0/1 column saying so (:mod:`gpscale.io.encoding`). A stationary kernel then
takes the row for one at the mean, but its f is f at the value the row really had:
averaged over what that value could be, f(x) = E f + (f − E f), where the second part
varies from row to row like independent noise of variance Var f. A homoscedastic model
can only put that variance into σ², which widens every complete row's interval and
still leaves the gapped rows' too narrow (issue 59: noise std 0.10 read as 0.35,
36 % coverage on the gapped rows).

:class:`GapVariance` gives it a place of its own: for 0/1 columns ``c`` marking a gap,

    k(x_i, x_j) = [i = j] Σ_c s_c² x_{i,c},

one learned variance s_c² per column, added to the stationary kernel. It is zero
between distinct rows, so it is "white" like the noise, but it is part of f: a new row
with the same gap gets s_c² in its predictive variance. "The same row" is the same
tensor rows: ``kernel(X)``, or rows where both arguments are views of one tensor's rows
(the blocks of a blocked product, which may overlap); as scikit-learn's ``WhiteKernel``,
``kernel(X, X.clone())`` is zero. Two rows with one gap and equal other values are
therefore not copies of one input (:func:`gap_rows`, which the exact GP's merge of
copies leaves apart): each has its own value behind the gap.

It is added only where the exact GP factors C by Cholesky (the iterative path's
variances need a spectral density, which a white term has not); the other paths keep
the indicator column alone.
"""

from __future__ import annotations

from typing import Any

import torch

from ..params import Positive
from .base import Kernel

__all__ = ["GapVariance", "with_gaps", "gap_rows", "gap_columns"]


def _shared_rows(X1: torch.Tensor, X2: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The rows (i, j) where row i of X1 is row j of X2 in memory — both views of one
    tensor's rows, as in the blocks of a blocked product, overlapping or not — as two
    index tensors; None when they share none."""
    n1 = X1.shape[0]
    if X2 is None or X2 is X1:
        rows = torch.arange(n1, device=X1.device)
        return rows, rows
    if not (X1.device == X2.device and X1.dtype == X2.dtype and X1.shape[1:] == X2.shape[1:]
            and X1.stride() == X2.stride() and X1.stride(0) > 0
            and X1.untyped_storage().data_ptr() == X2.untyped_storage().data_ptr()):
        return None
    shift, rest = divmod(X1.storage_offset() - X2.storage_offset(), X1.stride(0))
    if rest:
        return None
    rows = torch.arange(max(0, -shift), min(n1, X2.shape[0] - shift), device=X1.device)
    return (rows, rows + shift) if len(rows) else None


class GapVariance(Kernel):
    """k(x_i, x_j) = [i = j] Σ_c s_c² x_{i,c} over the 0/1 gap columns ``columns``
    (module docstring); ``variance``: the s_c², one value or one per column."""

    variance = Positive(doc="variance s_c² a gap in column c adds to f")

    def __init__(self, columns: list[int], variance: float | list[float] = 0.1) -> None:
        columns = [int(c) for c in columns]
        if not columns:
            raise ValueError("GapVariance needs at least one gap column")
        super().__init__(active_dims=columns)
        value = torch.as_tensor(variance, dtype=torch.float64).reshape(-1)
        self.variance = value.expand(len(columns)).clone() if value.numel() == 1 else value

    def _config_args(self) -> dict[str, Any]:
        return {"columns": list(self.active_dims)}

    def config(self) -> dict[str, Any]:  # the columns are its one argument
        return {"type": type(self).type_name, "args": self._config_args()}

    def _marks(self, X: torch.Tensor) -> torch.Tensor:
        return X[:, self.active_dims] @ self.variance.to(X)

    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        if X2 is None or X2 is X1:
            return torch.diag_embed(self._marks(X1))
        K = X1.new_zeros(X1.shape[0], X2.shape[0])
        shared = _shared_rows(X1, X2)
        if shared is not None:
            i, j = shared
            K = K.index_put((i, j), self._marks(X1[i]))
        return K

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        return self._marks(X)

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp; O(n), not the n x n matrix
        shared = _shared_rows(X1, X2)
        if shared is None:
            return ({self.raw_variance: torch.zeros_like(self.raw_variance)}
                    if self.raw_variance.requires_grad else {}), G.new_zeros(())
        i, j = shared
        g, rows = G[i, j], X1[i]
        per_column = g @ rows[:, self.active_dims].to(g)
        out = ({self.raw_variance: type(self).variance.raw_grad(self, per_column)}
               if self.raw_variance.requires_grad else {})
        return out, g @ self._marks(rows).detach().to(g)


def gap_columns(kernel: Kernel | None) -> list[int]:
    """The 0/1 gap columns the :class:`GapVariance` terms of ``kernel`` model, sorted
    (none for None or a kernel without such a term)."""
    if kernel is None:
        return []
    return sorted({c for k in kernel.modules() if isinstance(k, GapVariance)
                   for c in k.active_dims})


def gap_rows(kernel: Kernel, X: torch.Tensor) -> torch.Tensor | None:
    """The rows of X with a gap that a :class:`GapVariance` in ``kernel`` models (a
    boolean mask), None when the kernel has none: such rows are never copies of one
    another, as each has its own value behind the gap."""
    columns = gap_columns(kernel)
    return (X[:, columns] != 0).any(dim=1) if columns else None


def with_gaps(kernel: Kernel, columns: list[int] | tuple[int, ...]) -> Kernel:
    """``kernel`` + :class:`GapVariance` on ``columns``; ``kernel`` itself without any."""
    return kernel + GapVariance(list(columns)) if len(columns) else kernel
