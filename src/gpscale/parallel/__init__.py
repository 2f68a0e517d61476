"""Work over row partitions, in this process or on a dask cluster:
:mod:`~gpscale.parallel.reduce` sums partition results along one fixed tree and turns a
partition's computed value into rows (pure, no dask); :mod:`~gpscale.parallel.cluster`
is the one module that imports dask (connecting, tasks, error translation)."""
