"""One gss_wages fit of `gpscale bench tables`, with its warnings' messages and summary.

    python benchmarks/results/tables/extra/gss_seed.py SEED ['{"time_limit": 2400}']

Run from the repository root; the JSON is passed to ``gpscale.fit`` (e.g. ``method``,
``kernel``, ``budget``, ``time_limit``). One thread, as the benchmark runs it."""

import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import gpscale
from benchmarks.tables import _split
from gpscale.io import prediction_source

torch.set_num_threads(1)
seed = int(sys.argv[1])
options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
method = options.pop("method", "auto")
with tempfile.TemporaryDirectory() as folder:
    train, test = _split("gss_wages", seed, None, Path(folder))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        pred = gpscale.fit(str(train), target="realrinc", method=method, **options)
        fit_s = time.perf_counter() - t0
    for w in caught:
        print("WARN", type(w.message).__name__, str(w.message)[:400])
    print(pred.summary())
    means = [pred.predict_encoded(b.X) for b in prediction_source(pred, str(test)).batches()]
    y = pd.read_csv(test)["realrinc"].to_numpy()
    mean, keep = np.concatenate(means), ~np.isnan(y)
    print("fit_s", fit_s, "rmse", float(np.sqrt(np.mean((mean[keep] - y[keep]) ** 2))))
