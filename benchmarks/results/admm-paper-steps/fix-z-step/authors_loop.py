"""The authors' se_v1.R loop (dense numpy transcription; θ-step GD+Armijo to |g| <= 1e-3,
z-step exact, λ⁰ = 1, ρ = 5, σ_e² = jit² = 0.25 held) on their protocol (x = 0:0.02:10,
y = f + U(0, 0.25), odd/even split, 10 test points out of each half), both folds from
l⁰ = 0.9 with z⁰ at l ~ N(0.9, 0.1), 100 iterations; per seed: the two folds' l at
iterations 3, 10, 100, the first iteration with |Δl| < 1e-2, the CV optimum on a grid."""
import numpy as np, sys
sq = lambda a, b: (a[:, None] - b[None, :]) ** 2
K = lambda a, b, l: np.exp(-sq(a, b) / (2 * l * l))
Kg = lambda a, b, l: K(a, b, l) * sq(a, b) / l ** 3
rho, jit2, l_init, maxiter = 5.0, 0.25, 0.9, 100
def run(xt, xv, yt, yv, rng):
    nt = len(xt); eye = np.eye(nt)
    def F(l, z, lam):
        r = (K(xt, xt, l) + jit2 * eye) @ z - yt
        return np.sum((yv - K(xv, xt, l) @ z) ** 2) + lam @ r + rho / 2 * r @ r
    def gl(l, z, lam):
        e = yv - K(xv, xt, l) @ z; r = (K(xt, xt, l) + jit2 * eye) @ z - yt
        return -2 * e @ (Kg(xv, xt, l) @ z) + (lam + rho * r) @ (Kg(xt, xt, l) @ z)
    lam = np.ones(nt); l = l_init
    z = np.linalg.solve(K(xt, xt, abs(round(rng.normal(l_init, 0.1), 3))) + jit2 * eye, yt)
    path = [l]
    for i in range(maxiter):
        k = 0
        while abs(gl(l, z, lam)) > 1e-3 and k < 5000:
            d = gl(l, z, lam); t = 0.125; f0 = F(l, z, lam)
            while F(l - t * d, z, lam) >= f0 - 0.5 * t * d * d: t *= 0.5
            l = l - t * d; k += 1
        Kvt, C = K(xv, xt, l), K(xt, xt, l) + jit2 * eye
        z = np.linalg.solve(2 * (Kvt.T @ Kvt + rho / 2 * C @ C), 2 * Kvt.T @ yv - C @ lam + rho * C @ yt)
        lam = lam + rho * (C @ z - yt); path.append(l)
    path = np.array(path)
    stop = next((i for i in range(1, len(path)) if abs(path[i] - path[i - 1]) < 1e-2), None)
    ls = np.linspace(0.1, 1.5, 141)
    cv = [np.sum((yv - K(xv, xt, v) @ np.linalg.solve(K(xt, xt, v) + jit2 * eye, yt)) ** 2) for v in ls]
    return path, stop, ls[int(np.argmin(cv))]
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    rng = np.random.default_rng(seed)
    x = np.arange(0, 10 + 1e-9, 0.02); n = len(x)
    y = np.round(rng.multivariate_normal(np.zeros(n), K(x, x, 0.5) + 1e-10 * np.eye(n)) + rng.uniform(0, jit2, n), 4)
    it = np.arange(0, n, 2); iv = np.arange(1, n, 2)
    it = np.setdiff1d(it, rng.choice(it, 10, replace=False)); iv = np.setdiff1d(iv, rng.choice(iv, 10, replace=False))
    res = [run(x[a], x[b], y[a], y[b], rng) for a, b in ((it, iv), (iv, it))]
    print(seed, " ".join(f"fold{j}: l3={p[3]:.3f} l10={p[10]:.3f} l100={p[100]:.3f} stop_eps={s} l_at_stop={p[s] if s else float('nan'):.3f} cvopt={o:.2f}" for j, (p, s, o) in enumerate(res)),
          f"avg100={(res[0][0][100] + res[1][0][100]) / 2:.3f}", flush=True)
