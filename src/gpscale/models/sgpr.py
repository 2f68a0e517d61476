"""SGPR: Titsias (2009) variational sparse GP with free, continuous inducing inputs Z.

The continuous competitor of Cao et al. (2013) (standing in for SPGP, their §4.2): Z
and the hyperparameters are optimised jointly by gradients, which needs vector inputs
and a kernel differentiable in them (the discrete kernels are not).

Negative bound (Titsias eq. 9; Cao et al. eq. 5), total nats:

    F = −log N(y | 0, Q + σ²I) + tr(K − Q) / (2σ²),   Q = K_XZ K_ZZ⁻¹ K_ZX,

in O(n m²) via Luu Luuᵀ = K_ZZ, A = Luu⁻¹ K_ZX / σ, LB LBᵀ = B = I + A Aᵀ,
c = LB⁻¹ A y / σ:

    log|Q + σ²I| = n log σ² + 2 Σ log diag LB,   yᵀ(Q + σ²I)⁻¹y = yᵀy/σ² − cᵀc,
    tr(Q) = σ² tr(A Aᵀ).

One model whose rows are read one of three ways, a strategy (``rows=``) the model asks
for its bound, its sums and the training side of its posterior:

- :class:`HeldRows` (X, y in memory): the bound above from the rows, its gradient written
  out (:mod:`.vfe_bound`), any kernel differentiable in its inputs;
- :class:`~gpscale.models.sgpr_passes.RowPasses` (:class:`~gpscale.io.Rows` read in
  passes over their partitions, never held): the bound from the sums W, v, yᵀy, n of one
  pass (:mod:`.sgpr_stats`), its gradient a second pass;
- :class:`~gpscale.models.sgpr_stats.Statistics` (those sums at fixed θ and Z: a frozen
  or loaded model).

Each reader keeps the order its fits have always registered the parameters in, which is
the order of L-BFGS's vector, and so the rounding of every fit
(benchmarks/results/design-one-sgpr/). :class:`StreamedSGPR` is this model built by the
name the passes' fits and files have always had.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

from ..features.inducing import InducingFeatures, check_constant_diagonal
from ..io.rows import Rows
from ..kernels import Kernel
from ..kernels.base import cross_matrix
from ..linalg import robust_cholesky
from ..params import Positive
from ..validation import as_matrix, as_test_inputs, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data
from .sgpr_passes import RowPasses
from .sgpr_stats import Statistics, posterior, saved_statistics
from .vfe_bound import VFEBound, factors

__all__ = ["SGPR", "StreamedSGPR", "RowReader", "HeldRows", "RowPasses", "Statistics"]


class RowReader(Protocol):
    """How an :class:`SGPR` reads its rows (:class:`HeldRows`, :class:`RowPasses`,
    :class:`Statistics`); each method takes the model, which owns θ, Z, σ² and any
    buffers the reader registered on it."""

    title: str
    rows: Rows | None          # the rows read in passes, else None
    num_features: int | None   # the rows' columns, None when only their sums are kept
    z_first: bool              # parameter order: (Z, σ², θ) or (σ², Z, θ)

    def prepare(self, dtype: torch.dtype, device: Any) -> Any: ...
    def check_kernel(self, kernel: Kernel) -> None: ...
    def attach(self, model: SGPR) -> None: ...
    def detach(self, model: SGPR) -> None: ...
    def n(self, model: SGPR) -> int: ...
    def statistics(self, model: SGPR) -> tuple: ...
    def bound(self, model: SGPR) -> torch.Tensor: ...
    def posterior_factors(self, model: SGPR) -> tuple: ...
    def extra_state(self, model: SGPR) -> dict[str, torch.Tensor]: ...
    def config(self, model: SGPR) -> dict[str, Any]: ...


class HeldRows:
    """:class:`SGPR`'s rows X (n, d), y (n,) held in memory (the model's buffers ``X``,
    ``y``): the bound by the row form, :class:`~.vfe_bound.VFEBound`."""

    title = ""
    rows = None
    #: L-BFGS's vector order (σ², Z, θ): the in-memory fits' order, kept
    z_first = False

    def __init__(self, X, y) -> None:
        self._given: tuple | None = (X, y)

    @property
    def num_features(self) -> int:
        return self._given[0].shape[1]

    def prepare(self, dtype: torch.dtype, device: Any) -> torch.device:
        """Check and convert the rows (once); the device they are on."""
        X, y = check_xy(*self._given, dtype, device)
        self._given = (X, y)
        return X.device

    def check_kernel(self, kernel: Kernel) -> None:
        return None  # Σ k(x, x) is summed over the rows themselves

    def attach(self, model: SGPR) -> None:
        X, y = self._given
        self._given = None
        model.register_buffer("X", X)
        model.register_buffer("y", y)

    def detach(self, model: SGPR) -> None:
        del model._buffers["X"], model._buffers["y"]

    def n(self, model: SGPR) -> int:
        return model.X.shape[0]

    def statistics(self, model: SGPR) -> tuple:
        """(W, v, yᵀy, n) summed over the rows in memory, differentiable."""
        Luu = robust_cholesky(model.kernel(model.Z))
        Phi = torch.linalg.solve_triangular(Luu, cross_matrix(model.kernel, model.Z, model.X),
                                            upper=False)
        return Phi @ Phi.mT, Phi @ model.y, model.y @ model.y, model.n

    def bound(self, model: SGPR) -> torch.Tensor:
        kernel, Z, X = model.kernel, model.Z, model.X
        return VFEBound.apply(cross_matrix(kernel, Z, X), kernel(Z), model.noise,
                              kernel.diag(X).sum(), model.y)

    @torch.no_grad()
    def posterior_factors(self, model: SGPR) -> tuple:
        Luu, _, _, LB, c = factors(model.kernel(model.Z, model.X), model.kernel(model.Z),
                                   model.noise, model.y)
        return Luu, LB, torch.linalg.solve_triangular(LB.mT, c[:, None], upper=True)

    def extra_state(self, model: SGPR) -> dict[str, torch.Tensor]:
        return {}

    def config(self, model: SGPR) -> dict[str, Any]:
        return {"learn_z": bool(model.Z.requires_grad), "dtype": dtype_name(model.X)}


_READERS = (HeldRows, RowPasses, Statistics)


def _reader(X, y, rows) -> RowReader:
    """The reader the constructor's arguments name: X, y (held) or ``rows=``."""
    if rows is None:
        if X is None or y is None:
            raise ValueError("give the training rows as X, y (held in memory) or as rows= "
                             "(a Rows read in passes, or HeldRows / RowPasses / Statistics)")
        return HeldRows(X, y)
    if X is not None or y is not None:
        raise ValueError("give the training rows as X, y or as rows=, not both")
    return rows if isinstance(rows, _READERS) else RowPasses(rows)


class SGPR(GPModel):
    """Sparse variational GP regression (Titsias 2009) with inducing inputs ``Z`` (an
    nn.Parameter), its rows read by a :class:`RowReader` (module doc).

    Parameters
    ----------
    kernel : covariance function, differentiable in its inputs (rows read in passes or
        kept as sums: a stationary one, Σ k(x, x) = n k(0)).
    X, y : training inputs (n, d) and targets (n,) held in memory (``rows=HeldRows(X, y)``).
    Z : initial inducing inputs (m, d).
    rows : instead of X, y: :class:`~gpscale.io.Rows` (read in passes,
        :class:`RowPasses`) or a reader.
    noise : initial noise variance σ².
    learn_z : whether Z is trained.
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")

    def __init__(self, kernel: Kernel, X=None, y=None, Z=None, *,
                 rows: Rows | RowReader | None = None, noise: float = 0.1,
                 learn_z: bool = True, dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        reader = _reader(X, y, rows)
        if Z is None:
            raise ValueError("give the initial inducing inputs Z")
        Z = as_matrix(Z, "Z", dtype, reader.prepare(dtype, device))
        d = reader.num_features
        if d is not None and Z.shape[1] != d:
            what = "X has" if isinstance(reader, HeldRows) else "the rows have"
            raise ValueError(f"Z has {Z.shape[1]} columns but {what} {d}")
        self.kernel = kernel.to(dtype=dtype, device=Z.device)
        reader.check_kernel(self.kernel)  # before any pass
        if reader.z_first:
            self.Z = nn.Parameter(Z.clone(), requires_grad=learn_z)
        self.noise = torch.tensor(float(noise), dtype=dtype)
        if not reader.z_first:
            self.Z = nn.Parameter(Z.clone(), requires_grad=learn_z)
        self.reader, self._cache = reader, None
        reader.attach(self)
        self.to(Z.device)

    @property
    def title(self) -> str:  # type: ignore[override]
        return self.reader.title

    @property
    def m(self) -> int:
        return self.Z.shape[0]

    @property
    def n(self) -> int:
        return self.reader.n(self)

    @property
    def rows(self) -> Rows | None:
        """The rows read in passes (None when held in memory or kept as sums)."""
        return self.reader.rows

    def features(self, whitener: torch.Tensor | None = None) -> InducingFeatures:
        """φ(x) = k(Z, x), or Luu⁻¹k(Z, x) given ``whitener`` = Luu, sharing this model's
        kernel and Z."""
        return InducingFeatures(self.kernel, self.Z, whitener)

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """(W, v, yᵀy, n) = (ΦᵀΦ, Φᵀy, yᵀy, n) with the whitened features Φ =
        K_XZ Luu⁻ᵀ: the kept ones, or a sum over the rows (a pass when read in passes),
        differentiable in θ and Z while they are trained."""
        return self.reader.statistics(self)

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Negative variational lower bound F ≥ −log p(y) (Titsias eq. 9; total nats,
        differentiable)."""
        no_data(self, data)
        return self.reader.bound(self)

    def elbo(self) -> torch.Tensor:
        """The variational lower bound −F on log p(y)."""
        return -self.objective()

    def freeze(self, statistics: bool | None = None) -> SGPR:
        """Keep what prediction needs and let go of rows read in passes (and of any
        cluster they were read on): their sums at the current θ and Z, both fixed from
        then on. Rows held in memory are kept (their predictions and file as before)
        unless ``statistics=True``, which keeps any reader's sums instead of its rows."""
        if statistics is None:
            statistics = self.reader.rows is not None
        if not statistics or isinstance(self.reader, Statistics):
            return self
        check_constant_diagonal(self.kernel)  # the sums' bound takes Σ k(x, x) = n k(0)
        with torch.no_grad():
            stats = self.reader.statistics(self)
        self.reader.detach(self)
        self.reader, self._cache = Statistics(*stats), None
        self.reader.attach(self)
        return self

    def _posterior(self):
        """(σ², (Luu, LB, w = LB⁻ᵀc)): the O(n m²) training side of the predictions,
        computed once per parameter values (``gpscale predict`` calls predict once per
        batch of rows)."""
        key = tuple((id(t), t._version) for t in (*self.parameters(), *self.buffers()))
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self.reader.posterior_factors(self))
        return self.noise, self._cache[1]

    @torch.no_grad()
    def predict(self, X_new, *, include_noise: bool = False,
                block: int = 4096) -> MeanAndVariance:
        """Predictive mean (and variance of f, or of y with ``include_noise``) at X_new
        (Titsias eq. 6; :func:`~gpscale.models.sgpr_stats.posterior`):
        μ = K_*Z Luu⁻ᵀ LB⁻ᵀ c,  v = k_** − ‖Luu⁻¹K_Z*‖² + ‖LB⁻¹ Luu⁻¹ K_Z*‖²."""
        Xs = as_test_inputs(X_new, self.Z)
        noise, kept = self._posterior()
        return posterior(self.kernel, self.Z, kept, Xs, noise, include_noise, block)

    # -- persistence: X, y and Z (rows held) or Z and the rows' sums, in the state --------
    def to_config(self) -> dict[str, Any]:
        return self.reader.config(self)

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The state_dict, with the rows' sums at the current θ and Z when they are read
        in passes."""
        return {**self.state_dict(), **self.reader.extra_state(self)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Kernel | None = None) -> SGPR:
        dtype = getattr(torch, str(config["dtype"]))
        if "X" in state:
            return cls(kernel, state["X"], state["y"], state["Z"], learn_z=config["learn_z"],
                       dtype=dtype)
        stats = saved_statistics(config, state, kernel)
        return cls(kernel, Z=state["Z"], rows=Statistics(*stats), dtype=dtype)


class StreamedSGPR(SGPR):
    """:class:`SGPR` reading its rows in passes, ``rows=``:class:`~gpscale.io.Rows`, or
    from their sums, ``statistics=(W, v, yᵀy, n)``, by the name the passes' fits and
    their saved files have always had; nothing of its own but this constructor."""

    def __init__(self, kernel: Kernel, Z=None, *, rows: Rows | RowReader | None = None,
                 statistics: tuple | None = None, noise: float = 0.1, learn_z: bool = True,
                 dtype: torch.dtype = torch.float64,
                 device: torch.device | str | None = None) -> None:
        if (rows is None) == (statistics is None):
            raise ValueError("give the training data as rows=Rows(...) or as "
                             "statistics=(W, v, yy, n): exactly one of them")
        super().__init__(kernel, Z=Z, rows=rows if statistics is None else
                         Statistics(*statistics), noise=noise, learn_z=learn_z, dtype=dtype,
                         device=device)
