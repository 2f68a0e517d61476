"""Unbiased minibatch ML-II for finite-feature kernels (Shoham & Avron): MINIMAX (§3.1),
SCGD (§3.2), and the BSGD baseline of Chen et al. 2020 (§4.2).

Each trainer takes raw tensors X (n, D), y (n,) and a learnable :class:`FeatureMap`
φ_α (random Fourier features, :class:`NeuralFeatures`, …), runs the shared minibatch
loop (:func:`run_minibatch`: seeded epochs, AdaDelta by default as in the paper's §5,
exact NLML per point at every checkpoint from one streaming statistics pass, best
iterate kept) and returns ``(FeatureGP(weights="fixed"), FitResult)``: K = ΦΦᵀ + σ²I
with the learned features and σ². Per step the memory is O(d² + b·d) plus the
feature map's activations on the batch, independent of n.

``X`` may also be :class:`~gpscale.io.Rows` (y None): rows that stay in their files. The
minibatches then come from a :class:`~gpscale.train.batches.ShuffledStream` (partitions
in a random order through a shuffle buffer of ``buffer_rows`` rows; in memory it is
always the full permutation), an independent batch S̄ (MINIMAX; SCGD with
``tracker="independent"``) from a second stream with its own seed (a second read of the
data per epoch), and every full-data step (w₀ and F₀ at the start, the exact NLML at
each checkpoint, the final statistics) is one statistics pass over the partitions, on
the rows' dask cluster when they have one. The returned model is then ``freeze()``-d:
it keeps ΦᵀΦ, Φᵀy, yᵀy, n at the final θ and no rows.
"""

from __future__ import annotations

import math

import torch

from ..features import FeatureMap
from ..io.rows import as_rows
from ..linalg import robust_cholesky
from ..models import FeatureGP
from ..params import LOG_2PI, positive_params
from ..validation import check_positive
from .batches import ShuffledStream
from .minibatch import (
    check_batch_size,
    check_lr_schedule,
    make_generator,
    make_optimizer,
    run_minibatch,
    warn_few_steps,
)
from .result import FitResult
from .weight_space import (
    TrackedF,
    batch_F,
    bsgd_batch,
    grad_B,
    optimal_w,
    project_A,
    project_A_factored,
    project_B,
    psi_batch,
    scgd_batch,
)

__all__ = ["fit_minimax", "fit_scgd", "fit_bsgd"]


def _positive(name: str, value, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    return check_positive(name, value)


def _setup(X, y, features, noise, dtype, device) -> tuple[FeatureGP, list[torch.Tensor]]:
    if not isinstance(features, FeatureMap):
        raise ValueError(f"features must be a gpscale FeatureMap (e.g. RandomFourierFeatures, "
                         f"NeuralFeatures), got {type(features).__name__}")
    noise = _positive("noise", noise)
    model = FeatureGP(features, rows=as_rows(X, y), noise=noise, weights="fixed",
                      dtype=dtype, device=device)
    alpha = [p for p in model.features.parameters() if p.requires_grad]
    return model, alpha


def _evaluator(model: FeatureGP, before=None):
    """Exact NLML per point from one streaming statistics pass (the paper's report)."""
    def evaluate() -> float:
        if before is not None:
            before()
        with torch.no_grad():
            return float(model.nlml()) / model.n
    return evaluate


def _theta(model: FeatureGP):
    def theta() -> dict[str, list[float]]:
        return {name: getattr(sub, desc.name).detach().reshape(-1).cpu().tolist()
                for name, sub, desc in positive_params(model)
                if getattr(sub, desc.raw_name).numel() <= 1024}
    return theta


def _per_point(value: torch.Tensor, count: int) -> float:
    """A batch estimate of l (≈ 2·NLML − n log 2π) as an NLML per point."""
    return float(value) / (2 * count) + 0.5 * LOG_2PI


def _init_w(model: FeatureGP) -> torch.Tensor:
    with torch.no_grad():
        gram, proj, _ = model.statistics()
        return optimal_w(gram, proj, model.noise.detach()), gram


def _random_batch(n: int, s: int, gen: torch.Generator, device) -> torch.Tensor:
    return torch.randperm(n, generator=gen)[:s].to(device)


def _reader(model: FeatureGP, batch_size: int, seed: int, buffer_rows: int | None):
    """How a trainer reads rows: (``batches`` hook of :func:`run_minibatch` or None for
    the in-memory permutation, ``rows(batch) -> (X_S, y_S)``, ``draw(s) -> X_S̄``: the
    inputs of an independent batch S̄ of about s rows)."""
    n = model.n
    check_batch_size(batch_size, n)
    gen_bar = make_generator(int(seed) + 7919)
    if model.holds_rows:
        if buffer_rows is not None:
            raise ValueError("buffer_rows applies to rows streamed from a source; "
                             "minibatches of X, y in memory come from a full permutation")
        Xt, yt = model.X, model.y
        return (None, lambda batch: (Xt[batch], yt[batch]),
                lambda s: Xt[_random_batch(n, s, gen_bar, Xt.device)])
    ref = model.noise
    stream = ShuffledStream.from_rows(model.rows, batch_size, buffer_rows=buffer_rows,
                                      dtype=ref.dtype, device=ref.device)
    bar = stream.forever(gen_bar)
    return stream.epoch, lambda batch: batch, lambda s: next(bar)[0]


def _done(model: FeatureGP) -> None:
    """A model trained from a source keeps its statistics at the final θ, not the rows
    (one that holds its rows in memory keeps them)."""
    model.freeze()


def fit_minimax(
    X, y, features: FeatureMap, noise: float = 0.1, batch_size: int = 32, epochs: float = 10,
    optimizer: str = "adadelta", lr: float | None = None, lr_max: float | None = None,
    mu: float | str = 1.0, dual_init: str = "balanced", mu_growth: float = 1.0,
    mu_max: float = 1e6, noise_min: float = 1e-4,
    zeta_max: float | None = None, lr_schedule: str = "constant", seed: int = 0,
    eval_every: int | None = None, max_time: float | None = None,
    track_constraint: bool = False, progress: bool = False, buffer_rows: int | None = None,
    projection: str = "auto",
    dtype: torch.dtype = torch.float64, device: torch.device | str | None = None,
) -> tuple[FeatureGP, FitResult]:
    """MINIMAX (§3.1): min over ζ = (θ, A) of max over ‖B‖_F ≤ 1 of
    Ψ(ζ, B) = Σ_i ψ(ζ, B; x_i, μ) (Eq. 3.2–3.3), by alternating stochastic steps

    1. ζ ← proj_Ω₁(ζ − a ∇_ζ (n/s) Σ_{i∈S} ψ(ζ, B; x_i, μ))   (batch S, minimiser's optimiser)
    2. B ← proj_Ω₂(B + b ∇_B (n/s) Σ_{i∈S̄} ψ(ζ⁺, B; x_i, μ))  (independent batch S̄)

    Ω₁: A symmetric with σ²I ⪯ A (eigenvalue clipping), σ² ≥ ``noise_min`` (σ_min²) and,
    when ``zeta_max`` is given, the box |w|, σ², |α| ≤ ζ_max and A ⪯ ζ_max·n·I.
    μ = ``mu`` (the paper's §5 keeps μ = 1), multiplied by ``mu_growth`` after every
    epoch up to ``mu_max`` (the outer penalty loop of §3.1); ``mu="auto"``: μ = 2‖F₀‖‖F₀⁻¹‖,
    twice the least μ for which A = F can be stationary in A (for smaller μ the
    penalised problem's A drifts from F: shrinking A by a factor (1 − t) gains d·t in
    log|A| and costs only μ·t). A starts at F(θ₀) = F₀ and w at argmin_w l(θ₀), both from
    one streaming statistics pass; B at the balancing dual B₀ = proj(−‖A₀‖A₀⁻¹/μ)
    (``dual_init="balanced"``: then ∇_A Ψ = 0 and ∇_θ Ψ = ∇_θ l at the start) or at 0
    (``"zero"``). A is stepped as A/n (the same problem; it keeps the optimiser's step
    sizes on the scale of F/n).
    ``lr`` / ``lr_max``: step sizes a and b of the two optimisers (``optimizer``), both
    scaled by ``lr_schedule`` (``"constant"``, the paper's; ``"cosine"``; ``"power"``:
    see :data:`~gpscale.train.minibatch.LR_SCHEDULES`).
    ``track_constraint``: add ``constraint_gap`` = ‖A − F(θ)‖/‖A‖ and ``mu`` to each
    checkpoint of the history (one more statistics pass per checkpoint).
    ``buffer_rows``: the shuffle buffer when ``X`` is :class:`~gpscale.io.Rows` (see the
    module docstring); S̄ then comes from a second, independently seeded stream.
    ``projection``: how step 1 projects A and hands log|A|, A⁻¹ to the next step;
    ``"auto"`` (:func:`~gpscale.train.weight_space.project_A_factored`: a Cholesky test
    skips the eigendecomposition when A is already inside Ω₁, tried less often while
    steps keep clipping, and the clip and A⁻¹ are formed over the smaller eigenvector
    sets) or ``"eigh"`` (:func:`~gpscale.train.
    weight_space.project_A`: U clip(Λ) Uᵀ and U Λ⁻¹ Uᵀ in full); the same iterates to
    rounding.
    """
    if projection not in ("auto", "eigh"):
        raise ValueError(f"projection must be 'auto' or 'eigh', got {projection!r}")
    if dual_init not in ("balanced", "zero"):
        raise ValueError(f"dual_init must be 'balanced' or 'zero', got {dual_init!r}")
    lr_schedule = check_lr_schedule(lr_schedule)
    mu = mu if mu == "auto" else _positive("mu", mu)
    mu_growth = _positive("mu_growth", mu_growth)
    noise_min = _positive("noise_min", noise_min)
    zeta_max = _positive("zeta_max", zeta_max, allow_none=True)
    noise = max(_positive("noise", noise), noise_min)
    model, alpha = _setup(X, y, features, noise, dtype, device)
    n = model.n
    batches, rows, draw = _reader(model, batch_size, seed, buffer_rows)
    game = _Minimax(model, alpha, rows, draw, mu=mu, dual_init=dual_init,
                    projection=projection, noise_min=noise_min, zeta_max=zeta_max)
    game.optimizers(optimizer, lr, lr_max)
    game.penalty(mu_growth, mu_max, math.ceil(n / check_batch_size(batch_size, n)))
    warn_few_steps("minimax", n, batch_size, epochs, stacklevel=5)
    result = run_minibatch(game.step, game.params, n, batch_size, epochs,
                           evaluate=game.evaluator(track_constraint), eval_every=eval_every,
                           seed=seed, max_time=max_time, device=model.noise.device,
                           progress=progress, method="minimax", theta=_theta(model),
                           optimizers=(game.opt_min, game.opt_max), lr_schedule=lr_schedule,
                           batches=batches)
    game.sync()
    _done(model)
    game.annotate(result.history)
    return model, result


class _Minimax:
    """One MINIMAX run (:func:`fit_minimax`): the minimiser's ζ = (w, σ², A/n, α) and the
    maximiser's B, their optimisers, the projection onto Ω₁ with what it knows of A, the
    penalty μ_t, and the constraint gaps tracked at the checkpoints."""

    def __init__(self, model: FeatureGP, alpha: list[torch.Tensor], rows, draw, *,
                 mu: float | str, dual_init: str, projection: str, noise_min: float,
                 zeta_max: float | None) -> None:
        """The start: w at argmin_w l(θ₀), A at F₀, B at the dual start (one statistics
        pass); ``rows``, ``draw``: how the run reads a batch and draws S̄
        (:func:`_reader`)."""
        self.model, self.alpha, self.rows, self.draw = model, alpha, rows, draw
        self.projection, self.n = projection, model.n
        self.noise_min, self.zeta_max = noise_min, zeta_max  # Ω₁'s bounds
        w0, gram = _init_w(model)
        self.w = w0.clone().requires_grad_(True)
        self.sigma2 = model.noise.detach().clone().requires_grad_(True)
        d = gram.shape[0]
        eye = torch.eye(d, dtype=gram.dtype, device=gram.device)
        self.A_bar = ((gram + self.sigma2.detach() * eye) / self.n).requires_grad_(True)
        with torch.no_grad():  # ‖A‖A⁻¹ at A₀ (Cholesky solve), for μ="auto" and the dual start
            scaled_inv = torch.linalg.matrix_norm(self.A_bar) * torch.cholesky_solve(
                eye, robust_cholesky(self.A_bar.detach()))
        if mu == "auto":
            mu = 2.0 * float(torch.linalg.matrix_norm(scaled_inv))
        self.mu = mu
        B0 = (project_B(-scaled_inv / mu) if dual_init == "balanced"
              else torch.zeros_like(gram))
        self.B = B0.clone().requires_grad_(True)
        # what the last projection knows of A_bar: its eigendecomposition (λ, U) ("eigh")
        # or (log|A_bar|, A_bar⁻¹) ("auto"); the next step takes log|A| and its gradient
        # from it instead of a Cholesky factor (None before the first)
        self.spectrum = None
        self.log_n = d * math.log(self.n)
        # the inside test (a Cholesky) is wasted while A keeps leaving Ω₁ (AdaDelta's
        # steps do at every step): after a clip it waits 1, 2, 4, … up to 64 projections
        self.backoff = {"wait": 0, "next": 1}
        self.gaps: list[float] = []

    @property
    def params(self) -> list[torch.Tensor]:
        """Every iterate the loop keeps the best of."""
        return [self.w, self.sigma2, self.A_bar, self.B, *self.alpha]

    def optimizers(self, name: str, lr: float | None, lr_max: float | None) -> None:
        """The minimiser's optimiser over ζ (rate lr) and the maximiser's over B (lr_max,
        default lr)."""
        self.opt_min = make_optimizer(name, [self.w, self.sigma2, self.A_bar, *self.alpha],
                                      lr)
        self.opt_max = make_optimizer(name, [self.B], lr_max if lr_max is not None else lr)

    def penalty(self, growth: float, most: float, steps_per_epoch: int) -> None:
        """μ_t: μ times ``growth`` after every epoch, at most ``most``."""
        self.mu_growth, self.mu_max, self.steps_per_epoch = growth, most, steps_per_epoch

    def mu_at(self, t: int) -> float:
        return min(self.mu * self.mu_growth ** ((t - 1) // self.steps_per_epoch), self.mu_max)

    def project(self) -> None:
        """ζ onto Ω₁ (step 1's proj_Ω₁), keeping what the projection learnt of A."""
        n, A_bar, zeta_max = self.n, self.A_bar, self.zeta_max
        with torch.no_grad():
            self.sigma2.clamp_(min=self.noise_min, max=zeta_max)
            if self.projection == "eigh":
                projected, self.spectrum = project_A(A_bar, self.sigma2 / n, zeta_max,
                                                     return_eig=True)
            else:
                backoff = self.backoff
                test = backoff["wait"] == 0
                backoff["wait"] = max(backoff["wait"] - 1, 0)
                projected, self.spectrum, clipped = project_A_factored(
                    A_bar, self.sigma2 / n, zeta_max, test_inside=test)
                if test and clipped:
                    backoff["wait"] = backoff["next"]
                    backoff["next"] = min(2 * backoff["next"], 64)
                elif test:
                    backoff["next"] = 1
            A_bar.copy_(projected)
            if zeta_max is not None:
                for p in (self.w, *self.alpha):
                    p.clamp_(-zeta_max, zeta_max)

    def step(self, batch, t: int) -> float:
        """Steps 1 and 2 on the batch; the batch estimate of the NLML per point."""
        n, spectrum, B, mu_t = self.n, self.spectrum, self.B, self.mu_at(t)
        X_S, y_S = self.rows(batch)
        s = X_S.shape[0]
        self.opt_min.zero_grad(set_to_none=True)
        phi = self.model.features(X_S)
        eig = known = None  # log|n A_bar| = d log n + log|A_bar|, (n A_bar)⁻¹ = A_bar⁻¹/n
        if spectrum is not None and self.projection == "eigh":
            eig = (n * spectrum[0], spectrum[1])
        elif spectrum is not None:
            known = (spectrum[0] + self.log_n, spectrum[1] / n)
        loss = (n / s) * psi_batch(phi, y_S, n, self.w, self.sigma2, n * self.A_bar,
                                   B.detach(), mu_t, eig=eig, known=known)
        loss.backward()
        self.opt_min.step()
        self.project()
        with torch.no_grad():  # ascent in B on an independent batch S̄, at ζ_{t+1}
            B.grad = -grad_B(self.model.features(self.draw(s)), n, self.sigma2,
                             n * self.A_bar, mu_t)
        self.opt_max.step()
        with torch.no_grad():
            B.copy_(project_B(B))
        return _per_point(loss.detach(), n)

    def sync(self) -> None:
        """The model's σ² set to the iterate's."""
        self.model.noise = self.sigma2.detach().clone()

    def evaluator(self, track_constraint: bool):
        """The exact NLML per point at a checkpoint; with ``track_constraint`` also the
        gap ‖A − F(θ)‖/‖A‖, kept for :meth:`annotate`."""
        exact = _evaluator(self.model, self.sync)

        def evaluate() -> float:
            value = exact()
            if track_constraint:
                with torch.no_grad():
                    gram = self.model.statistics()[0]
                    F = gram + self.sigma2 * torch.eye(gram.shape[0], dtype=gram.dtype,
                                                       device=gram.device)
                    A = self.n * self.A_bar
                    self.gaps.append(float(torch.linalg.matrix_norm(A - F)
                                           / torch.linalg.matrix_norm(A)))
            return value
        return evaluate

    def annotate(self, history: list[dict]) -> None:
        """Each evaluated checkpoint's constraint gap and μ, where they were tracked."""
        rows = [h for h in history if "objective" in h]
        for row, gap in zip(rows, self.gaps):
            row["constraint_gap"] = gap
            row["mu"] = self.mu_at(row["iter"])


def fit_scgd(
    X, y, features: FeatureMap, noise: float = 0.1, batch_size: int = 32, epochs: float = 10,
    optimizer: str = "adadelta", lr: float | None = None, b: float | None = 0.9,
    b0: float = 1.0, lr_schedule: str = "constant", tracker: str = "same", seed: int = 0,
    eval_every: int | None = None, max_time: float | None = None, progress: bool = False,
    dtype: torch.dtype = torch.float64, device: torch.device | str | None = None,
    buffer_rows: int | None = None,
) -> tuple[FeatureGP, FitResult]:
    """SCGD (§3.2; Wang et al. 2017) on l(θ) = g(θ) + h(F(θ)):

    1. F̃ ← (1 − b_t) F̃ + b_t (n/|S'|) Σ_{i∈S'} F_i(θ_t)       (tracker of F(θ))
    2. θ ← θ − a_t ∇_θ (n/|S|) Σ_{i∈S} [g_i(θ) + ⟨F̃⁻¹, F_i(θ)⟩]

    The tracker is refreshed first and then used (Wang et al.'s order). ``b``: a fixed
    b_t (the paper's §5 uses 0.9; F̃ is then held as :class:`TrackedF`, a step costing
    O(r²d) for r = 13|S| kept rows instead of a d x d Cholesky), or ``None`` for
    b_t = b0·t^(-1/2) (F̃ dense).
    ``lr_schedule="power"``: a_t = lr·t^(-3/4) (the rates of Wang et al., Theorem 8);
    the paper's experiments keep AdaDelta's constant rate (``"constant"``); ``"cosine"``
    anneals it to zero over the run. ``tracker``: ``"same"`` (S' = S) or
    ``"independent"`` (S' drawn independently of S). F̃ starts at F(θ₀) and w at
    argmin_w l(θ₀) (one streaming statistics pass). ``buffer_rows``: as
    :func:`fit_minimax`.
    """
    if tracker not in ("same", "independent"):
        raise ValueError(f"tracker must be 'same' or 'independent', got {tracker!r}")
    if b is not None and not (isinstance(b, (int, float)) and 0 < b <= 1):
        raise ValueError(f"b must be in (0, 1] or None (b_t = b0 t^-1/2), got {b!r}")
    b0 = _positive("b0", b0)
    lr_schedule = check_lr_schedule(lr_schedule)
    model, alpha = _setup(X, y, features, noise, dtype, device)
    n = model.n
    batches, rows, draw = _reader(model, batch_size, seed, buffer_rows)
    w0, gram = _init_w(model)
    w = w0.clone().requires_grad_(True)
    eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    F0 = gram + model.noise.detach() * eye
    # a fixed b: F̃ in TrackedF's low-rank form (O(r²d) a step, not O(d³))
    state = {"F": F0 if b is None else TrackedF(F0, float(b))}
    params = [w, model.raw_noise, *alpha]
    opt = make_optimizer(optimizer, params, lr)

    def step(batch, t: int) -> float:
        X_S, y_S = rows(batch)
        s = X_S.shape[0]
        phi = model.features(X_S)
        with torch.no_grad():
            b_t = float(b) if b is not None else min(1.0, b0 / math.sqrt(t))
            if tracker == "same":
                phi_tr, s_tr = phi.detach(), s
            else:
                phi_tr = model.features(draw(s))
                s_tr = phi_tr.shape[0]
            if isinstance(state["F"], TrackedF):
                state["F"].update(phi_tr, model.noise, n)
            else:
                F_hat = (n / s_tr) * batch_F(phi_tr, model.noise, n)
                state["F"] = (1 - b_t) * state["F"] + b_t * F_hat
        opt.zero_grad(set_to_none=True)
        loss, estimate = scgd_batch(phi, y_S, n, w, model.noise, state["F"],
                                    return_estimate=True)
        loss.backward()
        opt.step()
        return _per_point(estimate, n)

    warn_few_steps("scgd", n, batch_size, epochs, stacklevel=5)
    result = run_minibatch(step, params, n, batch_size, epochs, evaluate=_evaluator(model),
                           eval_every=eval_every, seed=seed, max_time=max_time,
                           device=model.noise.device, progress=progress, method="scgd",
                           theta=_theta(model), optimizers=(opt,), lr_schedule=lr_schedule,
                           batches=batches)
    _done(model)
    return model, result


def fit_bsgd(
    X, y, features: FeatureMap, noise: float = 0.1, batch_size: int = 32, epochs: float = 10,
    optimizer: str = "adadelta", lr: float | None = None, lr_schedule: str = "constant",
    seed: int = 0, eval_every: int | None = None, max_time: float | None = None,
    progress: bool = False, dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None, buffer_rows: int | None = None,
) -> tuple[FeatureGP, FitResult]:
    """BSGD (Chen et al. 2020; §4.2): θ ← θ − a_t ∇l(θ; S_t), the gradient of the exact
    ML-II loss of the batch alone, l(θ; S) = y_Sᵀ(K_SS + σ²I)⁻¹y_S + log|K_SS + σ²I|,
    with the same feature kernel K_SS = Φ_SΦ_Sᵀ (biased for |S| < n; O(b³ + b²d)).
    ``lr_schedule``, ``buffer_rows``: as :func:`fit_minimax`."""
    lr_schedule = check_lr_schedule(lr_schedule)
    model, alpha = _setup(X, y, features, noise, dtype, device)
    n = model.n
    batches, rows, _ = _reader(model, batch_size, seed, buffer_rows)
    params = [model.raw_noise, *alpha]
    opt = make_optimizer(optimizer, params, lr)

    def step(batch, t: int) -> float:
        X_S, y_S = rows(batch)
        opt.zero_grad(set_to_none=True)
        loss = bsgd_batch(model.features(X_S), y_S, model.noise)
        loss.backward()
        opt.step()
        return _per_point(loss.detach(), X_S.shape[0])

    warn_few_steps("bsgd", n, batch_size, epochs, stacklevel=5)
    result = run_minibatch(step, params, n, batch_size, epochs, evaluate=_evaluator(model),
                           eval_every=eval_every, seed=seed, max_time=max_time,
                           device=model.noise.device, progress=progress, method="bsgd",
                           theta=_theta(model), optimizers=(opt,), lr_schedule=lr_schedule,
                           batches=batches)
    _done(model)
    return model, result
