"""The contract every gpscale model honours, so that predictors, the registry of methods,
saving and loading treat all models alike.

A model is an ``nn.Module`` whose parameters are its hyperparameters and whose buffers hold
what prediction needs (training rows, statistics, inducing points, MCMC draws). It offers:

- ``predict(X_new, *, include_noise=False) -> MeanAndVariance``: posterior mean and
  variance of f at the rows of ``X_new`` (of a new observation y with ``include_noise``);
- ``objective(data=None) -> Tensor``: the training objective at the current parameters,
  in nats, lower is better. Models that keep their training rows or statistics need no
  argument; those that do not (SVGP, the GRIEF-I posterior) take ``data=(X, y)``;
- ``to_config() -> dict`` of plain Python values, ``saved_state()`` (the tensors to
  keep; by default the ``state_dict``) and ``from_config(config, state, kernel)``,
  which builds a model of the saved shapes into which ``state`` is then loaded; a
  model's ``.kernel``, if it has one, is saved by the caller as ``Kernel.config()``;
- ``summary() -> str``, a readable table of its hyperparameters.

Subclasses register themselves by class name in :data:`MODEL_CLASSES`, which is how a
saved file names the class to rebuild.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn

from ..params import summary

__all__ = ["GPModel", "MeanAndVariance", "MODEL_CLASSES", "model_class", "dtype_name",
           "no_data"]


class MeanAndVariance(NamedTuple):
    """Predictive mean and variance, each of shape (m,)."""

    mean: torch.Tensor
    var: torch.Tensor


#: model classes by name (filled when a subclass of :class:`GPModel` is defined)
MODEL_CLASSES: dict[str, type[GPModel]] = {}


class GPModel(nn.Module):
    """Base class of gpscale's models (see the module docstring for the contract)."""

    #: what ``summary()`` prints first
    title: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        MODEL_CLASSES[cls.__name__] = cls

    def predict(self, X_new: Any, *, include_noise: bool = False) -> MeanAndVariance:
        raise NotImplementedError

    def objective(self, data: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        raise NotImplementedError

    def to_config(self) -> dict[str, Any]:
        raise NotImplementedError

    def saved_state(self) -> dict[str, torch.Tensor]:
        """The tensors a saved file keeps (default: the ``state_dict``)."""
        return self.state_dict()

    @classmethod
    def from_config(cls, config: dict[str, Any], state: dict[str, torch.Tensor],
                    kernel: Any = None) -> GPModel:
        raise NotImplementedError

    def summary(self) -> str:
        return (f"{self.title}\n" if self.title else "") + summary(self)


def model_class(name: str) -> type[GPModel]:
    """The registered model class called ``name``; ValueError naming the known ones."""
    if name not in MODEL_CLASSES:
        raise ValueError(f"unknown model class {name!r} (known: {sorted(MODEL_CLASSES)})")
    return MODEL_CLASSES[name]


def no_data(model: GPModel, data: Any) -> None:
    """For models that hold their training data: refuse a ``data`` argument."""
    if data is not None:
        raise ValueError(f"{type(model).__name__}.objective() uses the training data the "
                         "model holds; call it without data")


def dtype_name(t: torch.Tensor) -> str:
    """``'float64'`` for a float64 tensor: the form a config stores a dtype in."""
    return str(t.dtype).removeprefix("torch.")
