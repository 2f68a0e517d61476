import sys, tempfile, warnings, numpy as np
sys.path.insert(0, ".")
warnings.simplefilter("ignore")
from pathlib import Path
from types import SimpleNamespace
from benchmarks.tables import _split, TABLES
from gpscale.io import training_data, prediction_source
with tempfile.TemporaryDirectory() as d:
    for remove in (0.0, 0.1):
        for name, (target, excl) in TABLES.items():
            tr, te = _split(name, 0, None, Path(d), remove)
            data = training_data(str(tr), None, target, exclude=list(excl) or None)
            src = prediction_source(SimpleNamespace(inputs=data.inputs), str(te))
            gapped = sum(int(np.isnan(b.X).any(axis=1).sum()) for b in src.batches())
            print(remove, name, "test rows with a never-seen value (encoded NaN):", gapped)
