"""exact at its defaults on kin40k's 10 000 / 30 000 split (the SPGP / CholQR papers'),
scored as bench cholqr-kin40k scores its rows (SMSE, SNLP in y's units after its linear
de-trending): refine='auto' gives 41 evaluations there since REFINE_MAX went to 50."""
import json, time
import numpy as np, torch


def main():
    torch.set_num_threads(1)
    import gpscale
    from gpscale.bench.cholqr import kin40k_arrays
    from gpscale.metrics import smse, snlp
    Xtr, ytr, Xte, yte, ytr_raw, untransform = kin40k_arrays(None, None, 0)
    t0 = time.perf_counter()
    pred = gpscale.fit(Xtr, ytr, method="exact", seed=0)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    m, s = pred.predict(Xte, return_std=True)
    predict_s = time.perf_counter() - t0
    mean, var = untransform(Xte, m, s ** 2)
    model = pred.model
    refined = getattr(model, "refined", {}) or {}
    info = getattr(model, "solve_info", {}) or {}
    print(json.dumps({"set": "kin40k 10k/30k", "method": "exact", "smse": smse(yte, mean),
                      "snlp": snlp(yte, mean, var, ytr_raw), "fit_s": fit_s,
                      "predict_s": predict_s, "refine_evals": refined.get("evaluations"),
                      "refine_s": refined.get("seconds"), "cg_iterations": info.get("iterations"),
                      "precond_rank": info.get("precond_rank"),
                      "model": type(model).__name__,
                      "commit": open("/tmp/run19b/COMMIT").read().strip(),
                      "load_after": open("/proc/loadavg").read().split()[:3]}), flush=True)


if __name__ == "__main__":
    main()
