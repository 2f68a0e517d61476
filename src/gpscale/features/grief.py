"""GRIEF features: Nyström eigenfunctions from a Cartesian grid of inducing points
(Evans & Nair 2018, "GP-GRIEF", §3-4).

For a separable base kernel k(x, z) = Πᵢ kᵢ(xᵢ, zᵢ) and a grid U = U⁽¹⁾ x … x U⁽ᵈ⁾
of m = Πᵢ m̄ᵢ points, K_UU = ⊗ᵢ K_UU⁽ⁱ⁾ = Q Λ Qᵀ with Q = ⊗ᵢ Q⁽ⁱ⁾ and
diag(Λ) = ⊗ᵢ λ⁽ⁱ⁾ (d small ``eigh``), and the p scaled eigenfunctions are

    Φ = K_XU Q S_pᵀ Λ_p^{-1/2}                                        (eq. 4)

so that Φ Φᵀ = K_XU Q S_pᵀ Λ_p⁻¹ S_p Qᵀ K_UX (eq. 3): the Nyström approximation
restricted to the p largest eigenpairs. S_p and log λ_p come from the exact top-p
search over ⊗ᵢ λ⁽ⁱ⁾ (Algorithm 1) and Φ from Theorem 2 in its stable log form: one
n x m̄ᵢ cross-covariance per dimension, O(d·n·p) time, for any m (10¹⁰⁰ included).

Gradients in the lengthscales are exact: through K_XU⁽ⁱ⁾, through λ⁽ⁱ⁾ and through
Q⁽ⁱ⁾ by the eigenvector derivative dQ = Q (F ∘ QᵀdA Q), Fⱼₖ = 1/(λₖ − λⱼ). Pairs of
eigenvalues closer than ``gap_tol``·λ_max (in practice: the round-off floor of the
spectrum, which the relative eigenvalue floor clips anyway) are treated as
degenerate and their F entries set to 0, instead of the 1/0 that makes plain
autograd through ``eigh`` return inf/NaN there.
"""

from __future__ import annotations

import math

import torch

from ..kernels.spectral import spectral_names
from ..linalg.cholesky import robust_eigh
from ..linalg.kron import kr_kron_select, kron_top_p
from ..params import Positive
from .base import FeatureMap

#: the base kernels GRIEF expands: every spectral density a kernel can name
#: (:meth:`gpscale.kernels.Kernel.spectral_density`), each a 1-D factor in :func:`kernel_1d`
KERNELS_1D = spectral_names()
#: grid placements per input column (see :func:`grid_1d`)
GRIDS = ("uniform", "quantile")


def kernel_1d(kind: str, x: torch.Tensor, u: torch.Tensor, lengthscale: torch.Tensor):
    """One factor kᵢ(x, u) of a separable kernel, (n,) x (m̄,) -> (n, m̄), unit variance.

    rbf: exp(−r²/2); matern12: e^{−r}; matern32: (1 + √3 r) e^{−√3 r};
    matern52: (1 + √5 r + 5r²/3) e^{−√5 r};  r = |x − u| / l.
    """
    diff = (x[:, None] - u[None, :]) / lengthscale
    if kind == "rbf":
        return torch.exp(-0.5 * diff * diff)
    r = diff.abs()
    if kind == "matern12":
        return torch.exp(-r)
    if kind == "matern32":
        s = math.sqrt(3.0) * r
        return (1.0 + s) * torch.exp(-s)
    if kind == "matern52":
        s = math.sqrt(5.0) * r
        return (1.0 + s + s * s / 3.0) * torch.exp(-s)
    raise ValueError(f"unknown GRIEF base kernel {kind!r}; choose one of {KERNELS_1D}")


class _SymEig(torch.autograd.Function):
    """``eigh`` with the eigenvector gradient's near-degenerate pairs dropped."""

    @staticmethod
    def forward(ctx, A, gap_tol):  # noqa: D102
        lam, Q = robust_eigh(A)
        ctx.gap_tol = gap_tol
        ctx.save_for_backward(lam, Q)
        return lam, Q

    @staticmethod
    def backward(ctx, g_lam, g_Q):  # noqa: D102
        lam, Q = ctx.saved_tensors
        inner = torch.diag_embed(g_lam) if g_lam is not None else torch.zeros_like(Q)
        if g_Q is not None:
            gap = lam[None, :] - lam[:, None]  # λₖ − λⱼ
            tol = ctx.gap_tol * lam.abs().max().clamp_min(torch.finfo(lam.dtype).tiny)
            F = torch.where(gap.abs() > tol, 1.0 / torch.where(gap == 0, 1.0, gap), 0.0)
            inner = inner + F * (Q.mT @ g_Q)
        gA = Q @ inner @ Q.mT
        return 0.5 * (gA + gA.mT), None


def sym_eig(A: torch.Tensor, gap_tol: float = 1e-10) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric A, differentiable with
    near-degenerate pairs (|λⱼ − λₖ| ≤ gap_tol·max|λ|) treated as degenerate."""
    return _SymEig.apply(A, gap_tol)


def check_grid(kind: str) -> None:
    """Raise ValueError unless ``kind`` is one of :data:`GRIDS`."""
    if kind not in GRIDS:
        raise ValueError(f"unknown GRIEF grid {kind!r}; choose one of {GRIDS}")


def grid_1d(x: torch.Tensor, m_bar: int, kind: str = "uniform") -> torch.Tensor:
    """Grid for one input column, ascending: the distinct values themselves when there
    are at most m̄ of them; otherwise

    * ``"uniform"``: m̄ evenly spaced points over [min x, max x];
    * ``"quantile"``: the data values at the m̄ evenly spaced quantile levels
      0, 1/(m̄−1), …, 1 (nearest rank), repeated values merged, so the grid follows
      the distribution of the column, as the paper asks of U (§4, footnote 1),
      and still spans its range. On a heavy-tailed column the uniform grid leaves
      one or two points where nearly all the data lie."""
    check_grid(kind)
    values = torch.unique(x)
    if values.numel() <= m_bar:
        return values
    if kind == "quantile":
        ordered = torch.sort(x).values
        ranks = torch.round(torch.linspace(0, x.numel() - 1, m_bar, dtype=torch.float64))
        return torch.unique(ordered[ranks.long().to(x.device)])
    return torch.linspace(float(values[0]), float(values[-1]), m_bar,
                          dtype=x.dtype, device=x.device)


def fill_grid(g: torch.Tensor, m_bar: int) -> torch.Tensor:
    """A column's grid with fewer than m̄ points (but at least 2: a column of few
    distinct values, or a quantile grid whose levels merged) as m̄ evenly spaced
    points over its range, the paper's m̄ per dimension (§6), so that m = Π m̄ᵢ does
    not cap p; a single point (a constant column) stays one point."""
    if g.numel() < 2 or g.numel() >= m_bar:
        return g
    return torch.linspace(float(g.min()), float(g.max()), m_bar, dtype=g.dtype,
                          device=g.device)


def fill_grids(grids: list[torch.Tensor], m_bar: int, kind: str, p: int
               ) -> list[torch.Tensor]:
    """GRIEF-I's grids (one per column) with the short ones filled (:func:`fill_grid`):
    always on the uniform grid, the paper's m̄ evenly spaced points per dimension; on the
    quantile grid only where the grids' product is below ``p`` (where it would cap p),
    since its own points are where the data are and points added elsewhere change
    which p eigenfunctions lead (benchmarks/results/grief-uci-large-eq16/README.md)."""
    check_grid(kind)
    if kind == "quantile" and math.prod(g.numel() for g in grids) >= p:
        return list(grids)
    return [fill_grid(g, m_bar) for g in grids]


class GriefFeatures(FeatureMap):
    """Grid-structured eigenfunctions Φ (n x p) of a separable RBF-ARD or Matérn-ARD
    base kernel (eq. 4); k̃(x, z) = φ(x)ᵀφ(z) ≈ k(x, z) with unit signal variance.

    Parameters
    ----------
    X : training inputs (n, d); column i gets a grid of ``m_bar`` points (capped at
        its number of distinct values, and placed on those values when there are at
        most ``m_bar``). The grid is fixed after construction.
    num_features : p, the number of eigenfunctions (capped at m = Π m̄ᵢ).
    kernel : ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"`` (a product of
        1-D kernels, one lengthscale per column).
    lengthscale : initial lengthscale(s), one value or one per column.
    grid : ``"uniform"`` (default: evenly spaced over each column's range) or
        ``"quantile"`` (at evenly spaced quantiles of each column); see :func:`grid_1d`.
    eig_floor : eigenvalues of each K_UU⁽ⁱ⁾ are clipped below at eig_floor·max λ⁽ⁱ⁾.
    gap_tol : relative eigenvalue gap below which eigenvector derivatives are dropped.
    """

    lengthscale = Positive(doc="lengthscales l (one per input column)")

    def __init__(
        self,
        X: torch.Tensor | None,
        num_features: int,
        m_bar: int = 10,
        kernel: str = "rbf",
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        eig_floor: float = 1e-12,
        gap_tol: float = 1e-10,
        grid: str = "uniform",
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
        *,
        grids: list[torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        if grids is None:
            X = torch.as_tensor(X, dtype=dtype, device=device)
            if X.ndim != 2 or X.shape[0] == 0:
                raise ValueError("X must be a non-empty (n, d) matrix, got shape "
                                 f"{tuple(X.shape)}")
            if not torch.isfinite(X).all():
                raise ValueError("X contains NaN or inf; remove or impute those rows")
            grids = [grid_1d(X[:, i], m_bar, grid) for i in range(X.shape[1])]
        else:  # grids placed elsewhere (a saved model, a streaming pass over the rows)
            grids = [torch.as_tensor(g, dtype=dtype, device=device).reshape(-1) for g in grids]
        if kernel not in KERNELS_1D:
            raise ValueError(f"unknown GRIEF base kernel {kernel!r}; choose one of {KERNELS_1D}")
        if m_bar < 1:
            raise ValueError(f"m_bar (grid points per dimension) must be ≥ 1, got {m_bar}")
        if num_features < 1:
            raise ValueError(f"num_features (p) must be ≥ 1, got {num_features}")
        if not 0.0 < eig_floor < 1.0:
            raise ValueError(f"eig_floor must be in (0, 1), got {eig_floor}")
        self.d, self.kernel, self.m_bar, self.grid_kind = len(grids), kernel, m_bar, grid
        self.eig_floor, self.gap_tol = eig_floor, gap_tol
        self.grid_sizes = [g.numel() for g in grids]
        padded = grids[0].new_full((self.d, max(self.grid_sizes)), float("nan"))
        for i, g in enumerate(grids):
            padded[i, : g.numel()] = g
        self.register_buffer("grid", padded)
        #: log10 of the number of inducing points m = Π m̄ᵢ (m itself may be 10¹⁰⁰)
        self.log10_m = sum(math.log10(s) for s in self.grid_sizes)
        m = math.prod(self.grid_sizes)  # exact Python integer
        self.num_features = int(min(num_features, m))
        ls = torch.as_tensor(lengthscale, dtype=dtype, device=padded.device).reshape(-1)
        if ls.numel() not in (1, self.d):
            raise ValueError(f"lengthscale has {ls.numel()} entries; give one or d = {self.d}")
        self.lengthscale = ls.expand(self.d).clone()

    @classmethod
    def from_grid_buffer(cls, padded: torch.Tensor, num_features: int,
                         **options) -> GriefFeatures:
        """The map whose padded ``grid`` buffer (d, max m̄ᵢ; NaN past each column's
        points) is given, e.g. from a saved state_dict; ``options`` as the constructor's."""
        grids = [row[~torch.isnan(row)] for row in torch.as_tensor(padded)]
        return cls(None, num_features, grids=grids, **options)

    def grid_points(self, i: int) -> torch.Tensor:
        """The m̄ᵢ grid points U⁽ⁱ⁾ of column i."""
        return self.grid[i, : self.grid_sizes[i]]

    def spectrum(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per-dimension eigenvectors Q⁽ⁱ⁾ and log-eigenvalues log λ⁽ⁱ⁾ of K_UU⁽ⁱ⁾,
        eigenvalues clipped at ``eig_floor``·max λ⁽ⁱ⁾ (differentiable)."""
        ls = self.lengthscale
        Qs, logs = [], []
        for i in range(self.d):
            u = self.grid_points(i)
            lam, Q = sym_eig(kernel_1d(self.kernel, u, u, ls[i]), self.gap_tol)
            floor = self.eig_floor * lam.max().detach()
            Qs.append(Q)
            logs.append(torch.log(lam.clamp_min(floor)))
        return Qs, logs

    def selection(
        self, log_lams: list[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(idx (p, d), log λ_p (p,)): the p largest eigenvalues of K_UU (Algorithm 1);
        log λ_p is recomputed from the selected entries so that it stays differentiable."""
        _, idx = kron_top_p([v.detach() for v in log_lams], self.num_features)
        log_lam_p = sum(v[idx[:, i]] for i, v in enumerate(log_lams))
        return idx, log_lam_p

    def log_eigenvalues(self) -> torch.Tensor:
        """log λ_p, the logs of the p largest eigenvalues of K_UU, descending."""
        _, logs = self.spectrum()
        return self.selection(logs)[1]

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Φ = K_XU Q S_pᵀ Λ_p^{-1/2} (eq. 4) by Theorem 2 in log form, O(d·n·p)."""
        if X.ndim != 2 or X.shape[-1] != self.d:
            raise ValueError(f"GRIEF features built for {self.d} input columns, "
                             f"got X of shape {tuple(X.shape)}")
        Qs, logs = self.spectrum()
        idx, log_lam_p = self.selection(logs)
        ls = self.lengthscale
        Ks = [kernel_1d(self.kernel, X[:, i], self.grid_points(i), ls[i])
              for i in range(self.d)]
        return kr_kron_select(Ks, Qs, idx, -0.5 * log_lam_p)

    def extra_repr(self) -> str:
        return (f"d={self.d}, p={self.num_features}, kernel={self.kernel!r}, "
                f"m=10^{self.log10_m:.1f}")
