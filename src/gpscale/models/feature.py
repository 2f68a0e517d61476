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
from ..linalg import robust_cholesky
from ..params import LOG_2PI, Positive
from ..validation import as_test_inputs, check_xy
from .base import GPModel, MeanAndVariance, dtype_name, no_data

#: bytes for one chunk of Φ and its temporaries
CHUNK_BYTES = 64 * 2**20


def chunk_statistics(
    features: FeatureMap, X: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(ΦᵀΦ, Φᵀy, yᵀy, n) of one chunk — a pure function, so the reduction over chunks
    (a plain sum) can run anywhere (a process pool, dask) and be added up."""
    phi = features(X)
    return phi.mT @ phi, phi.mT @ y, y @ y, X.shape[0]


class _Statistics(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, X, y, chunk, *params):  # noqa: D102
        p = features.num_features
        gram = X.new_zeros(p, p)
        proj = X.new_zeros(p)
        with torch.no_grad():
            for s in range(0, X.shape[0], chunk):
                g, b, _, _ = chunk_statistics(features, X[s : s + chunk], y[s : s + chunk])
                gram += g
                proj += b
        ctx.features, ctx.chunk = features, chunk
        ctx.save_for_backward(X, y, *params)
        return gram, proj

    @staticmethod
    def backward(ctx, g_gram, g_proj):  # noqa: D102
        X, y, *params = ctx.saved_tensors
        needs = ctx.needs_input_grad[4:]
        want = [p for p, need in zip(params, needs) if need]
        acc = [torch.zeros_like(p) for p in want]
        sym = g_gram + g_gram.mT
        for s in range(0, X.shape[0], ctx.chunk):
            Xc, yc = X[s : s + ctx.chunk], y[s : s + ctx.chunk]
            with torch.enable_grad():
                phi = ctx.features(Xc)
            # ∂/∂Φ of ⟨G, ΦᵀΦ⟩ + ⟨g, Φᵀy⟩ is Φ(G + Gᵀ) + y gᵀ
            g_phi = phi.detach() @ sym + torch.outer(yc, g_proj)
            parts = torch.autograd.grad(phi, want, g_phi, allow_unused=True)
            for a, part in zip(acc, parts):
                if part is not None:
                    a += part
        it = iter(acc)
        return (None, None, None, None, *[next(it) if need else None for need in needs])


class FeatureGP(GPModel):
    """GP with covariance Φ W Φᵀ + σ²I for a feature map Φ = features(X).

    ``weights``: ``"scalar"`` (W = w I, w learned: the signal variance), ``"diag"``
    (one learned weight per feature, GRIEF's re-weighting) or ``"fixed"`` (W = I).
    """

    noise = Positive(floor=1e-6, doc="noise variance σ²")
    weight = Positive(floor=1e-10, doc="feature weights w (W = diag(w))")

    def __init__(
        self,
        features: FeatureMap,
        X,
        y,
        noise: float = 0.1,
        weights: str = "scalar",
        chunk: int | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if weights not in ("scalar", "diag", "fixed"):
            raise ValueError(f"weights must be 'scalar', 'diag' or 'fixed', got {weights!r}")
        X, y = check_xy(X, y, dtype, device)
        self.features = features.to(dtype=dtype, device=X.device)
        p = features.num_features
        self.weights_kind = weights
        self.noise = torch.tensor(float(noise), dtype=dtype)
        self.weight = torch.ones(p if weights == "diag" else 1, dtype=dtype)
        if weights == "fixed":
            self.raw_weight.requires_grad_(False)
        self.register_buffer("X", X)
        self.register_buffer("y", y)
        self.chunk = chunk or max(1, CHUNK_BYTES // (8 * 4 * (p + X.shape[1])))
        self._stats_cache = None
        self.to(X.device)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ΦᵀΦ, Φᵀy, yᵀy) by one streaming pass; differentiable in the features'
        parameters, and cached while those parameters do not change."""
        params = [p for p in self.features.parameters() if p.requires_grad]
        if not params:
            key = tuple(p._version for p in self.features.parameters()) + (self.X._version,)
            if self._stats_cache is None or self._stats_cache[0] != key:
                with torch.no_grad():
                    gram, proj = _Statistics.apply(self.features, self.X, self.y, self.chunk)
                self._stats_cache = (key, gram, proj)
            gram, proj = self._stats_cache[1:]
        else:
            gram, proj = _Statistics.apply(self.features, self.X, self.y, self.chunk, *params)
        return gram, proj, self.y @ self.y

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

    # -- persistence ----------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        return {"weights": self.weights_kind, "dtype": dtype_name(self.X),
                **feature_map_config(self.features)}

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Any = None) -> FeatureGP:
        dtype = getattr(torch, config["dtype"])
        X, y = state["X"], state["y"]
        feats = feature_map_from_config(config, X, dtype)
        return cls(feats, X, y, weights=config["weights"], dtype=dtype)

    @torch.no_grad()
    def predict(
        self, X_new, *, include_noise: bool = False, full_cov: bool = False
    ) -> MeanAndVariance:
        """Posterior mean and variance (or covariance) at ``X_new``."""
        Xs = as_test_inputs(X_new, self.X)
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
