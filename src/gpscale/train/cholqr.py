"""CholQR: hybrid discrete/continuous optimisation of a sparse GP's inducing subset
and hyperparameters (Cao, Brubaker, Fleet & Hertzmann 2013, §3, §3.4).

One objective (VFE, eq. 5, or DTC/PP, eq. 4; see :class:`~gpscale.models.SparseGP`)
is minimised by block coordinate descent. Each epoch has

1. a discrete phase (hyperparameters fixed): min(60, m) swap attempts (§4), each on
   the point of the current sweep not yet considered that is latest in the factor
   order (:class:`Sweeps`: every point once a sweep, at half the downdate cost of
   taking them oldest first). A swap of inducing point i (§3.4):
   (I) down-date the factors to remove i (§3.2); (II) evaluate F over I∖{i} from the
   factors (eqs. 9, 11, 12); (III) rank all n − m candidates with the z information
   pivots (§3.3.1); (IV) compute the best one's exact ΔF (eqs. 14–16); (V) accept it
   only if F(I∖{i} ∪ {j}) < F(I), else put i back (the rows the downdate zeroed,
   restored: O(n + k)); (VI) replace an information pivot that entered I, and redraw
   all of them every ``refresh_every`` attempts (§3.3.2). The candidates' scores come
   from a cache that (I), (V) and the revert update in O(zn + zk) (footnote 2;
   :class:`~gpscale.train.cholqr_scoring.InfoPivots`);
2. a continuous phase: limited L-BFGS (the paper uses non-linear CG) on the kernel
   hyperparameters and σ² with I fixed, at most min(20, max(15, 2·#hyp)) evaluations.

It stops when a rule says the descent is done, with no clock by default: when a whole
sweep (every inducing point considered once, §3.4: "as long as all inducing set points
are eventually considered") had every swap rejected while the continuous phases lowered
the objective by less than ``tol`` (relative), or (§3.4: "until improvement in the
objective is below a threshold") when the last sweep's ⌈m / swaps⌉ epochs lowered it by
less than ``tol``. ``max_epochs`` and ``max_time`` are safety caps a caller may add,
reported when hit; Ctrl-C keeps the best state. Options of ours (not the paper's
defaults): a greedy I₀ (``init="variance"`` / ``"greedy"``, ``prefit``) and more swaps
per continuous phase (``swaps_per_epoch``, ``"sweep"``); see
benchmarks/results/cholqr-race/greedy-start/README.md.
"""

from __future__ import annotations

import itertools
import math
import numbers
import time

import torch

from ..linalg.pivchol import CholQRFactors
from ..models.sparse import OBJECTIVES, SparseGP, check_inducing
from ..progress import progress_bar
from .cholqr_scoring import INFO_PIVOTS, InfoPivots, exact_gain, factor_objective
from .lbfgs import guarded
from .result import FitResult, restore, snapshot, theta_of
from .selectors import select_greedy, select_variance


class _Budget(Exception):
    """The evaluation or time budget of the continuous phase is spent."""


def evals_per_epoch(model: SparseGP) -> int:
    """min(20, max(15, 2·#hyp)) objective evaluations per continuous phase (§4)."""
    n_hyp = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return min(20, max(15, 2 * n_hyp))


def fit_hyperparameters(model: SparseGP, max_evals: int, deadline: float | None = None,
                        info: dict | None = None) -> int:
    """Continuous phase (§3.4): L-BFGS (strong Wolfe) on every trainable parameter of
    ``model`` (kernel hyperparameters and σ², unconstrained) with the inducing set
    fixed, stopped after ``max_evals`` objective+gradient evaluations (or at
    ``time.perf_counter() >= deadline``). The best parameters seen are kept, so the
    objective never increases. Returns the number of evaluations used; ``info`` (a dict)
    receives ``first``, the objective at the phase's start (its first evaluation)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params or max_evals < 1:
        return 0
    state = {"evals": 0, "best_f": math.inf, "best": snapshot(params)}
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=max_evals, max_eval=max_evals,
                            history_size=10, tolerance_grad=1e-9, tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")

    def closure():
        if state["evals"] >= max_evals or (deadline is not None
                                           and time.perf_counter() >= deadline):
            raise _Budget
        opt.zero_grad()
        state["evals"] += 1
        f = guarded(model.objective, state["best_f"], params[0].dtype)
        if not f.requires_grad:  # failed evaluation: back the line search off
            return f
        f.backward()
        fv = float(f.detach())
        if info is not None and state["evals"] == 1:
            info["first"] = fv
        if fv < state["best_f"]:
            state["best_f"], state["best"] = fv, snapshot(params)
        return f.detach()

    try:
        opt.step(closure)
    except _Budget:
        pass
    finally:  # also on Ctrl-C: keep the best parameters, then let it propagate
        restore(params, state["best"])
    return state["evals"]


#: the ``init`` values that select I₀ greedily under the current hyperparameters
GREEDY_INITS = ("variance", "greedy")


def initial_inducing(X: torch.Tensor, m: int, init, generator: torch.Generator,
                     model: SparseGP | None = None, candidates: int = 16) -> list[int]:
    """I₀: ``"random"`` (default, §3) m distinct points; ``"clump"`` the m nearest
    neighbours of one random training point (the poor start of §4.2, Fig. 4); the given
    indices; or, selected under ``model``'s current kernel and noise (ours, a named
    option: the paper's footnote 1 found no benefit in an incremental start),
    ``"variance"`` greedy variance (pivoted Cholesky, O(nm²)) or ``"greedy"`` Titsias's
    greedy selection of ``model``'s objective with ``candidates`` random candidates a
    step (O(nm² · candidates))."""
    n = X.shape[0]
    if init is None or (isinstance(init, str) and init == "random"):
        return torch.randperm(n, generator=generator)[:m].tolist()
    if isinstance(init, str) and init == "clump":
        c = int(torch.randint(n, (1,), generator=generator))
        d2 = ((X - X[c]) ** 2).sum(1)
        return torch.argsort(d2, stable=True)[:m].tolist()
    if isinstance(init, str) and init in GREEDY_INITS:
        if model is None:
            raise ValueError(f"init={init!r} selects under a model's hyperparameters: "
                             "pass model")
        with torch.no_grad():
            if init == "variance":
                return select_variance(model.kernel, X, m).tolist()
            return select_greedy(model.kernel, X, model.y, float(model.noise.detach()), m,
                                 candidates=candidates, seed=generator,
                                 objective=model.objective_kind).tolist()
    if isinstance(init, str):
        raise ValueError("init must be None, 'random', 'clump', 'variance', 'greedy' or "
                         f"indices, got {init!r}")
    idx = check_inducing(init, n, "init").tolist()
    if len(idx) != m:
        raise ValueError(f"init holds {len(idx)} indices but m = {m}")
    return idx


class Sweeps:
    """Which inducing point a swap attempt considers, and the sweeps they make up.

    A sweep considers every point of the inducing set once (§3.4: "as long as all
    inducing set points are eventually considered"); a point swapped in during a sweep
    waits for the next. Within a sweep the point chosen is the not-yet-considered one
    latest in the factor order: moving the pivot at position p to the end for the
    downdate costs O((k − p)(n + k)) (§3.2), and a considered point always ends last
    (kept, or replaced by the newcomer), so this order costs k(k − 1)/2 transpositions a
    sweep, where taking the one visited longest ago (always at position 0) costs k(k − 1).
    ``done`` lists (attempts, accepted, epoch it began in) of every completed sweep;
    the caller sets ``epoch``."""

    def __init__(self) -> None:
        self.pending: set[int] = set()
        self.attempts = self.accepted = self.epoch = self.started = 0
        self.done: list[tuple[int, int, int]] = []

    def choose(self, pivots: list[int]) -> int:
        """The position (in ``pivots``) of the point to consider next; starts a new sweep
        when the last one is complete."""
        if not self.pending:
            self.pending, self.started = set(pivots), self.epoch
        for p in range(len(pivots) - 1, -1, -1):
            if pivots[p] in self.pending:
                self.pending.discard(pivots[p])
                return p
        raise ValueError("the points pending in this sweep are not among the pivots")

    def record(self, accepted: bool) -> bool:
        """Count one attempt; True when it completed a sweep (appended to ``done``)."""
        self.attempts += 1
        self.accepted += int(accepted)
        if self.pending:
            return False
        self.done.append((self.attempts, self.accepted, self.started))
        self.attempts = self.accepted = 0
        return True


class _Swapper:
    """The discrete phase: swap attempts on one factorisation (fixed hyperparameters).

    ``info_pivots`` selects the information pivots (:data:`INFO_PIVOTS`). For ``"aa"``
    (adaptively grown, Fig. 3(c)/(f); the paper's rule is in its tech report, which we do
    not have, so this one is ours): a rejected attempt says the approximate ranking
    proposed a candidate the exact ΔF refused, so ``z_step`` random pivots are added
    (up to ``z_max``); the set never shrinks, and the periodic redraw keeps its size."""

    def __init__(self, model: SparseGP, z: int, refresh_every: int, gen: torch.Generator,
                 sweeps: Sweeps | None = None, info_pivots: str = "random",
                 z_step: int | None = None, z_max: int | None = None) -> None:
        with torch.no_grad():
            self.f = CholQRFactors(model.kernel, model.X, model.y, model.inducing.tolist(),
                                   model.noise.detach())
        self.kind, self.gen, self.refresh_every = model.objective_kind, gen, refresh_every
        self.info = InfoPivots(self.f, min(z, model.n - model.m), gen, select=info_pivots)
        self.z_step = z if z_step is None else int(z_step)
        self.z_max = z if z_max is None else int(z_max)
        self.F = factor_objective(self.f, self.kind)
        self.sweeps = Sweeps() if sweeps is None else sweeps
        self.attempts = self.accepted = 0

    def attempt(self) -> bool:
        """One swap (steps I–VI of §3.4) of the point :meth:`Sweeps.choose` names; True
        when it was accepted."""
        f = self.f
        if self.attempts and self.attempts % self.refresh_every == 0:
            self.info.refresh(f)
        self.attempts += 1
        p = self.sweeps.choose(f.pivots)
        with torch.no_grad():
            i, _ = self.info.remove(f, p)                                     # (I)
            F_down = factor_objective(f, self.kind)                           # (II)
            gains = self.info.approx_gains(f, self.kind, exclude=[i])         # (III)
            j = int(torch.argmax(gains))
            ok = bool(torch.isfinite(gains[j]))
            gain, ell_j = exact_gain(f, j, self.kind) if ok else (-math.inf, None)  # (IV)
            F_new = F_down - gain                                             # (V)
            accept = ell_j is not None and F_new < self.F - 1e-10 * max(1.0, abs(self.F))
            if accept:
                self.info.add(f, j, ell_j)
                self.F = F_new
                self.accepted += 1
                self.info.replace(f, j)                                       # (VI)
            else:
                self.info.undo_remove(f)  # revert: i back, exactly as it was
                if self.info.select == "aa" and len(self.info.J) < self.z_max:
                    self.info.grow(f, min(self.z_step, self.z_max - len(self.info.J)))
        self.sweeps.record(accept)
        return accept


def sweep_epochs(m: int, n: int, swaps: int) -> int:
    """Epochs in which every one of the m inducing points is considered once:
    ⌈m / swaps⌉ (1 when there is nothing to swap)."""
    return 1 if m >= n or swaps < 1 else -(-m // swaps)


def check_options(m, n: int | None, *, z, refresh_every, max_epochs, seed, window, max_time,
                  swaps_per_epoch, prefit, init, info_pivots="random",
                  z_max=128, aa_step=None) -> tuple[int, int, int, int]:
    """:func:`fit_cholqr`'s options checked (a ValueError saying what to pass otherwise;
    m against the n training rows unless n is None); returns (m, z, refresh_every, seed)
    as ints."""
    for name, value, low in [("m", m, 1), ("z", z, 1), ("refresh_every", refresh_every, 1),
                             ("max_epochs", max_epochs, 1), ("seed", seed, 0),
                             ("window", window, 1), ("z_max", z_max, 1),
                             ("aa_step", aa_step, 1)]:
        if name in ("max_epochs", "window", "aa_step") and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if n is not None and int(m) > n:
        raise ValueError(f"m = {int(m)} inducing points but only n = {n} training points; "
                         "choose m <= n")
    if max_time is not None and not (max_time > 0):
        raise ValueError(f"max_time must be a positive number of seconds, got {max_time!r}")
    if isinstance(swaps_per_epoch, str) and swaps_per_epoch != "sweep":
        raise ValueError(f"swaps_per_epoch must be an integer or 'sweep', got "
                         f"{swaps_per_epoch!r}")
    if not (swaps_per_epoch is None or isinstance(swaps_per_epoch, str)) and (
            isinstance(swaps_per_epoch, bool)
            or not isinstance(swaps_per_epoch, numbers.Integral) or swaps_per_epoch < 0):
        raise ValueError(f"swaps_per_epoch must be an integer >= 0 or 'sweep', got "
                         f"{swaps_per_epoch!r}")
    if not isinstance(info_pivots, str) or info_pivots not in INFO_PIVOTS:
        raise ValueError(f"info_pivots must be one of {', '.join(INFO_PIVOTS)}, got "
                         f"{info_pivots!r}")
    if info_pivots == "aa" and z_max < z:
        raise ValueError(f"info_pivots='aa' grows z = {z} pivots up to z_max; z_max = "
                         f"{z_max} is smaller")
    if prefit and init not in GREEDY_INITS:
        raise ValueError(f"prefit fits the hyperparameters before a greedy init "
                         f"({', '.join(GREEDY_INITS)}); init is {init!r}")
    return int(m), int(z), int(refresh_every), int(seed)


def _phase_lengths(m: int, n: int, swaps_per_epoch, window: int | None) -> tuple[int, int]:
    """(swap attempts an epoch: m for a whole sweep, min(60, m) by default (§4); the
    epochs the "tol" rule looks back over: a sweep's, :func:`sweep_epochs`, by default)."""
    swaps = m if isinstance(swaps_per_epoch, str) else (
        min(60, m) if swaps_per_epoch is None else int(swaps_per_epoch))
    return swaps, sweep_epochs(m, n, swaps) if window is None else int(window)


def _initial_set(model: SparseGP, m: int, init, prefit: bool, gen: torch.Generator,
                 evals: int, deadline: float | None) -> int:
    """I₀ set on ``model`` (:func:`initial_inducing`); with ``prefit``, one continuous
    phase on a random set first, so that a greedy I₀ is chosen under fitted
    hyperparameters. Returns the objective evaluations spent."""
    used = 0
    if prefit:
        model.set_inducing(initial_inducing(model.X, m, "random", gen))
        used = fit_hyperparameters(model, evals, deadline)
    model.set_inducing(initial_inducing(model.X, m, init, gen, model=model))
    return used


def _continuous_phase(model: SparseGP, evals: int, deadline: float | None,
                      row: dict) -> dict:
    """The epoch's continuous phase (:func:`fit_hyperparameters`), its rejection rate,
    evaluations and objective after it written into the epoch's history ``row``;
    returns what the phase recorded (its first evaluation)."""
    row["rejection_rate"] = (1 - row["accepted"] / row["attempts"]
                             if row["attempts"] else None)
    phase: dict = {}
    row["hyp_evals"] = fit_hyperparameters(model, evals, deadline, phase)
    with torch.no_grad():
        row["objective"] = float(model.objective().detach())
    return phase


def _swap_phase(sw: _Swapper, swaps: int | None, deadline: float | None, best: tuple,
                params: list) -> tuple:
    """One discrete phase: ``swaps`` attempts (None: until the sweep under way closes) or
    until ``deadline``; returns ``best`` (objective, pivots, parameters) updated by every
    state the swaps passed through."""
    while swaps is None or sw.attempts < swaps:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        sw.attempt()
        if sw.F < best[0]:
            best = (sw.F, list(sw.f.pivots), snapshot(params))
        if swaps is None and sw.sweeps.attempts == 0:  # a sweep just closed
            break
    return best


def _quiet_since(since: int | None, epoch: int, row: dict, phase: dict, F: float,
                 tol: float) -> int | None:
    """The first epoch of the current run of epochs in which nothing moved: no swap
    accepted and the continuous phase's improvement (from its first evaluation to F,
    one code path) below ``tol`` relative; None when this epoch moved."""
    F0 = phase.get("first", -math.inf)
    quiet = row["accepted"] == 0 and F0 - F < tol * max(abs(F0), 1e-12)
    return (since or epoch) if quiet else None


def _stop_rule(quiet_since: int | None, sweeps: Sweeps, history: list, epoch: int,
               window: int, F: float, tol: float) -> str | None:
    """Which of :func:`fit_cholqr`'s rules holds after ``epoch`` ("swaps rejected",
    "tol"), or None."""
    if (quiet_since is not None and sweeps.done and sweeps.done[-1][1] == 0
            and sweeps.done[-1][2] >= quiet_since):
        return "swaps rejected"
    F_prev = history[epoch - window]["objective"] if epoch >= window else None
    if F_prev is not None and (F_prev - F) < tol * max(abs(F_prev), 1e-12):
        return "tol"
    return None


def _record_swaps(model: SparseGP, sw: _Swapper, row: dict, z: int, grows: bool) -> int:
    """Install the discrete phase's inducing set and record it in the epoch's ``row``;
    returns the pivot count the next epoch starts from (AA's, when it ``grows``)."""
    model.set_inducing(sw.f.pivots)
    row.update(attempts=sw.attempts, accepted=sw.accepted, objective_after_swaps=sw.F)
    if grows:
        z = row["z"] = max(z, len(sw.info.J))
    return z


def fit_cholqr(X, y, kernel, m: int, objective: str = "vfe", noise: float = 0.1,
               init=None, seed: int = 0, max_epochs: int | None = None,
               max_time: float | None = None, z: int = 16, refresh_every: int = 10,
               swaps_per_epoch: int | str | None = None, max_evals: int | None = None,
               tol: float = 1e-4, window: int | None = None, prefit: bool = False,
               info_pivots: str = "random", z_max: int = 128, aa_step: int | None = None,
               progress: bool = False,
               dtype: torch.dtype = torch.float64,
               device: torch.device | str | None = None) -> tuple[SparseGP, FitResult]:
    """CholQR (Cao et al. 2013): choose m inducing training points and the
    hyperparameters by minimising ``objective`` (``"vfe"``: negative Titsias bound,
    CholQR-VAR; ``"dtc"``: DTC/PP NLML, CholQR-MLE).

    ``init``: None/"random", "clump", "variance", "greedy" or m indices
    (:func:`initial_inducing`); ``prefit``: before a "variance" / "greedy" selection,
    one continuous phase on a random set, so that I₀ is chosen under fitted
    hyperparameters (ours). ``z`` information pivots, redrawn every ``refresh_every``
    swap attempts; ``swaps_per_epoch`` defaults to min(60, m) (§4), ``"sweep"`` runs a
    whole sweep of the inducing set per epoch; ``max_evals`` (L-BFGS evaluations per
    epoch) defaults to min(20, max(15, 2·#hyp)). ``info_pivots``: ``"random"`` (§3.3.2,
    the paper's default), ``"oi"`` (the greedy pivots of the residual's pivoted Cholesky,
    as CSI chooses them) or ``"aa"`` (z random pivots grown by ``aa_step`` (default z)
    after every rejected attempt up to ``z_max``; our rule, :class:`_Swapper`): Fig.
    3(c)/(f)'s variants.

    Stopping (the module doc), whichever holds first (``reason="converged"``, the rule in
    the last history row's ``stop``): ``"swaps rejected"``, neither block of the
    coordinate descent moves (``tol`` relative); ``"tol"``, the objective fell by less
    than ``tol`` over the last ``window`` epochs (default: a sweep, :func:`sweep_epochs`;
    ``window=1`` tests each epoch alone). ``max_epochs`` and ``max_time`` (seconds, the
    selection of I₀ included) are safety caps a caller may add (None: none), reported as
    ``reason`` "max_epochs" / "max_time"; Ctrl-C keeps the best state ("interrupted").
    History: one row per epoch (objective after the epoch, after its swaps, time,
    attempts, accepted, rejection rate, evaluations, completed sweeps). Seeded by
    ``seed``.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be 'vfe' or 'dtc', got {objective!r}")
    t0 = time.perf_counter()
    model = SparseGP(kernel, X, y, [0], noise=noise, objective=objective, dtype=dtype,
                     device=device)
    n = model.n
    m, z, refresh_every, seed = check_options(
        m, n, z=z, refresh_every=refresh_every, max_epochs=max_epochs, seed=seed,
        window=window, max_time=max_time, swaps_per_epoch=swaps_per_epoch, prefit=prefit,
        init=init, info_pivots=info_pivots, z_max=z_max, aa_step=aa_step)
    z_now = z  # "aa": the pivot set's size carries over from epoch to epoch
    sweep_per_epoch = isinstance(swaps_per_epoch, str)
    gen = torch.Generator().manual_seed(seed)
    evals = evals_per_epoch(model) if max_evals is None else int(max_evals)
    deadline = None if max_time is None else t0 + max_time
    n_evals = _initial_set(model, m, init, prefit, gen, evals, deadline)
    swaps, window = _phase_lengths(m, n, swaps_per_epoch, window)
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():
        F_prev = float(model.objective().detach())
    history = [{"iter": 0, "objective": F_prev, "time_s": time.perf_counter() - t0,
                "hyp_evals": n_evals}]
    best = (F_prev, model.inducing.tolist(), snapshot(params))
    sweeps = Sweeps()
    quiet_since = None  # first epoch of the current run of epochs in which nothing moved
    reason = "max_epochs"
    bar = progress_bar(progress, total=max_epochs, desc=f"CholQR-{objective}", leave=False)
    try:
        for epoch in itertools.count(1) if max_epochs is None else range(1, max_epochs + 1):
            row = {"iter": epoch, "attempts": 0, "accepted": 0}
            sweeps.epoch = epoch
            if m < n and swaps > 0:  # discrete phase
                sw = _Swapper(model, z_now, refresh_every, gen, sweeps, info_pivots,
                              z_step=z if aa_step is None else int(aa_step), z_max=z_max)
                best = _swap_phase(sw, None if sweep_per_epoch else swaps, deadline, best,
                                   params)
                z_now = _record_swaps(model, sw, row, z_now, grows=info_pivots == "aa")
            phase = _continuous_phase(model, evals, deadline, row)
            F = row["objective"]
            row.update(time_s=time.perf_counter() - t0, sweeps=len(sweeps.done))
            history.append(row)
            if F < best[0]:
                best = (F, model.inducing.tolist(), snapshot(params))
            bar.update(1)
            bar.set_postfix(objective=f"{F:.5g}", rejected=row["rejection_rate"])
            if deadline is not None and time.perf_counter() >= deadline:
                reason = "max_time"  # before the tests below: the epoch was cut short
                break
            quiet_since = _quiet_since(quiet_since, epoch, row, phase, F, tol)
            stop = _stop_rule(quiet_since, sweeps, history, epoch, window, F, tol)
            if stop is not None:
                reason, row["stop"] = "converged", stop
                break
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        bar.close()
    restore(params, best[2])
    model.set_inducing(best[1])
    return model, FitResult(method=f"cholqr-{objective}", theta=theta_of(model),
                            objective=best[0], history=history,
                            converged=reason == "converged", reason=reason,
                            wall_s=time.perf_counter() - t0,
                            n_evals=sum(h["hyp_evals"] for h in history))
