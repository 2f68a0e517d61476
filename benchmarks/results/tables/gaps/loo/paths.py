"""Which of `bench tables`' fits can carry the leave-one-out widening: for each table's
seed-0 training split (complete and with 10 % of numeric cells removed), its gap
columns, the training rows, what `auto` picks and whether the exact GP would model the
gaps (its Cholesky path: :func:`gpscale.methods.kernel_choice.modelled_gaps`, the
decision the fit itself takes). No fit is run. python paths.py WORKDIR; prints JSON."""
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, ".")  # run from the checkout root
warnings.simplefilter("ignore")
from benchmarks.tables import TABLES, _split  # noqa: E402
from gpscale.api import resolve_kernel  # noqa: E402
from gpscale.io import training_data  # noqa: E402
from gpscale.io.scaling import scaled_in_memory  # noqa: E402
from gpscale.methods.kernel_choice import AUTO_KERNEL, modelled_gaps  # noqa: E402
from gpscale.methods.registry import get_method  # noqa: E402
from gpscale.plan import make_plan  # noqa: E402

work = Path(sys.argv[1])
work.mkdir(parents=True, exist_ok=True)
out = []
for remove in (0.0, 0.1):
    for name, (target, exclude) in TABLES.items():
        train, _ = _split(name, 0, None, work, remove)
        data = training_data(str(train), None, target, exclude=list(exclude))
        kernel, kname = resolve_kernel(AUTO_KERNEL, data.num_features, data.inputs)
        plan = make_plan(data, "auto", kernel, kernel_auto=True)
        _, Xs, _ = scaled_in_memory(data, True, kernel.raw_columns)
        gaps = data.inputs.gap_columns()
        exact = get_method("exact")
        modelled = modelled_gaps(exact, plan.options, Xs, gaps) \
            if plan.method.name == "exact" else ()
        out.append({"table": name, "remove_cells": remove, "rows": int(Xs.shape[0]),
                    "gap_columns": [data.inputs.names[c] for c in gaps],
                    "auto_picks": plan.method.name, "auto_options": str(plan.options),
                    "estimate_s": plan.choice.seconds,
                    "gaps_modelled_by_cholesky": bool(modelled)})
        print(json.dumps(out[-1]), flush=True)
