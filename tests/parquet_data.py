"""Synthetic rows and Parquet folders shared by the streaming tests."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def make_data(n, seed=0):
    """Three columns on very different scales, y a smooth function of two + noise 0.1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3)) * [1.0, 50.0, 0.01] + [0.0, 1000.0, 0.0]
    y = np.sin(2 * X[:, 0]) + X[:, 1] / 100 + 0.1 * rng.standard_normal(n) + 7.0
    return X, y


def write_parquet(folder, X, y, parts=3, row_group=150):
    """``parts`` Parquet files (columns a, b, c, y) in ``folder``, row groups of
    ``row_group`` rows; returns the folder."""
    folder.mkdir(exist_ok=True)
    for k, idx in enumerate(np.array_split(np.arange(len(y)), parts)):
        table = pa.table({"a": X[idx, 0], "b": X[idx, 1], "c": X[idx, 2], "y": y[idx]})
        pq.write_table(table, folder / f"part-{k}.parquet", row_group_size=row_group)
    return folder
