"""Where one CholQR swap attempt's time goes (kin40k, m = 512): steps (I)-(V) of
_Swapper.attempt timed one by one with perf_counter, no profiler. ``old`` replays the
previous attempt (point visited longest ago = position 0 once the order is the visit
order; exact gain by two-pass Gram-Schmidt; revert by re-adding i), ``new`` this
branch's (latest pending point; one-pass gain; revert by restoring the zeroed rows).
Usage (one thread):
    PYTHONPATH=src:. python benchmarks/results/cholqr-race/greedy-start/swap_profile.py \
        [n] [m] [attempts] [old,new]
"""
import sys
import time

import torch

from benchmarks.cholqr import _rbf, kin40k_arrays
from gpscale.models.sparse import SparseGP
from gpscale.train.cholqr import Sweeps, _Swapper
from gpscale.train.cholqr_scoring import exact_gain, factor_objective, gains_from_terms

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
m = int(sys.argv[2]) if len(sys.argv) > 2 else 512
attempts = int(sys.argv[3]) if len(sys.argv) > 3 else 60
Xtr, ytr, *_ = kin40k_arrays(n, 1000, 0)
X = torch.as_tensor(Xtr, dtype=torch.float64)
y = torch.as_tensor(ytr, dtype=torch.float64)


def old_gain(f, j, kind):  # the previous exact_gain: two-pass Gram-Schmidt
    ell = f.new_column(j, rtol=1e-8)
    if ell is None:
        return float("-inf"), None
    _, w, rho = f.gram_schmidt(ell)
    return float(gains_from_terms(ell @ ell, w[: f.n] @ f.y, rho * rho, f.sigma**2, kind)), ell


for variant in (sys.argv[4].split(",") if len(sys.argv) > 4 else ("old", "new")):
    gen = torch.Generator().manual_seed(0)
    model = SparseGP(_rbf(X.shape[1]), X, y, torch.randperm(X.shape[0], generator=gen)[:m],
                     noise=0.1, objective="vfe")
    t = time.perf_counter()
    sw = _Swapper(model, 16, 10, gen, Sweeps())
    setup = time.perf_counter() - t
    T = dict.fromkeys(["refresh", "choose i", "I remove", "II F_down", "III approx gains",
                       "IV exact gain", "V accept (+VI)", "V revert"], 0.0)
    acc, pos = 0, []
    for a in range(attempts):
        f = sw.f
        t = time.perf_counter()
        if sw.attempts and sw.attempts % sw.refresh_every == 0:
            sw.info.refresh(f)
        T["refresh"] += time.perf_counter() - t
        sw.attempts += 1
        t = time.perf_counter()
        p = 0 if variant == "old" else sw.sweeps.choose(f.pivots)
        pos.append(p)
        T["choose i"] += time.perf_counter() - t
        with torch.no_grad():
            t = time.perf_counter()
            i, ell_i = sw.info.remove(f, p)
            T["I remove"] += time.perf_counter() - t
            t = time.perf_counter()
            F_down = factor_objective(f, "vfe")
            T["II F_down"] += time.perf_counter() - t
            t = time.perf_counter()
            gains = sw.info.approx_gains(f, "vfe", exclude=[i])
            j = int(torch.argmax(gains))
            T["III approx gains"] += time.perf_counter() - t
            t = time.perf_counter()
            gain, ell_j = (old_gain if variant == "old" else exact_gain)(f, j, "vfe")
            T["IV exact gain"] += time.perf_counter() - t
            F_new = F_down - gain
            t = time.perf_counter()
            if ell_j is not None and F_new < sw.F - 1e-10 * max(1.0, abs(sw.F)):
                sw.info.add(f, j, ell_j)
                sw.F = F_new
                sw.info.replace(f, j)
                acc += 1
                T["V accept (+VI)"] += time.perf_counter() - t
            else:
                if variant == "old":
                    sw.info._undo = None
                    sw.info.add(f, i, ell_i)
                else:
                    sw.info.undo_remove(f)
                T["V revert"] += time.perf_counter() - t
            if variant == "new":
                sw.sweeps.record(F_new < sw.F)
    tot = sum(T.values())
    print(f"[{variant}] setup {setup:.3f} s; {attempts} attempts, {acc} accepted, {tot:.3f} s "
          f"({tot / attempts * 1e3:.1f} ms each); mean position of i {sum(pos) / len(pos):.0f}"
          f" of k = {m}")
    for k, v in T.items():
        print(f"  {k:18s} {v:7.3f} s  {100 * v / tot:5.1f} %  {v / attempts * 1e3:6.2f} ms/attempt")
