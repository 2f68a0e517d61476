"""Instrumented paper-preset run: SE n=500 trial 0 (the admm-synthetic Table 1 protocol:
θ⁰ = 1.2 × true, noise 0.2, hold-out split seed 0), one line per ADMM iteration: θ (noise
first when trained), relative residual, validation MSE at z and at the exact C⁻¹y_T, the
gap ‖z − C⁻¹y_T‖², L_ρ, ‖∇_θ L_ρ‖, ‖Δθ‖, ‖λ‖, and each coordinate's line search
[first trial h, bound t_max, chosen t, change of L_ρ, evaluations].
Usage: python probe.py iters=15 z_step=fr|cg [fix_noise=1 init_noise=0.1] [rho=5]"""
import sys, math, torch, json
from pathlib import Path
ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
from gpscale.data.synthetic import synthetic_admm
from gpscale.train.admm import HoldoutADMM, holdout_split, make_options
from gpscale.train.admm import coordinate as coordmod
from benchmarks.admm import _model
torch.set_num_threads(1)
kw = dict(a.split("=") for a in sys.argv[1:])
name = kw.pop("kernel", "se"); n = int(kw.pop("n", 500)); iters = int(kw.pop("iters", 30))
fix = kw.pop("fix_noise", "0") == "1"; noise0 = float(kw.pop("init_noise", 0.2))
opts = {k: (float(v) if v.replace('.', '').replace('e-', '').isdigit() else v) for k, v in kw.items()}
for k in ("max_iter", "theta_steps", "line_max_evals"):
    if k in opts: opts[k] = int(opts[k])
ds = synthetic_admm(name, n, seed=0, noise=0.1)
model = _model(name, ds, 1.2, noise0, torch.device("cpu"), fix)
iT, iV = holdout_split(model.n, 0.5, 0)
st = HoldoutADMM(model, model.X[iT], model.y[iT], model.X[iV], model.y[iV],
                 make_options(preset="paper", memory="dense", **opts))
st.init()
# log the line searches
orig = coordmod.line_minimise
log = []
def lm(phi, f0, h, tmax, tol, me):
    t, f, e = orig(phi, f0, h, tmax, tol, me)
    log.append((h, tmax, t, f0, f, e)); return t, f, e
coordmod.line_minimise = lm
def dense_cv(st):
    K = st.model.kernel; X_T, X_V = st.X_T, st.X_V
    with torch.no_grad():
        C = K(X_T) + st.model.noise * torch.eye(X_T.shape[0], dtype=torch.float64)
        z = torch.linalg.solve(C, st.y_T)
        e = st.y_V - K(X_V, X_T) @ z
        return float(e @ e) / e.shape[0], float((st.z - z).norm()**2)
print("init", st.values().tolist(), st.diagnostics())
for it in range(1, iters + 1):
    log.clear()
    d = st.iterate()
    cvx, gap = dense_cv(st)
    ls = " ".join(f"[h={h:.3g} tmax={tm:.3g} t={t:.3g} dL={f-f0:.3g} ev={e}]" for h, tm, t, f0, f, e in log)
    print(f"{it:3d} θ={[round(v,4) for v in st.values().tolist()]} res={d['residual']:.3g} cv(z)={d['cv_loss']:.4f} cv(exact)={cvx:.4f} gap={gap:.3g} Lρ={d['lrho']:.4g} |g|={d['grad_norm']:.3g} dθ={d['dtheta']:.3g} ‖λ‖={float(st.lam.norm()):.3g} {ls}")
