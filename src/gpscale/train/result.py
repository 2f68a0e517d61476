"""What every trainer returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..params import positive_params


@dataclass
class FitResult:
    """Outcome of a training run.

    ``theta``: final hyperparameters by name (constrained values, as lists);
    ``history``: one dict per iteration (``iter``, ``objective``, ``time_s`` and any
    method-specific diagnostics); ``converged`` and ``reason`` say why it stopped.
    """

    method: str
    theta: dict[str, list[float]]
    objective: float
    history: list[dict[str, Any]] = field(default_factory=list)
    converged: bool = False
    reason: str = ""
    wall_s: float = 0.0
    n_evals: int = 0
    #: the exact GP's skill check (:func:`gpscale.models.skill.fit_skill`); empty: none
    skill: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        iters = max((h.get("iter", 0) for h in self.history), default=0)
        return (f"{self.method}: objective {self.objective:.6g} after "
                f"{iters} iterations, {self.n_evals} evaluations, "
                f"{self.wall_s:.2f} s ({self.reason})"
                + (f"; {self.skill['problem']}" if self.skill.get("problem") else ""))


def theta_of(model: nn.Module) -> dict[str, list[float]]:
    """Constrained hyperparameter values of ``model`` by qualified name."""
    out: dict[str, list[float]] = {}
    raw_names = set()
    for name, sub, desc in positive_params(model):
        out[name] = getattr(sub, desc.name).detach().reshape(-1).cpu().tolist()
        raw_names.add(name[: len(name) - len(desc.name)] + desc.raw_name)
    for name, p in model.named_parameters():
        if name not in raw_names and p.requires_grad:
            out[name] = p.detach().reshape(-1).cpu().tolist()
    return out


def snapshot(params: list[torch.Tensor]) -> list[torch.Tensor]:
    return [p.detach().clone() for p in params]


def restore(params: list[torch.Tensor], values: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for p, v in zip(params, values):
            p.copy_(v)
