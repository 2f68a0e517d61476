"""Positive parameters and readable parameter tables.

A positive hyperparameter ``v`` is stored unconstrained as ``raw_v`` with
``v = floor + softplus(raw_v)``, so every optimiser works in an unconstrained space
and ``v`` can never reach zero. :class:`Positive` is a descriptor: a module declares
``lengthscale = Positive()`` and then reads and writes ``self.lengthscale`` as an
ordinary tensor while ``self.raw_lengthscale`` is the ``nn.Parameter`` trained.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch.nn.functional import softplus

DEFAULT_FLOOR = 1e-6
#: a value set at the floor is stored as floor · (1 + FLOOR_MARGIN) (see Positive.__set__)
FLOOR_MARGIN = 1e-3
LOG_2PI = 1.8378770664093453  # log(2 pi)


def inv_softplus(v: torch.Tensor) -> torch.Tensor:
    """Inverse of softplus, stable for large and small ``v > 0``."""
    return v + torch.log(-torch.expm1(-v))


class Positive:
    """A positive parameter: ``value = floor + softplus(raw)``.

    ``floor`` is the class's; one instance can have its own (:meth:`set_floor`, e.g. a
    noise floor relative to the variance of its y)."""

    def __init__(self, floor: float = DEFAULT_FLOOR, doc: str = "") -> None:
        self.floor = floor
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.raw_name = "raw_" + name
        self.floor_key = "_floor_" + name

    def floor_of(self, obj: nn.Module) -> float:
        """The floor of this parameter on ``obj`` (its own, else the class's)."""
        return obj.__dict__.get(self.floor_key, self.floor)

    def set_floor(self, obj: nn.Module, floor: float) -> None:
        """Give ``obj`` its own floor (> 0); set it before the value. A value already
        set keeps its raw number, so it moves by the change of floor."""
        floor = float(floor)
        if not (floor > 0 and floor < float("inf")):
            raise ValueError(f"the floor of {self.name} must be a positive number, got {floor}")
        obj.__dict__[self.floor_key] = floor

    def __get__(self, obj: nn.Module | None, owner: type | None = None):
        if obj is None:
            return self
        return obj.__dict__.get(self.floor_key, self.floor) + softplus(
            getattr(obj, self.raw_name))

    def raw_grad(self, obj: nn.Module, grad_value: torch.Tensor) -> torch.Tensor:
        """Chain rule: gradient with respect to ``raw`` from one with respect to the value."""
        raw = getattr(obj, self.raw_name).detach()
        return (grad_value * torch.sigmoid(raw)).reshape(raw.shape)

    def __set__(self, obj: nn.Module, value) -> None:
        existing = obj._parameters.get(self.raw_name) if "_parameters" in obj.__dict__ else None
        like = existing
        if like is None and isinstance(value, torch.Tensor) and value.is_floating_point():
            like = value  # a new parameter takes a floating tensor's dtype and device
        value = torch.as_tensor(
            value,
            dtype=like.dtype if like is not None else torch.float64,
            device=like.device if like is not None else None,
        )
        floor = self.floor_of(obj)
        if not torch.isfinite(value).all() or (value < floor).any() or (value <= 0).any():
            raise ValueError(
                f"{type(obj).__name__}.{self.name} must be finite and greater than "
                f"{floor:g}; got {value.detach().cpu().numpy()!r}. "
                "Pass a positive value (e.g. 1.0)."
            )
        # A value at the floor (or read back there after softplus underflowed) is stored
        # a hair above it, where softplus still has a slope: at the floor itself raw
        # would be −∞ (or −690 after clamping) and every gradient through it exactly 0,
        # so no optimiser could ever move the parameter off the floor again.
        margin = FLOOR_MARGIN * floor if floor > 0 else 1e-300
        raw = inv_softplus((value - floor).clamp_min(margin))
        if existing is None:
            obj.register_parameter(self.raw_name, nn.Parameter(raw))
        else:
            if existing.shape != raw.shape:
                raise ValueError(
                    f"{type(obj).__name__}.{self.name} has shape {tuple(existing.shape)}; "
                    f"got a value of shape {tuple(raw.shape)}."
                )
            with torch.no_grad():
                existing.copy_(raw)


def positive_params(module: nn.Module) -> Iterable[tuple[str, nn.Module, Positive]]:
    """Yield (qualified name, owning module, descriptor) for every Positive parameter."""
    for prefix, sub in module.named_modules():
        for klass in type(sub).__mro__:
            for attr, desc in vars(klass).items():
                if isinstance(desc, Positive):
                    yield (f"{prefix}.{attr}" if prefix else attr), sub, desc


def summary(module: nn.Module) -> str:
    """A table of every parameter: name, value, transform, trainable."""
    rows = [("name", "value", "transform", "trainable")]
    seen: set[str] = set()
    for name, sub, desc in positive_params(module):
        raw = getattr(sub, desc.raw_name)
        seen.add(name[: len(name) - len(desc.name)] + desc.raw_name)
        rows.append((name, _fmt(getattr(sub, desc.name)), f"softplus+{desc.floor_of(sub):g}",
                     str(raw.requires_grad)))
    for name, p in module.named_parameters():
        if name not in seen:
            rows.append((name, _fmt(p), "none", str(p.requires_grad)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(t: torch.Tensor, max_items: int = 6) -> str:
    v = t.detach().cpu().reshape(-1).tolist()
    if len(v) == 1:
        return f"{v[0]:.4g}"
    shown = ", ".join(f"{x:.4g}" for x in v[:max_items])
    return f"[{shown}{', ...' if len(v) > max_items else ''}] ({len(v)})"

