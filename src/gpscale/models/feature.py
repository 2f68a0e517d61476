"""Finite-feature (weight-space) GP: K = Φ W Φᵀ + σ²I, W = diag(w) > 0.

Everything needs only the sufficient statistics ΦᵀΦ (p x p), Φᵀy (p), yᵀy and n,
computed in one streaming pass over row chunks (memory independent of n). With
A = ΦᵀΦ + σ² W⁻¹ (Woodbury and the determinant lemma):

NLML = [yᵀy − bᵀA⁻¹b] / (2σ²) + ½[(n − p) log σ² + log|W| + log|A|] + (n/2) log 2π
mean(x*) = φ*ᵀ A⁻¹ b,   var(x*) = σ² φ*ᵀ A⁻¹ φ*   (b = Φᵀy)

so every evaluation after the pass is O(p³). When the feature map has trainable
parameters, gradients flow back through a second streaming pass (each chunk's Φ is
recomputed and contracted with ∂NLML/∂(ΦᵀΦ), ∂NLML/∂(Φᵀy)); memory stays O(chunk·p).
"""

from __future__ import annotations

from typing import Any

import torch

from ..features import FeatureMap
from ..features.config import feature_map_config, feature_map_from_config
from ..io.rows import Rows, TensorPartition
from ..linalg import robust_cholesky
from ..params import LOG_2PI, Positive
from ..sizes import CHUNK_BYTES
from ..validation import as_matrix, check_xy
from . import feature_stats
from .base import GPModel, MeanAndVariance, dtype_name, no_data


def chunk_statistics(
    features: FeatureMap, X: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(ΦᵀΦ, Φᵀy, yᵀy, n) of one chunk — a pure function, so the reduction over chunks
    (a plain sum) can run anywhere (a process pool, dask) and be added up."""
    phi = features(X)
    return phi.mT @ phi, phi.mT @ y, y @ y, X.shape[0]


class FeatureGP(GPModel):
    """GP with covariance Φ W Φᵀ + σ²I for a feature map Φ = features(X).

    The training data are either tensors ``X, y`` (kept as buffers), ``rows=``
    :class:`~gpscale.io.Rows` (read on every pass, never held), or ``statistics=``
    (ΦᵀΦ, Φᵀy, yᵀy, n) at fixed feature parameters: what a saved model keeps, so that
    its file does not grow with n. Tensors and rows take the same path: one statistics
    pass (:func:`gpscale.models.feature_stats.streamed_statistics`) over their partitions.
    ``weights``: ``"scalar"`` (W = w I, w learned: the
    signal variance), ``"diag"`` (one learned weight per feature, GRIEF's re-weighting)
    or ``"fixed"`` (W = I).
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")
    weight = Positive(floor=1e-10, doc="feature weights w (W = diag(w))")

    def __init__(
        self,
        features: FeatureMap,
        X=None,
        y=None,
        noise: float = 0.1,
        weights: str = "scalar",
        chunk: int | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
        *,
        rows: Rows | None = None,
        statistics: tuple[torch.Tensor, torch.Tensor, torch.Tensor, int] | None = None,
    ) -> None:
        super().__init__()
        if weights not in ("scalar", "diag", "fixed"):
            raise ValueError(f"weights must be 'scalar', 'diag' or 'fixed', got {weights!r}")
        given = [X is not None or y is not None, rows is not None, statistics is not None]
        if sum(given) != 1:
            raise ValueError("give the training data as X and y, as rows=Rows(...) "
                             "or as statistics=(gram, proj, yy, n): exactly one of them")
        if rows is not None and rows.held is not None:  # rows in memory: kept as buffers
            X, y, rows = *rows.held, None
            given[0] = True
        self._rows = rows
        if given[0]:
            X, y = check_xy(X, y, dtype, device)
            device, d = X.device, X.shape[1]
            self.register_buffer("X", X)
            self.register_buffer("y", y)
        else:
            device, d = torch.device(device or "cpu"), getattr(features, "d", 1)
        self.features = features.to(dtype=dtype, device=device)
        p = features.num_features
        if statistics is not None:
            gram, proj, yy, n = statistics
            self.register_buffer("stat_gram", torch.as_tensor(gram, dtype=dtype, device=device))
            self.register_buffer("stat_proj", torch.as_tensor(proj, dtype=dtype, device=device))
            self.register_buffer("stat_yy", torch.as_tensor(yy, dtype=dtype, device=device))
            self.register_buffer("stat_n", torch.as_tensor(int(n), device=device))
            for t in self.features.parameters():  # Φ is fixed: the statistics belong to it
                t.requires_grad_(False)
        self.weights_kind = weights
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.weight = torch.ones(p if weights == "diag" else 1, dtype=dtype)
        if weights == "fixed":
            self.raw_weight.requires_grad_(False)
        self.chunk = chunk or max(1, CHUNK_BYTES // (8 * 4 * (p + d)))
        self._stats_cache = None
        self._n: int | None = None  # rows of `rows`, known after the first pass
        self.to(device)

    @property
    def rows(self) -> Rows | None:
        """The training rows the statistics are read from (the buffers X, y as one
        in-memory partition when the model holds them); None once frozen."""
        if self._rows is not None:
            return self._rows
        if "X" in self._buffers:
            return Rows((TensorPartition(self.X, self.y),), self.X.shape[1], rows=self.chunk)
        return None

    @property
    def holds_rows(self) -> bool:
        """Whether the rows are this model's buffers X, y (saved with it)."""
        return "X" in self._buffers

    @property
    def n(self) -> int:
        if hasattr(self, "stat_n"):
            return int(self.stat_n)
        if self.holds_rows:
            return self.X.shape[0]
        if self._n is None:  # cheap for Parquet (metadata); CSV partitions count once
            self._n = self._rows.n
        return self._n

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ΦᵀΦ, Φᵀy, yᵀy) by one streaming pass over the rows; differentiable in the
        features' parameters, and cached while those parameters do not change."""
        if hasattr(self, "stat_gram"):
            return self.stat_gram, self.stat_proj, self.stat_yy
        params = [p for p in self.features.parameters() if p.requires_grad]
        if params:
            return self._pass(params)
        key = tuple(p._version for p in self.features.parameters())
        key += (self.X._version,) if self.holds_rows else ()
        if self._stats_cache is None or self._stats_cache[0] != key:
            with torch.no_grad():
                self._stats_cache = (key, *self._pass([]))
        return self._stats_cache[1:]

    def freeze(self) -> FeatureGP:
        """Keep the statistics at the current feature parameters and let go of the
        rows (and of any cluster they were read on): what a model is after training on
        rows that are not in memory. The feature parameters are fixed from then on."""
        if self._rows is None:
            return self
        with torch.no_grad():
            gram, proj, yy = self.statistics()
        ref = self.noise
        for name, value in (("stat_gram", gram), ("stat_proj", proj), ("stat_yy", yy)):
            self.register_buffer(name, value.detach().to(ref.dtype))
        self.register_buffer("stat_n", torch.tensor(self.n, device=ref.device))
        for t in self.features.parameters():
            t.requires_grad_(False)
        self._rows, self._stats_cache = None, None
        return self

    def _pass(self, params: list[torch.Tensor]):
        r = self.rows
        dtype = self.noise.dtype
        if params:
            s = feature_stats.streamed_statistics(self.features, r.partitions, r.scaler,
                                                  r.client, r.rows, dtype)
        else:
            s = feature_stats.statistics(self.features, r.partitions, scaler=r.scaler,
                                         client=r.client, rows=r.rows, dtype=dtype)
        self._n = int(s.n)
        return s.gram, s.proj, s.yy

    def _factor(self, gram: torch.Tensor) -> torch.Tensor:
        p = gram.shape[0]
        return robust_cholesky(gram + torch.diag_embed((self.noise / self.weight).expand(p)))

    def nlml(self) -> torch.Tensor:
        """Negative log marginal likelihood from the statistics, O(p³) after the pass."""
        gram, proj, yy = self.statistics()
        p, n = gram.shape[0], self.n
        L = self._factor(gram)
        beta = torch.linalg.solve_triangular(L, proj[:, None], upper=False)[:, 0]
        quad = (yy - beta @ beta) / self.noise
        logdet = ((n - p) * torch.log(self.noise) + torch.log(self.weight.expand(p)).sum()
                  + 2.0 * torch.log(torch.diagonal(L)).sum())
        return 0.5 * (quad + logdet + n * LOG_2PI)

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The NLML (from the model's own statistics; ``data`` must be None)."""
        no_data(self, data)
        return self.nlml()

    # -- persistence: statistics and weights, never the rows ---------------------------
    def to_config(self) -> dict[str, Any]:
        return {"weights": self.weights_kind, "dtype": dtype_name(self.noise),
                "rows": "statistics", "n": self.n, **feature_map_config(self.features)}

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The state_dict with the training rows replaced by their statistics at the
        current feature parameters (so a saved file does not grow with n)."""
        with torch.no_grad():
            gram, proj, yy = self.statistics()
        state = {k: v for k, v in self.state_dict().items() if k not in ("X", "y")}
        state.update(stat_gram=gram.detach(), stat_proj=proj.detach(), stat_yy=yy.detach(),
                     stat_n=torch.tensor(self.n))
        return state

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Any = None) -> FeatureGP:
        dtype = getattr(torch, config["dtype"])
        feats = feature_map_from_config(config, dtype, state)
        if config.get("rows") == "statistics":
            stats = (state["stat_gram"], state["stat_proj"], state["stat_yy"],
                     int(state["stat_n"]))
            return cls(feats, weights=config["weights"], dtype=dtype, statistics=stats)
        return cls(feats, state["X"], state["y"], weights=config["weights"], dtype=dtype)

    @torch.no_grad()
    def predict(
        self, X_new, *, include_noise: bool = False, full_cov: bool = False
    ) -> MeanAndVariance:
        """Posterior mean and variance (or covariance) at ``X_new``."""
        Xs = as_matrix(X_new, "X_new", self.noise.dtype, self.noise.device)
        if Xs.shape[1] != self.features.d:
            raise ValueError(f"X_new has {Xs.shape[1]} columns but the model was trained on "
                             f"{self.features.d}")
        gram, proj, _ = self.statistics()
        L = self._factor(gram)
        mean_w = torch.cholesky_solve(proj[:, None], L)[:, 0]
        if full_cov:
            phi = self.features(Xs)
            V = torch.linalg.solve_triangular(L, phi.mT, upper=False)
            cov = self.noise * (V.mT @ V)
            if include_noise:
                cov = cov + torch.diag_embed(self.noise.expand(Xs.shape[0]))
            return MeanAndVariance(phi @ mean_w, cov)
        means, variances = [], []
        for s in range(0, Xs.shape[0], self.chunk):
            phi = self.features(Xs[s : s + self.chunk])
            V = torch.linalg.solve_triangular(L, phi.mT, upper=False)
            means.append(phi @ mean_w)
            variances.append(self.noise * (V * V).sum(0))
        var = torch.cat(variances)
        return MeanAndVariance(torch.cat(means), var + self.noise if include_noise else var)
