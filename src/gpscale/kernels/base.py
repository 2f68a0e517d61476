"""Kernel base class, sums, products and the signal-variance wrapper.

A kernel is an ``nn.Module``: ``kernel(X1, X2)`` returns the n1 x n2 covariance
matrix, ``kernel.diag(X)`` its diagonal on X, ``kernel.matmul(X1, X2, V)`` the
product K(X1, X2) @ V computed over row blocks (see :mod:`gpscale.kernels.chunked`).
Kernels combine with ``+`` and ``*``. ``kernel.config()`` describes the structure so
that :func:`gpscale.kernels.from_config` can rebuild it; values travel in the
``state_dict``.

Every subclass registers itself in :data:`KERNEL_CLASSES` under its class name (or the
``name=`` given as a class keyword), which is the ``"type"`` its config writes and the
key a saved file is rebuilt from, so a user's kernel saves and loads like the built-in
ones once its class is defined. A name already held by one of gpscale's own kernels
cannot be taken by a different class: the definition raises TypeError (rename the
class, or register it under another name: ``class RBF(Kernel, name="mine.RBF")``). A
name held by a user's class goes to the newest definition (re-running a notebook
cell redefines a class), with a warning when it comes from another module or scope.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ..params import Positive, summary
from .chunked import TiledForm, kernel_matmul
from .memo import InputMemo

if TYPE_CHECKING:
    from .spectral import SpectralDensity

#: kernel classes by registered name (filled when a subclass of :class:`Kernel` is defined)
KERNEL_CLASSES: dict[str, type[Kernel]] = {}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _builtin(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "gpscale"


def _register(cls: type[Kernel], name: str | None) -> None:
    """Put ``cls`` in :data:`KERNEL_CLASSES` (see the module docstring for clashes)."""
    name = cls.__name__ if name is None else name
    if not isinstance(name, str) or not name:
        raise TypeError(f"a kernel's registered name must be a non-empty str, got {name!r}")
    held = KERNEL_CLASSES.get(name)
    if held is not None and _qualified(held) != _qualified(cls):
        if _builtin(held):
            raise TypeError(
                f"kernel name {name!r} belongs to gpscale's {_qualified(held)}; saved files "
                f"name kernels by it, so {_qualified(cls)} cannot take it. Rename the class "
                f"or register it under another name: class {cls.__name__}(..., "
                f'name="{cls.__module__}.{cls.__name__}")')
        warnings.warn(f"kernel name {name!r} now rebuilds {_qualified(cls)} instead of "
                      f"{_qualified(held)} when a model is loaded", stacklevel=3)
    cls.type_name = name
    KERNEL_CLASSES[name] = cls


def kernel_class(name: str) -> type[Kernel]:
    """The registered kernel class called ``name``; ValueError naming the fix."""
    if name not in KERNEL_CLASSES:
        public = sorted(k for k in KERNEL_CLASSES if not k.startswith("_"))  # not bases
        raise ValueError(
            f"unknown kernel type {name!r} in saved config: define (import) the kernel "
            f"class before loading, a subclass of gpscale.kernels.Kernel registers itself "
            f"by its class name (known: {public})")
    return KERNEL_CLASSES[name]


class Kernel(nn.Module):
    """Base class. Subclasses implement ``_k(X1, X2)`` and ``_diag(X)`` on active columns.

    Contract: ``kernel(X1, X2)`` returns a new tensor that the caller owns and may
    modify in place (the exact GP adds σ² to its diagonal, :class:`Scale` scales it
    when autograd is off), never a cached or shared one.
    """

    #: the kernel reads its columns as given (counts, histograms, integer codes):
    #: :func:`gpscale.fit` leaves them unstandardised (see :meth:`raw_columns`)
    raw_inputs: bool = False
    #: the name this class is registered and saved under (see :data:`KERNEL_CLASSES`)
    type_name: ClassVar[str] = "Kernel"

    def __init_subclass__(cls, name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls, name)

    def __init__(self, active_dims: list[int] | None = None) -> None:
        super().__init__()
        self.active_dims = list(active_dims) if active_dims is not None else None

    # -- evaluation -----------------------------------------------------------------
    def _cols(self, X: torch.Tensor) -> torch.Tensor:
        return X if self.active_dims is None else X[:, self.active_dims]

    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        X2 = X1 if X2 is None else X2
        return self._k(self._cols(X1), self._cols(X2))

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        """The diagonal k(x_i, x_i), without forming the matrix."""
        return self._diag(self._cols(X))

    def _k(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return torch.diagonal(self._k(X, X))

    def matmul(
        self,
        X1: torch.Tensor,
        X2: torch.Tensor,
        V: torch.Tensor,
        block: int | None = None,
    ) -> torch.Tensor:
        """K(X1, X2) @ V holding at most one row block of K; differentiable in θ and V."""
        return kernel_matmul(self, X1, X2, V, block=block)

    def vjp(
        self, X1: torch.Tensor, X2: torch.Tensor, G: torch.Tensor
    ) -> tuple[dict[torch.Tensor, torch.Tensor], torch.Tensor]:
        """Gradients of ⟨G, K(X1, X2)⟩ = Σ_ij G_ij K_ij with respect to every trainable
        parameter (a dict keyed by the parameter), and the value ⟨G, K⟩ itself.

        This is the contraction every likelihood gradient here reduces to
        (e.g. G = ½(C⁻¹ − ααᵀ) for the exact NLML). The default recomputes K with
        autograd; kernels with a cheaper closed form override it.
        """
        params = [p for p in self.parameters() if p.requires_grad]
        with torch.enable_grad():
            K = self(X1, X2)
            grads = torch.autograd.grad(K, params, G, allow_unused=True) if params else []
        out = {p: (g if g is not None else torch.zeros_like(p)) for p, g in zip(params, grads)}
        return out, torch.vdot(G.reshape(-1), K.detach().reshape(-1))

    def vjp_inputs(
        self, X1: torch.Tensor, X2: torch.Tensor, G: torch.Tensor
    ) -> tuple[dict[torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor]:
        """As :meth:`vjp`, plus the gradient of ⟨G, K(X1, X2)⟩ with respect to X1 (for
        inducing inputs learned by gradient). The default recomputes K with autograd."""
        params = [p for p in self.parameters() if p.requires_grad]
        with torch.enable_grad():
            X1 = X1.detach().requires_grad_()
            K = self(X1, X2)
            g_x1, *grads = torch.autograd.grad(K, [X1, *params], G, allow_unused=True)
        out = {p: (g if g is not None else torch.zeros_like(p)) for p, g in zip(params, grads)}
        g_x1 = torch.zeros_like(X1) if g_x1 is None else g_x1
        return out, torch.vdot(G.reshape(-1), K.detach().reshape(-1)), g_x1

    def clear_cache(self) -> None:
        """Forget the hyperparameter-free work cached by this kernel and its parts
        (:mod:`gpscale.kernels.memo`); needed only after writing into an input behind
        PyTorch's version counter (``tensor.data``, a NumPy array sharing memory)."""
        for mod in self.modules():
            for value in vars(mod).values():
                if isinstance(value, InputMemo):
                    value.clear()

    def spectral_density(self) -> SpectralDensity | None:
        """The family of this kernel's spectral density when the feature methods (random
        Fourier features, GRIEF) can sample or expand it; None otherwise (the default).
        A kernel that answers must be a :class:`~gpscale.kernels.Stationary` (its
        lengthscales scale the frequencies); see :mod:`gpscale.kernels.spectral`."""
        return None

    def tiled_form(self, scale: float = 1.0) -> TiledForm | None:
        """``scale`` times this kernel as a :class:`~gpscale.kernels.chunked.TiledForm`
        (its radial profile, lengthscales and output scale, detached) when it has one, for
        the tiled products of :mod:`gpscale.kernels.chunked`; None otherwise (the
        default: slabs come from ``kernel(X1, X2)``)."""
        return None

    def tiled_gradients(self, form: TiledForm, total: torch.Tensor, S: torch.Tensor
                        ) -> dict[torch.Tensor, torch.Tensor]:
        """Raw-parameter gradients of ⟨G, K⟩ from the sums of
        :func:`~gpscale.kernels.chunked.tiled_contraction` (``form``: this kernel's
        :meth:`tiled_form` with an exponential profile)."""
        raise NotImplementedError(f"{type(self).__name__} has no tiled contraction")

    def unscaled(self, scale: float = 1.0) -> tuple[float, Kernel]:
        """(s, k) with ``scale`` times this kernel = s · k and k not a :class:`Scale`:
        (``scale``, self) here; a Scale multiplies its signal variance in."""
        return scale, self

    def raw_columns(self, d: int) -> list[int]:
        """The columns of a d-column input that some part of this kernel reads as given
        (a part with ``raw_inputs``: its ``active_dims``, or every column); sorted."""
        cols: set[int] = set()
        for k in self.modules():
            if isinstance(k, Kernel) and k.raw_inputs:
                dims = range(d) if k.active_dims is None else k.active_dims
                cols.update(int(c) % d for c in dims)
        return sorted(cols)

    # -- algebra --------------------------------------------------------------------
    def __add__(self, other: Kernel) -> Kernel:
        return Sum(self, other)

    def __mul__(self, other: Kernel) -> Kernel:
        return Product(self, other)

    # -- description ----------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Structure of the kernel (no parameter values): enough to rebuild it."""
        cfg: dict[str, Any] = {"type": type(self).type_name, "args": self._config_args()}
        if self.active_dims is not None:
            cfg["args"]["active_dims"] = self.active_dims
        return cfg

    def _config_args(self) -> dict[str, Any]:
        """Constructor arguments (plain values) that rebuild this kernel's shapes;
        ``active_dims`` is added by :meth:`config`."""
        return {}

    @classmethod
    def from_config(cls, args: dict[str, Any], children: list[Kernel]) -> Kernel:
        """A kernel of this class from its saved ``args`` (``cls(**args)``) and the
        rebuilt kernels it wraps (none here; :class:`Scale`, :class:`Sum` and
        :class:`Product` take theirs). Values are loaded afterwards from a state_dict."""
        if children:
            raise ValueError(f"saved config of {cls.type_name} has {len(children)} child "
                             "kernels; override Kernel.from_config to take them")
        try:
            return cls(**args)
        except TypeError as err:
            raise ValueError(
                f"cannot rebuild kernel {cls.type_name} from its saved args {args}: {err}. "
                "Its __init__ must accept what its _config_args() returns (and "
                "active_dims)") from None

    def summary(self) -> str:
        return summary(self)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self._config_args().items())


class Scale(Kernel):
    """Signal variance times a base kernel: s² k(x, x')."""

    outputscale = Positive(doc="signal variance s²")

    def __init__(self, base: Kernel, outputscale: float = 1.0) -> None:
        super().__init__()
        self.base = base
        self.outputscale = outputscale

    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        K = self.base(X1, X2)
        if not torch.is_grad_enabled():
            return K.mul_(self.outputscale)  # K is a fresh tensor: scale in place
        return self.outputscale * K

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        return self.outputscale * self.base.diag(X)

    def spectral_density(self) -> SpectralDensity | None:
        """The base kernel's: s² scales k, not the shape of its spectrum."""
        return self.base.spectral_density()

    def tiled_form(self, scale: float = 1.0) -> TiledForm | None:  # noqa: D102
        return self.base.tiled_form(scale * float(self.outputscale.detach()))

    def tiled_gradients(self, form, total, S):  # noqa: D102 - see Kernel.tiled_gradients
        # K = (Π s_k) κ: in this s², (Π s / s²) · Σ G ⊙ κ
        out = {}
        if self.raw_outputscale.requires_grad:
            value = form.scale / float(self.outputscale.detach()) * total
            out[self.raw_outputscale] = type(self).outputscale.raw_grad(self, value)
        out.update(self.base.tiled_gradients(form, total, S))
        return out

    def unscaled(self, scale: float = 1.0) -> tuple[float, Kernel]:  # noqa: D102
        return self.base.unscaled(scale * float(self.outputscale.detach()))

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        return self._scaled(*self.base.vjp(X1, X2, G))

    def vjp_inputs(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp_inputs
        grads, inner, g_x1 = self.base.vjp_inputs(X1, X2, G)
        return (*self._scaled(grads, inner), self.outputscale.detach() * g_x1)

    def _scaled(self, grads, inner):
        """The base kernel's contraction times s², plus the gradient in s² itself."""
        s2 = self.outputscale.detach()
        grads = {p: g * s2 for p, g in grads.items()}
        if self.raw_outputscale.requires_grad:
            grads[self.raw_outputscale] = type(self).outputscale.raw_grad(self, inner)
        return grads, s2 * inner

    def config(self) -> dict[str, Any]:
        return {"type": type(self).type_name, "args": {}, "children": [self.base.config()]}

    @classmethod
    def from_config(cls, args: dict[str, Any], children: list[Kernel]) -> Kernel:  # noqa: D102
        if len(children) != 1:
            raise ValueError(f"saved config of {cls.type_name} needs one child kernel, got "
                             f"{len(children)}")
        return cls(children[0], **args)


class _Combination(Kernel):
    def __init__(self, *kernels: Kernel) -> None:
        super().__init__()
        flat: list[Kernel] = []
        for k in kernels:
            if not isinstance(k, Kernel):
                raise TypeError(f"can only combine Kernel objects, got {type(k).__name__}")
            flat.extend(k.kernels if type(k) is type(self) else [k])
        self.kernels = nn.ModuleList(flat)

    def config(self) -> dict[str, Any]:
        return {"type": type(self).type_name, "args": {},
                "children": [k.config() for k in self.kernels]}

    @classmethod
    def from_config(cls, args: dict[str, Any], children: list[Kernel]) -> Kernel:  # noqa: D102
        return cls(*children, **args)


class Sum(_Combination):
    """k₁ + k₂ + ..."""

    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        out = self.kernels[0](X1, X2)
        for k in self.kernels[1:]:
            out = out + k(X1, X2)
        return out

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        return sum((k.diag(X) for k in self.kernels[1:]), self.kernels[0].diag(X))

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        grads: dict[torch.Tensor, torch.Tensor] = {}
        inner = torch.zeros((), dtype=G.dtype, device=G.device)
        for k in self.kernels:
            g, i = k.vjp(X1, X2, G)
            grads.update(g)
            inner = inner + i
        return grads, inner


class Product(_Combination):
    """k₁ · k₂ · ... (elementwise)."""

    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        out = self.kernels[0](X1, X2)
        for k in self.kernels[1:]:
            out = out * k(X1, X2)
        return out

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        out = self.kernels[0].diag(X)
        for k in self.kernels[1:]:
            out = out * k.diag(X)
        return out

    def vjp(self, X1, X2, G):  # noqa: D102 - see Kernel.vjp
        # ⟨G, ∂(Π_j K_j)⟩ = Σ_i ⟨G ∘ Π_{j≠i} K_j, ∂K_i⟩: each factor's own contraction
        with torch.no_grad():
            Ks = [k(X1, X2) for k in self.kernels]
        grads: dict[torch.Tensor, torch.Tensor] = {}
        for i, k in enumerate(self.kernels):
            Gi = G.clone()
            for j, Kj in enumerate(Ks):
                if j != i:
                    Gi.mul_(Kj)
            grads.update(k.vjp(X1, X2, Gi)[0])
        prod = Ks[0]
        for Kj in Ks[1:]:
            prod = prod.mul_(Kj)
        return grads, torch.vdot(G.reshape(-1), prod.reshape(-1))


class _Cross(torch.autograd.Function):
    """K(X1, X2) whose backward is the kernel's :meth:`Kernel.vjp_inputs` contraction."""

    @staticmethod
    def forward(ctx, kernel, X1, X2, *params):  # noqa: D102
        ctx.kernel, ctx.params = kernel, params
        ctx.save_for_backward(X1, X2)
        with torch.no_grad():
            return kernel(X1, X2)

    @staticmethod
    def backward(ctx, G):  # noqa: D102
        X1, X2 = ctx.saved_tensors
        G = G.contiguous()  # the contractions multiply G into K: a caller's K.mT gives G.mT
        with torch.no_grad():
            if ctx.needs_input_grad[1]:
                grads, _, g_x1 = ctx.kernel.vjp_inputs(X1, X2, G)
            else:
                # vjp, not vjp_inputs: the default vjp_inputs re-evaluates K on a detached
                # copy of X1, which misses a discrete kernel's memo of its reduction
                # (kernels/memo.py) — a sparse GP on training points passes fixed inputs
                grads, _ = ctx.kernel.vjp(X1, X2, G)
                g_x1 = None
        return (None, g_x1, None, *(grads.get(p) for p in ctx.params))


def cross_matrix(kernel: Kernel, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
    """K(X1, X2), differentiable in the kernel's parameters and in X1 (not X2) through
    :meth:`Kernel.vjp_inputs` instead of an autograd graph of the n1 × n2 matrix: for a
    stationary kernel one extra n1 × n2 pass, not the graph's saved intermediates."""
    params = [p for p in kernel.parameters() if p.requires_grad]
    return _Cross.apply(kernel, X1, X2, *params)
