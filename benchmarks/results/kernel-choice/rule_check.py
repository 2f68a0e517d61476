"""The final rule's picks (Matérn-5/2 kept within two standard errors) against the
truth recorded in kernel-choice.jsonl: `PYTHONPATH=src python benchmarks/results/kernel-choice/rule_check.py 1000`."""
import sys, json, time, torch
torch.set_num_threads(1)
sys.path.insert(0, ".")  # run from the repository root
from benchmarks.kernel_choice import _load, _standardise, SETS
from gpscale.methods.kernel_choice import choose_kernel
truth = {}
for l in open("benchmarks/results/kernel-choice/kernel-choice.jsonl"):
    r = json.loads(l)
    if r.get("kind") == "family": truth.setdefault(r["dataset"], {})[r["family"]] = (r["test_nlpd"], r["test_rmse"])
rows = int(sys.argv[1])
for name in sys.argv[2:] or SETS:
    if name not in truth: continue
    Xtr, ytr, Xte, yte = _standardise(*_load(name))
    t = time.time()
    c, _ = choose_kernel(Xtr, ytr, rows=rows, seed=0)
    best = min(v[0] for v in truth[name].values())
    print(json.dumps({"set": name, "chosen": c.kernel, "note": c.note, "regret": truth[name][c.kernel][0] - best,
                      "rmse_over_rbf": truth[name][c.kernel][1] / truth[name]["rbf-ard"][1], "s": round(time.time() - t, 1)}), flush=True)
