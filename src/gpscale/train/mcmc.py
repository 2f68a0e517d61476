"""Metropolis-adjusted Langevin (MALA) sampling, for GP-GRIEF-I (Evans & Nair 2018,
§5-6; Girolami & Calderhead 2011).

Given log π(z) and its gradient on an unconstrained z (positive hyperparameters as
z = log v, the transform's log-Jacobian Σ z included in π by the caller), one step is

    z' = z + (ε²/2) ∇log π(z) + ε ξ,  ξ ~ N(0, I)
    accept with probability min(1, π(z') q(z | z') / (π(z) q(z' | z))),
    q(a | b) = N(a; b + (ε²/2) ∇log π(b), ε² I).

The step size ε is adapted during warm-up only (Robbins-Monro on log ε towards the
optimal MALA acceptance rate 0.574, Roberts & Rosenthal 1998), then fixed, so the
kept chain is a proper Markov chain. Warm-up draws are discarded (burn-in) and the
rest thinned. The effective sample size uses Geyer's initial positive sequence.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..progress import progress_bar
from ..rng import as_generator


@dataclass
class MCMCResult:
    """Samples (S, k) of z after burn-in and thinning, with diagnostics."""

    samples: torch.Tensor
    log_target: torch.Tensor
    acceptance_rate: float  # after warm-up (fixed step)
    step_size: float
    ess: torch.Tensor  # per coordinate, of the kept samples
    n_iter: int
    wall_s: float
    warmup_acceptance: float = float("nan")
    history: list[dict] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C: the samples kept so far (or the current state)


def effective_sample_size(x: torch.Tensor) -> torch.Tensor:
    """ESS of each column of a chain x (S, k): S / (1 + 2 Σ ρ_t), the sum of
    autocorrelations truncated by Geyer's initial positive sequence."""
    x = x - x.mean(0)
    S = x.shape[0]
    if S < 4:
        return torch.full((x.shape[1],), float(S), dtype=x.dtype)
    nfft = 1 << (2 * S - 1).bit_length()
    f = torch.fft.rfft(x, n=nfft, dim=0)
    acov = torch.fft.irfft(f * f.conj(), n=nfft, dim=0)[:S] / S
    var = acov[0].clamp_min(torch.finfo(x.dtype).tiny)
    rho = acov / var
    out = []
    for j in range(x.shape[1]):
        total = 0.0  # Σ Γ_m, Γ_m = ρ_2m + ρ_2m+1, while positive (Geyer 1992)
        for t in range(0, S - 1, 2):
            pair = float(rho[t, j] + rho[t + 1, j])
            if pair <= 0:
                break
            total += pair
        out.append(S / max(2.0 * total - 1.0, 1e-12))
    return torch.tensor(out, dtype=x.dtype)


def mala(
    log_target: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    z0: torch.Tensor,
    n_iter: int = 10_000,
    warmup: int = 1000,
    thin: int = 50,
    step_size: float | None = None,
    target_accept: float = 0.574,
    seed: int | torch.Generator | None = 0,
    progress: bool = False,
) -> MCMCResult:
    """Run MALA from ``z0``. ``log_target(z) -> (log π(z), ∇log π(z))``.

    ``n_iter`` total iterations including ``warmup`` (adaptation and burn-in); every
    ``thin``-th draw after warm-up is kept. ``step_size`` defaults to
    0.165·k^{-1/3} (a tenth of the optimal scale for a unit Gaussian; adapted in
    warm-up anyway).
    Ctrl-C stops the chain and keeps the draws so far.
    """
    if n_iter <= warmup:
        raise ValueError(f"n_iter ({n_iter}) must exceed warmup ({warmup})")
    if thin < 1:
        raise ValueError(f"thin must be ≥ 1, got {thin}")
    gen = as_generator(0 if seed is None else seed)
    z = z0.detach().clone()
    k = z.numel()
    eps = float(step_size) if step_size is not None else 0.165 * k ** (-1.0 / 3.0)
    lp, g = log_target(z)
    if not torch.isfinite(lp):
        raise ValueError("log_target is not finite at the starting point z0")
    t0 = time.perf_counter()
    kept, kept_lp = [], []
    acc_warm = acc_main = 0
    history: list[dict] = []
    it = -1
    bar = progress_bar(progress, total=n_iter, desc="MALA", leave=False)
    interrupted = False
    try:
        for it in range(n_iter):
            xi = torch.randn(z.shape, generator=gen, dtype=z.dtype).to(z.device)
            mean_fwd = z + 0.5 * eps * eps * g
            prop = mean_fwd + eps * xi
            lp_new, g_new = log_target(prop)
            log_alpha = -math.inf
            if torch.isfinite(lp_new):
                mean_back = prop + 0.5 * eps * eps * g_new
                log_q_back = -((z - mean_back) ** 2).sum() / (2 * eps * eps)
                log_q_fwd = -(xi ** 2).sum() / 2
                log_alpha = float(lp_new - lp + log_q_back - log_q_fwd)
            u = torch.rand((), generator=gen, dtype=torch.float64)
            accept = math.log(float(u) + 1e-300) < log_alpha
            if accept:
                z, lp, g = prop, lp_new, g_new
            if it < warmup:
                acc_warm += accept
                rate = min(1.0, math.exp(min(log_alpha, 0.0)))
                eps *= math.exp((rate - target_accept) / (it + 10) ** 0.6)
            else:
                acc_main += accept
                if (it - warmup) % thin == 0:
                    kept.append(z.clone())
                    kept_lp.append(float(lp))
            if it % max(1, n_iter // 100) == 0:
                history.append({"iter": it, "log_target": float(lp), "step_size": eps,
                                "time_s": time.perf_counter() - t0})
            bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    samples = torch.stack(kept) if kept else z[None].clone()
    main_iters = max(1, min(n_iter, it + 1) - warmup)
    return MCMCResult(
        samples=samples,
        log_target=torch.tensor(kept_lp, dtype=z.dtype),
        acceptance_rate=acc_main / main_iters,
        step_size=eps,
        ess=effective_sample_size(samples.reshape(samples.shape[0], -1).cpu()),
        n_iter=it + 1,
        wall_s=time.perf_counter() - t0,
        warmup_acceptance=acc_warm / max(1, min(warmup, it + 1)),
        history=history,
        interrupted=interrupted,
    )


def lognormal_from_mode_variance(mode: float, variance: float) -> tuple[float, float]:
    """(μ, τ²) of the log-normal with the given mode e^{μ−τ²} and variance
    (e^{τ²} − 1) e^{2μ+τ²} (the paper's prior specification), by bisection on τ²."""
    if not mode > 0 or not variance > 0:
        raise ValueError(f"mode and variance must be positive, got {mode}, {variance}")
    target = variance / (mode * mode)  # (e^{t} − 1) e^{3t} with μ = log mode + t

    def h(t):
        return math.expm1(t) * math.exp(3 * t) - target

    lo, hi = 0.0, 1.0
    while h(hi) < 0:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if h(mid) < 0 else (lo, mid)
    tau2 = 0.5 * (lo + hi)
    return math.log(mode) + tau2, tau2
