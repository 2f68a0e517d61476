import sys, torch
a = torch.load(sys.argv[1]); b = torch.load(sys.argv[2])
for k in a:
    if k not in b: print(k, "missing after"); continue
    sa, sb = a[k]["state"], b[k]["state"]
    same = sa.keys() == sb.keys() and all(torch.equal(sa[s], sb[s]) for s in sa)
    pm = torch.equal(a[k]["mean"], b[k]["mean"]) and torch.equal(a[k]["std"], b[k]["std"])
    dp = max(((sa[s].double() - sb[s].double()).abs().max() / sa[s].double().abs().max().clamp_min(1e-300)).item()
             for s in sa if sa[s].numel() and sa[s].is_floating_point())
    dm = ((a[k]["mean"] - b[k]["mean"]).abs().max() / a[k]["mean"].abs().max()).item()
    ds = ((a[k]["std"] - b[k]["std"]).abs().max() / a[k]["std"].abs().max()).item()
    print(f"{k:16s} state_identical={same} predictions_identical={pm} max_rel_param_diff={dp:.2e} max_rel_mean_diff={dm:.2e} max_rel_std_diff={ds:.2e}")
