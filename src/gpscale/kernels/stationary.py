"""Stationary kernels with automatic relevance determination (one lengthscale per
input column when ``ard_dims`` is given, one shared lengthscale otherwise).

Each kernel writes its formula κ(r²) here and nowhere else: ``_k`` (dense, autograd),
``_contract`` (the closed-form :meth:`Kernel.vjp`) and ``radial`` (the profile its
float32/float64 tiles evaluate, :mod:`gpscale.kernels.chunked`). A subclass keeps its
parent's tiled form and closed gradient unless it overrides ``_k``: then only what it
defines itself is used (:func:`_same_class`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from ..params import Positive
from .base import Kernel
from .chunked import Radial, TiledForm
from .spectral import MATERN_NUS, SpectralDensity


def _scaled(X1: torch.Tensor, X2: torch.Tensor, lengthscale: torch.Tensor):
    """Inputs centred (on X2's mean, for accuracy) and divided by the lengthscales."""
    centre = X2.mean(0, keepdim=True).detach() if X2.shape[0] else 0.0
    return (X1 - centre) / lengthscale, (X2 - centre) / lengthscale


def scaled_sqdist(X1: torch.Tensor, X2: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """r²(x, x') = Σ_d (x_d − x'_d)² / l_d², as one matrix product of augmented inputs
    [a, ‖a‖², 1] [−2b, 1, ‖b‖²]ᵀ (a single n1 x n2 allocation), clamped at zero."""
    a, b = _scaled(X1, X2, lengthscale)
    one_a = torch.ones_like(a[:, :1])
    one_b = torch.ones_like(b[:, :1])
    A = torch.cat([a, (a * a).sum(-1, keepdim=True), one_a], dim=1)
    B = torch.cat([-2.0 * b, one_b, (b * b).sum(-1, keepdim=True)], dim=1)
    r2 = A @ B.mT
    return r2.clamp_min_(0.0) if _inplace_ok(r2) else r2.clamp_min(0.0)


def _inplace_ok(t: torch.Tensor) -> bool:
    return not (torch.is_grad_enabled() and t.requires_grad)


def _same_class(cls: type, *names: str) -> bool:
    """Whether the methods ``names`` of ``cls`` are all defined by one class: a
    subclass that overrides ``_k`` does not inherit its parent's ``radial`` or
    ``_contract``, which would silently compute the parent's formula."""
    owners = {next((c for c in cls.__mro__ if name in vars(c)), None) for name in names}
    return len(owners) == 1


class Stationary(Kernel):
    """A kernel of the scaled distance r between inputs."""

    lengthscale = Positive(doc="lengthscale(s) l")

    def __init__(
        self,
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        ard_dims: int | None = None,
        active_dims: list[int] | None = None,
    ) -> None:
        super().__init__(active_dims)
        ls = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(-1)
        if ard_dims is not None:
            if ard_dims < 1:
                raise ValueError(f"ard_dims must be a positive number of columns, got {ard_dims}")
            if ls.numel() == 1:
                ls = ls.expand(ard_dims).clone()
            elif ls.numel() != ard_dims:
                raise ValueError(
                    f"lengthscale has {ls.numel()} entries but ard_dims={ard_dims}; "
                    "give one value or one per input column."
                )
        self.ard_dims = ard_dims if ard_dims is not None else (ls.numel() if ls.numel() > 1
                                                               else None)
        self.lengthscale = ls

    def _config_args(self) -> dict[str, Any]:
        return {"ard_dims": self.ard_dims}

    def r2(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        if self.ard_dims is not None and X1.shape[-1] != self.ard_dims:
            raise ValueError(
                f"{type(self).__name__} has {self.ard_dims} lengthscales but the inputs have "
                f"{X1.shape[-1]} columns; build it with ard_dims={X1.shape[-1]}."
            )
        return scaled_sqdist(X1, X2, self.lengthscale)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)

    def radial(self) -> Radial | None:
        """κ as the tiles evaluate it (:class:`~gpscale.kernels.chunked.Radial`, current
        values detached); None (the default) when the kernel has no tiled form."""
        return None

    def tiled_form(self, scale: float = 1.0) -> TiledForm | None:  # noqa: D102
        radial = self.radial() if _same_class(type(self), "_k", "radial") else None
        if radial is None:
            return None
        dims = None if self.active_dims is None else tuple(int(i) for i in self.active_dims)
        return TiledForm(radial, self.lengthscale.detach().reshape(-1), scale, dims)

    def tiled_gradients(self, form, total, S):  # noqa: D102 - see Kernel.tiled_gradients
        # κ = e^{−r²/2}: ∂κ/∂l_d = κ (a_d − b_d)²/l_d, so ∂⟨G, K⟩/∂l_d = scale · S_d / l_d
        if not self.raw_lengthscale.requires_grad:
            return {}
        ls = self.lengthscale.detach().reshape(-1).to(S)
        grad = form.scale * S / ls if ls.numel() == S.numel() else \
            (form.scale * S / ls).sum().reshape(1)
        return {self.raw_lengthscale: type(self).lengthscale.raw_grad(self, grad)}

    def _contract(self, r2: torch.Tensor, G: torch.Tensor):
        """From r² (may be overwritten) and G: (M, inner, extra) with
        M = G ∘ ∂k/∂(r²), inner = ⟨G, K⟩, extra = {param: grad} for non-lengthscale
        parameters. Subclasses with a closed form implement this."""
        raise NotImplementedError

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        out = self._closed_vjp(X1, X2, G, inputs=False)
        return super().vjp(X1, X2, G) if out is None else out[:2]

    def vjp_inputs(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp_inputs
        out = self._closed_vjp(X1, X2, G, inputs=True)
        return super().vjp_inputs(X1, X2, G) if out is None else out

    def _closed_vjp(self, X1, X2, G, inputs: bool):
        """(grads, ⟨G, K⟩, ∂⟨G, K⟩/∂X1 or None) from ``_contract``; None when the kernel
        has no closed form (or inherits one for a formula it overrides)."""
        if not _same_class(type(self), "_k", "_contract"):
            return None
        try:
            with torch.no_grad():
                C1, C2 = self._cols(X1), self._cols(X2)
                ls = self.lengthscale.detach()
                M, inner, extra = self._contract(scaled_sqdist(C1, C2, ls), G)
        except NotImplementedError:
            return None
        with torch.no_grad():
            a, b = _scaled(C1, C2, ls)
            rows, Mb = M.sum(1, keepdim=True), M @ b
            # Σ_ij M_ij (a_id − b_jd)² for every d, without an n1 x n2 x d tensor
            S = ((a * a) * rows).sum(0) + ((b * b) * M.sum(0)[:, None]).sum(0) \
                - 2.0 * (a * Mb).sum(0)
            grad_ls = -2.0 * S / ls  # ∂r²/∂l_d = −2 (a_d − b_d)² / l_d
            if ls.numel() == 1:
                grad_ls = grad_ls.sum().reshape(1)
            g_x1 = None
            if inputs:  # ∂r²_ij/∂x1_id = 2 (a_id − b_jd) / l_d
                g_cols = 2.0 * (a * rows - Mb) / ls
                g_x1 = g_cols if self.active_dims is None else \
                    torch.zeros_like(X1).index_add_(1, torch.as_tensor(
                        self.active_dims, device=X1.device) % X1.shape[1], g_cols)
        grads = dict(extra)
        if self.raw_lengthscale.requires_grad:
            grads[self.raw_lengthscale] = type(self).lengthscale.raw_grad(self, grad_ls)
        return grads, inner, g_x1


def _exp_(t: torch.Tensor) -> torch.Tensor:
    """κ(t) = eᵗ in place (tiles' rounding may leave t a hair above 0: exp is
    continuous there)."""
    return t.exp_()


class RBF(Stationary):
    """Squared exponential: k(x, x') = exp(−r²/2), r² = Σ_d (x_d − x'_d)²/l_d².

    Separable: K = Π_d K_d with K_d = exp(−(x_d − x'_d)²/(2 l_d²)); see :meth:`factors`.
    Spectral density N(0, I) on the scaled inputs. κ(t) = eᵗ at t = −r²/2
    (:meth:`radial`) in every path: dense, contraction and tiles.
    """

    def spectral_density(self) -> SpectralDensity:
        return SpectralDensity("rbf")

    def radial(self) -> Radial:  # noqa: D102
        return Radial(-0.5, 0.0, _exp_, exponential=True)

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        r2 = self.r2(X1, X2)
        radial = self.radial()
        t = r2.mul_(radial.coefficient) if _inplace_ok(r2) else r2 * radial.coefficient
        return radial.map_(t)  # in place on t, a fresh tensor: exp's backward reads κ

    def _contract(self, r2, G):
        radial = self.radial()
        K = radial.map_(r2.mul_(radial.coefficient))
        inner = torch.vdot(G.reshape(-1), K.reshape(-1))
        return K.mul_(G).mul_(radial.coefficient), inner, {}  # ∂k/∂r² = −k/2

    def factors(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """The 1-D factor matrices, shape (d, n1, n2), whose elementwise product is K."""
        X1 = self._cols(X1)
        X2 = X1 if X2 is None else self._cols(X2)
        ls = self.lengthscale.expand(X1.shape[-1])
        diff = (X1.mT[:, :, None] - X2.mT[:, None, :]) / ls[:, None, None]
        return torch.exp(-0.5 * diff * diff)


def _matern_(t: torch.Tensor, nu: float) -> torch.Tensor:
    """The Matérn κ in place from t = 2ν r² = s²: e^{−s}, (1 + s) e^{−s},
    (1 + s + s²/3) e^{−s} for ν = 1/2, 3/2, 5/2."""
    s = t.clamp_min_(0.0).sqrt_()
    if nu == 0.5:
        return s.neg_().exp_()
    E = torch.neg(s).exp_()
    if nu == 1.5:
        return s.add_(1.0).mul_(E)
    return s.addcmul_(s, s, value=1.0 / 3.0).add_(1.0).mul_(E)


class Matern(Stationary):
    """Matérn with ν ∈ {1/2, 3/2, 5/2}:

    ν=1/2: exp(−r);  ν=3/2: (1 + √3 r) exp(−√3 r);  ν=5/2: (1 + √5 r + 5r²/3) exp(−√5 r).
    Spectral density: Student-t with 2ν degrees of freedom on the scaled inputs.

    The three paths evaluate this κ in their own order of operations (``_k`` from r with
    a floor that keeps autograd's √ finite at r = 0; ``_contract`` from r with its
    derivative; the tiles from s² = 2ν r², :meth:`radial`), kept as they are so that
    every fit reproduces bit for bit; tests/test_kernel_forms.py holds each (and GRIEF's
    1-D factor) to the formula.
    """

    def __init__(
        self,
        nu: float = 2.5,
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        ard_dims: int | None = None,
        active_dims: list[int] | None = None,
    ) -> None:
        if nu not in MATERN_NUS:
            raise ValueError(f"Matern nu must be 0.5, 1.5 or 2.5, got {nu}")
        super().__init__(lengthscale, ard_dims, active_dims)
        self.nu = float(nu)

    def _config_args(self) -> dict[str, Any]:
        return {"nu": self.nu, "ard_dims": self.ard_dims}

    def spectral_density(self) -> SpectralDensity:
        return SpectralDensity("matern", self.nu)

    def radial(self) -> Radial:  # noqa: D102
        return Radial(2.0 * self.nu, 0.0, functools.partial(_matern_, nu=self.nu))

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        r2 = self.r2(X1, X2)
        r = torch.sqrt(r2.clamp_min(1e-30))
        if self.nu == 0.5:
            return torch.exp(-r)
        if self.nu == 1.5:
            s = math.sqrt(3.0) * r
            return (1.0 + s) * torch.exp(-s)
        s = math.sqrt(5.0) * r
        return (1.0 + s + (5.0 / 3.0) * r2) * torch.exp(-s)

    def _contract(self, r2, G):
        r = r2.sqrt_()
        c = math.sqrt(2.0 * self.nu)
        e = torch.exp(-c * r)
        if self.nu == 0.5:
            inner = torch.vdot(G.reshape(-1), e.reshape(-1))
            # ∂k/∂r² = −e^{−r}/(2r); its contribution vanishes where r = 0
            dk = e.div_(r.mul_(2.0)).neg_().nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        elif self.nu == 1.5:
            inner = torch.vdot(G.reshape(-1), (e * (1.0 + c * r)).reshape(-1))
            dk = e.mul_(-1.5)  # ∂k/∂r² = −(3/2) e^{−√3 r}
        else:
            poly = 1.0 + c * r + (5.0 / 3.0) * r * r
            inner = torch.vdot(G.reshape(-1), (poly * e).reshape(-1))
            dk = e.mul_(r.mul_(c).add_(1.0)).mul_(-5.0 / 6.0)  # −(5/6)(1 + √5 r) e^{−√5 r}
        return dk.mul_(G), inner, {}


def _rational_(t: torch.Tensor, alpha: float) -> torch.Tensor:
    """κ(t) = t^(−α) in place, t = 1 + r²/(2α) (≥ 1 but for the tiles' rounding)."""
    return t.clamp_min_(1.0).pow_(-alpha)


class RationalQuadratic(Stationary):
    """k(x, x') = (1 + r²/(2α))^(−α).

    ``_k`` and ``_contract`` take α as a tensor (its gradient), the tiles
    (:meth:`radial`) as a number folded into their GEMM.
    """

    alpha = Positive(doc="shape α")

    def __init__(
        self,
        lengthscale: float | list[float] | torch.Tensor = 1.0,
        alpha: float = 1.0,
        ard_dims: int | None = None,
        active_dims: list[int] | None = None,
    ) -> None:
        super().__init__(lengthscale, ard_dims, active_dims)
        self.alpha = alpha

    def radial(self) -> Radial:  # noqa: D102
        alpha = float(self.alpha.detach())
        return Radial(0.5 / alpha, 1.0, functools.partial(_rational_, alpha=alpha))

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return torch.pow(1.0 + self.r2(X1, X2) / (2.0 * self.alpha), -self.alpha)

    def _contract(self, r2, G):
        alpha = self.alpha.detach()
        u = r2.div_(2.0 * alpha).add_(1.0)  # u = 1 + r²/(2α)
        K = u.pow(-alpha)
        inner = torch.vdot(G.reshape(-1), K.reshape(-1))
        GK = K.mul_(G)
        extra = {}
        if self.raw_alpha.requires_grad:
            # ∂k/∂α = k (−log u + (u − 1)/u)
            d_alpha = torch.vdot(GK.reshape(-1), ((u - 1.0) / u - torch.log(u)).reshape(-1))
            extra[self.raw_alpha] = type(self).alpha.raw_grad(self, d_alpha)
        return GK.div_(u).mul_(-0.5), inner, extra  # ∂k/∂r² = −k/(2u)


class Linear(Kernel):
    """k(x, x') = v · xᵀx'."""

    variance = Positive(doc="variance v")

    def __init__(self, variance: float = 1.0, active_dims: list[int] | None = None) -> None:
        super().__init__(active_dims)
        self.variance = variance

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self.variance * (X1 @ X2.mT)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return self.variance * (X * X).sum(-1)
