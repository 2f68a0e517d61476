"""Seeds: every stochastic routine takes ``seed`` as an int or a ``torch.Generator``."""

from __future__ import annotations

import numpy as np
import torch


def as_generator(seed: int | torch.Generator | None, name: str = "seed") -> torch.Generator:
    """``seed`` itself when it is a (CPU) generator, else a new generator seeded with it;
    ``None`` gives a new generator with torch's fixed default seed (reproducible too)."""
    if isinstance(seed, torch.Generator):
        return seed
    gen = torch.Generator()
    if seed is None:
        return gen
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be an int or a torch.Generator (ints >= 0), got {seed!r}")
    return gen.manual_seed(int(seed))
