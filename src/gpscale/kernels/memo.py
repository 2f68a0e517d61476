"""A one-slot cache for parameter-free work on input tensors.

Kernels on discrete inputs spend most of their time in reductions that do not depend
on any hyperparameter (Σ min over count features, Hamming distances). Callers such as
a sparse GP's hyperparameter phase evaluate the same kernel block many times with the
same inputs and different hyperparameters; :class:`InputMemo` lets a kernel compute such
a reduction once.

A cached value is reused only while *the same tensor objects* are passed again and
none of them was modified in place since (PyTorch's version counter). Writes that
bypass the counter — through ``tensor.data`` or a NumPy array sharing the memory —
are not seen: call :meth:`InputMemo.clear` (``kernel.clear_cache()``) after them.
The memo holds only weak references to its inputs (a cached value that refers to an
input, such as a count kernel's statistics of its training set, keeps that input alive
until the slot is replaced or cleared), and it is not copied or pickled: a copy starts
empty.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch


class InputMemo:
    """Remember the last ``compute()`` result for one tuple of input tensors."""

    __slots__ = ("_refs", "_versions", "_value", "hits", "misses", "max_numel")

    def __init__(self, max_numel: int | None = None) -> None:
        self.max_numel = max_numel  # tensor values larger than this are not kept
        self.hits = self.misses = 0
        self.clear()

    def clear(self) -> None:
        """Forget the cached value."""
        self._refs: tuple[weakref.ref, ...] = ()
        self._versions: tuple[int, ...] = ()
        self._value: Any = None

    def _matches(self, inputs: Sequence[torch.Tensor]) -> bool:
        return (len(self._refs) == len(inputs)
                and all(r() is t and v == t._version
                        for r, v, t in zip(self._refs, self._versions, inputs)))

    def get(self, inputs: Sequence[torch.Tensor], compute: Callable[[], Any]) -> Any:
        """The cached value when ``inputs`` are the cached tensors, unmodified; else
        ``compute()``, which is then cached. Inputs that require grad are never
        cached (their reductions would carry a graph)."""
        if any(t.requires_grad for t in inputs):
            return compute()
        if self._matches(inputs):
            self.hits += 1
            return self._value
        self.misses += 1
        value = compute()
        if (self.max_numel is not None and isinstance(value, torch.Tensor)
                and value.numel() > self.max_numel):
            self.clear()
            return value
        self._refs = tuple(weakref.ref(t) for t in inputs)
        self._versions = tuple(t._version for t in inputs)
        self._value = value
        return value

    # a copy (deepcopy, pickle, a worker process) starts with an empty memo
    def __reduce__(self):
        return (InputMemo, (self.max_numel,))
