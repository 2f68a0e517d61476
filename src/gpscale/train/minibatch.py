"""The minibatch loop shared by the stochastic trainers (MINIMAX, SCGD, BSGD, SVGP).

A method supplies ``step(batch, t)``: one update on the rows ``batch`` (a LongTensor of
row indices, or whatever the ``batches`` hook yields, e.g. ``(X, y)`` tensors of rows
read from a source by :class:`~gpscale.train.batches.ShuffledStream`) at step ``t`` =
1, 2, …, returning the batch objective (a float) or ``None``. The loop owns everything
else: seeded epochs (random permutations of the rows, or the hook's), the learning-rate
schedule of the method's optimisers, evaluation checkpoints that keep the iterate with
the best value of ``evaluate()`` (the papers report the best exact NLML seen),
divergence and Ctrl-C handling, a time budget and the :class:`FitResult`.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from ..progress import progress_bar
from ..rng import as_generator
from .result import FitResult, restore, snapshot

#: default learning rates per optimiser name
DEFAULT_LR = {"adadelta": 1.0, "adam": 1e-2, "sgd": 1e-3}


def make_optimizer(name: str, params: list[torch.Tensor], lr: float | None = None
                   ) -> torch.optim.Optimizer:
    """``"adadelta"`` (the unbiased-stochastic paper's choice), ``"adam"`` or ``"sgd"``."""
    key = str(name).lower()
    if key not in DEFAULT_LR:
        raise ValueError(f"optimizer={name!r} is not one of {sorted(DEFAULT_LR)}")
    lr = DEFAULT_LR[key] if lr is None else float(lr)
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    cls = {"adadelta": torch.optim.Adadelta, "adam": torch.optim.Adam,
           "sgd": torch.optim.SGD}[key]
    return cls(params, lr=lr)


#: learning-rate schedules: the factor applied to each optimiser's base rate at step t of
#: T. "constant": the papers' experiments (AdaDelta's fixed rate); "cosine": annealed
#: from 1 towards 0 over the run, which removes the noise floor a constant rate leaves;
#: "power": t^(-3/4), the SCGD rates of Wang et al. (Theorem 8).
LR_SCHEDULES: dict[str, Callable[[int, int], float]] = {
    "constant": lambda t, total: 1.0,
    "cosine": lambda t, total: 0.5 * (1.0 + math.cos(math.pi * (t - 1) / total)),
    "power": lambda t, total: t ** -0.75,
}


def check_lr_schedule(name: str) -> str:
    key = str(name).lower()
    if key not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule={name!r} is not one of {sorted(LR_SCHEDULES)}")
    return key


def make_generator(seed: int | torch.Generator | None) -> torch.Generator:
    """A CPU generator: ``seed`` itself when it is one, else seeded by ``seed`` (0 if None)."""
    return as_generator(0 if seed is None else seed)


def epoch_batches(n: int, batch_size: int, generator: torch.Generator,
                  device: torch.device | str | None = None) -> Iterator[torch.Tensor]:
    """One pass over a random permutation of range(n) in batches of ``batch_size``
    (the last batch may be smaller)."""
    perm = torch.randperm(n, generator=generator).to(device)
    yield from torch.split(perm, batch_size)


#: fewer planned optimiser steps than this draw a :class:`FewStepsWarning`: SCGD at its
#: defaults needs about this many to calibrated 95 % intervals
#: (benchmarks/results/design-measurements.md)
MIN_STEPS = 1000


class FewStepsWarning(UserWarning):
    """A minibatch method's settings plan too few optimiser steps for its hyperparameters
    to leave their start: the data set is small for the method's defaults."""


def warn_few_steps(method: str, n: int, batch_size: int, epochs: float,
                   stacklevel: int = 3) -> None:
    """:class:`FewStepsWarning` when ``epochs`` passes over ``n`` rows in batches of
    ``batch_size`` make fewer than :data:`MIN_STEPS` steps; the message says what to do."""
    if not (isinstance(epochs, (int, float)) and epochs > 0):
        return  # run_minibatch says what is wrong with it
    steps = max(1, math.ceil(epochs * math.ceil(n / batch_size)))
    if steps >= MIN_STEPS:
        return
    need = math.ceil(MIN_STEPS / math.ceil(n / batch_size))
    warnings.warn(
        f"{method}: n={n} rows in batches of {batch_size} for {epochs:g} epochs make only "
        f"{steps} optimiser steps; minibatch methods are meant for large data (the paper runs "
        f"100 epochs on 14 000+ rows), and with so few steps the hyperparameters stay near "
        f"their start (predictive intervals typically far too wide). For n this small use "
        f"method='exact' (or 'rff'), or pass epochs={need} (≥ {MIN_STEPS} steps; slower)",
        FewStepsWarning, stacklevel=stacklevel)


def check_batch_size(batch_size: int, n: int) -> int:
    if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if batch_size > n:
        raise ValueError(f"batch_size={batch_size} exceeds the number of training rows n={n}; "
                         "use a smaller batch")
    return int(batch_size)


def run_minibatch(
    step: Callable[[torch.Tensor, int], float | None],
    params: list[torch.Tensor],
    n: int,
    batch_size: int,
    epochs: float = 10,
    evaluate: Callable[[], float] | None = None,
    eval_every: int | None = None,
    seed: int | torch.Generator | None = 0,
    max_time: float | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    method: str = "minibatch",
    theta: Callable[[], dict[str, list[float]]] | None = None,
    optimizers: Sequence[torch.optim.Optimizer] = (),
    lr_schedule: str = "constant",
    batches: Callable[[torch.Generator], Iterable[Any]] | None = None,
) -> FitResult:
    """Run ``step`` over ``epochs`` passes of random minibatches.

    ``evaluate`` (e.g. the exact NLML per point from one streaming pass) is called
    every ``eval_every`` steps (default: once per epoch) and at the end; the
    parameters ``params`` with the lowest value are restored when the loop ends.
    A non-finite batch objective or parameter stops the run with reason
    ``"diverged"`` (best iterate kept); Ctrl-C stops it with ``"interrupted"``.
    Before step t the learning rate of every parameter group of ``optimizers`` is set
    to its initial value times ``LR_SCHEDULES[lr_schedule](t, T)``, T the planned
    number of steps (a ``max_time`` stop ends the schedule early).
    ``batches(generator)``: one epoch's minibatches, drawn with the loop's generator
    (default: :func:`epoch_batches` over ``n`` rows); it must yield ceil(n / batch_size)
    of them, as :meth:`~gpscale.train.batches.ShuffledStream.epoch` does.
    """
    batch_size = check_batch_size(batch_size, n)
    schedule = LR_SCHEDULES[check_lr_schedule(lr_schedule)]
    base_lrs = [[group["lr"] for group in opt.param_groups] for opt in optimizers]
    steps_per_epoch, total, eval_every = _plan_steps(n, batch_size, epochs, eval_every)
    gen = make_generator(seed)
    if batches is None:
        def batches(g: torch.Generator) -> Iterator[torch.Tensor]:
            return epoch_batches(n, batch_size, g, device)
    t0 = time.perf_counter()
    bar = progress_bar(progress, total=total, desc=method, leave=False)
    checks = _Checkpoints(params, evaluate, schedule, total, steps_per_epoch, bar, t0)
    reason, t = "max_epochs", 0
    try:
        while t < total:
            epoch = iter(batches(gen))
            for batch in epoch:
                t += 1
                factor = schedule(t, total)
                for opt, bases in zip(optimizers, base_lrs):
                    for group, base in zip(opt.param_groups, bases):
                        group["lr"] = base * factor
                value = step(batch, t)
                if value is not None:
                    checks.batch_values.append(float(value))
                if (value is not None and not math.isfinite(float(value))) or not all(
                        bool(torch.isfinite(p).all()) for p in params):
                    reason = "diverged"
                    break
                bar.update(1)
                if t % eval_every == 0 or t == total:
                    checks(t)
                if t >= total or (max_time is not None and time.perf_counter() - t0 > max_time):
                    break
            getattr(epoch, "close", lambda: None)()  # a stream lets go of its files now
            if reason == "diverged":
                break
            if max_time is not None and time.perf_counter() - t0 > max_time and t < total:
                reason = "max_time"
                break
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        bar.close()
    objective = checks.finish(t, reason, method)
    return FitResult(method=method, theta=theta() if theta is not None else {},
                     objective=objective, history=checks.history, converged=False, reason=reason,
                     wall_s=time.perf_counter() - t0, n_evals=t)


def _plan_steps(n: int, batch_size: int, epochs: float, eval_every: int | None
                ) -> tuple[int, int, int]:
    """(steps per epoch, planned steps, steps between checkpoints) of
    :func:`run_minibatch`; ValueError for a bad ``epochs`` or ``eval_every``."""
    if not epochs > 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    steps_per_epoch = math.ceil(n / batch_size)
    total = max(1, math.ceil(epochs * steps_per_epoch))
    eval_every = steps_per_epoch if eval_every is None else int(eval_every)
    if eval_every < 1:
        raise ValueError(f"eval_every must be a positive integer, got {eval_every}")
    return steps_per_epoch, total, eval_every


class _Checkpoints:
    """The checkpoints of :func:`run_minibatch`: a history row each (with the mean batch
    objective since the last and, with ``evaluate``, its value), the best iterate seen,
    and at the end the objective the run reports."""

    def __init__(self, params: list[torch.Tensor], evaluate: Callable[[], float] | None,
                 schedule: Callable[[int, int], float], total: int, steps_per_epoch: int,
                 bar: Any, t0: float) -> None:
        self.params, self.evaluate, self.schedule = params, evaluate, schedule
        self.total, self.steps_per_epoch, self.bar, self.t0 = total, steps_per_epoch, bar, t0
        self.best = {"value": math.inf, "params": snapshot(params), "step": 0}
        self.history: list[dict] = []
        self.batch_values: list[float] = []

    def __call__(self, t: int) -> None:
        row = {"iter": t, "epoch": t / self.steps_per_epoch,
               "time_s": time.perf_counter() - self.t0,
               "lr_factor": self.schedule(max(t, 1), self.total)}
        if self.batch_values:
            row["batch_objective"] = sum(self.batch_values) / len(self.batch_values)
            self.batch_values.clear()
        if self.evaluate is not None:
            value = float(self.evaluate())
            row["objective"] = value
            if math.isfinite(value) and value < self.best["value"]:
                self.best.update(value=value, params=snapshot(self.params), step=t)
            self.bar.set_postfix(objective=f"{value:.5g}")
        self.history.append(row)

    def finish(self, t: int, reason: str, method: str) -> float:
        """After the loop ended at step ``t`` for ``reason``: a last checkpoint where
        the run evaluates and none was at t, the best iterate's parameters restored
        (with ``evaluate``, or where the run diverged), and the objective to report."""
        if self.evaluate is not None:
            if reason != "diverged" and (not self.history or self.history[-1]["iter"] != t):
                self(t)
            if not math.isfinite(self.best["value"]):
                raise RuntimeError(f"{method}: no evaluation gave a finite objective; "
                                   "lower the learning rate or check the data")
            restore(self.params, self.best["params"])
            return self.best["value"]
        if reason == "diverged":
            restore(self.params, self.best["params"])
        return (self.history[-1].get("batch_objective", math.nan) if self.history
                else math.nan)
