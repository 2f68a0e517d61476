"""``gpscale bench minimax-step``: the time of one MINIMAX step (Shoham & Avron §3.1) at
d = 1000 features, batch 32, with the default projection (``projection="auto"``:
:func:`~gpscale.train.weight_space.project_A_factored`) against the eigendecomposition-
every-step path it replaced (``projection="eigh"``), interleaved in one process.

The data: the first ``--rows`` training rows of a UCI set (fold 0, standardised), the
paper's NN + Gaussian features (2 x 128 ReLU layers, 1000 random Fourier features),
AdaDelta at its default rate, as ``gpscale bench stochastic`` runs them. A step's time is
(t(long) − t(short)) / (long − short steps) of two ``fit_minimax`` runs, so the start's
statistics pass and the final evaluation cancel. Per repeat: both paths, both lengths,
in alternating order. Also recorded: how many of the default path's projections clipped
(the Cholesky test failed, so an eigendecomposition was paid), how many eigenvalues the
last one clipped, and the one-thread cost of the linear algebra on that last A.
"""

from __future__ import annotations

import statistics
import time
import warnings

import torch

from .harness import register

PATHS = ("eigh", "auto")


def _arguments(p) -> None:
    p.add_argument("--dataset", default="elevators")
    p.add_argument("--rows", type=int, default=4000, help="training rows (default 4000)")
    p.add_argument("--num-rff", type=int, default=1000, help="d (default 1000)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, nargs=2, default=None,
                   help="short and long run lengths in steps (default 5 35; quick 2 6)")
    p.add_argument("--repeats", type=int, default=None, help="default 3; quick 1")


def _fit(X, y, args, steps: int, path: str, seed: int = 0):
    from gpscale.features import NeuralFeatures
    from gpscale.train.stochastic import fit_minimax

    feats = NeuralFeatures(X.shape[1], kernel="rbf", num_rff=args.num_rff, seed=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FewStepsWarning: the run is short on purpose
        fit_minimax(X, y, feats, noise=0.1, batch_size=args.batch_size,
                    epochs=steps * args.batch_size / X.shape[0], seed=seed,
                    eval_every=10 ** 9, projection=path)
    return time.perf_counter() - t0


def _spy():
    """Wrap the default projection to count its clips and keep its last input."""
    import gpscale.train.stochastic as stochastic

    inner = stochastic.project_A_factored
    seen = {"clipped": 0, "calls": 0, "last": None, "noise": None}

    def spy(A, noise, a_max=None, test_inside=True):
        out = inner(A, noise, a_max, test_inside)
        seen["calls"] += 1
        seen["clipped"] += int(out[2])
        seen["last"], seen["noise"] = A.detach().clone(), float(noise)
        return out

    stochastic.project_A_factored = spy
    return seen, lambda: setattr(stochastic, "project_A_factored", inner)


def _primitives(A: torch.Tensor, noise: float, rec) -> None:
    from .harness import time_calls

    sym = 0.5 * (A + A.mT)
    eye = torch.eye(A.shape[0], dtype=A.dtype)
    spd = sym @ sym.mT / A.shape[0] + eye
    L = torch.linalg.cholesky(spd)
    lam = torch.linalg.eigvalsh(sym)
    rec.record(kind="spectrum", d=A.shape[0], below_bound=int((lam < noise).sum()),
               min_eig_over_bound=float(lam.min() / noise),
               max_eig_over_bound=float(lam.max() / noise))
    fns = {"eigh": lambda: torch.linalg.eigh(sym),
           "eigvalsh": lambda: torch.linalg.eigvalsh(sym),
           "cholesky_ex (failing test)": lambda: torch.linalg.cholesky_ex(sym - noise * eye),
           "cholesky_ex (SPD)": lambda: torch.linalg.cholesky_ex(spd),
           "cholesky_inverse": lambda: torch.cholesky_inverse(L),
           "matmul d x d": lambda: sym @ sym}
    for name, t in time_calls(fns, repeats=5).items():
        rec.record(kind="primitive", op=name, d=A.shape[0], time_s=t.median_s)


@register("minimax-step", help="one MINIMAX step at d = 1000, batch 32: default projection "
          "vs eigendecomposition every step (interleaved)", add_arguments=_arguments)
def run(args, rec) -> None:
    from gpscale.data import load_uci

    quick = bool(args.quick)
    short, long = args.steps or ((2, 6) if quick else (5, 35))
    repeats = args.repeats or (1 if quick else 3)
    split = load_uci(args.dataset, fold=0)
    X = torch.as_tensor(split.X_train[: args.rows], dtype=torch.float64)
    y = torch.as_tensor(split.y_train[: args.rows], dtype=torch.float64)
    rec.summary(dataset=args.dataset, rows=X.shape[0], d=args.num_rff,
                batch_size=args.batch_size, steps=[short, long], repeats=repeats,
                threads=torch.get_num_threads())
    per_step = {p: [] for p in PATHS}
    seen, restore = _spy()
    try:
        for r in range(repeats):
            order = PATHS if r % 2 == 0 else PATHS[::-1]
            for path in order:
                calls0, clipped0 = seen["calls"], seen["clipped"]
                t_short = _fit(X, y, args, short, path)
                t_long = _fit(X, y, args, long, path)
                step = (t_long - t_short) / (long - short)
                per_step[path].append(step)
                rec.record(kind="step", path=path, repeat=r, t_short_s=t_short,
                           t_long_s=t_long, step_s=step,
                           projections=seen["calls"] - calls0,
                           clipped=seen["clipped"] - clipped0)
    finally:
        restore()
    med = {p: statistics.median(v) for p, v in per_step.items()}
    rec.summary(step_s_eigh=med["eigh"], step_s_auto=med["auto"],
                speedup=med["eigh"] / med["auto"],
                clip_fraction=seen["clipped"] / max(seen["calls"], 1))
    rec.target("step_s_auto", med["auto"], 0.035, "<=",
               "issue 58: a step at d = 1000, batch 32, one thread, at most 0.035 s")
    if seen["last"] is not None:
        _primitives(seen["last"], seen["noise"], rec)
