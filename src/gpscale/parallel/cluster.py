"""The seam to dask.distributed, and the one module of the library that imports dask:
connecting (:func:`connect`), sending objects and tasks to the workers and gathering
their results, the per-partition maps and tree sums as tasks, the dask collections a
source reads, the workers' torch threads, and dask's errors said in one line.

Tasks run the pure functions of the layers that own them (the feature statistics, the
kernel products, the moments pass); the partition results are summed along the tree of
:mod:`gpscale.parallel.reduce`, so a cluster gives the in-process numbers. A partition
with a ``delayed`` (see :mod:`gpscale.parallel.reduce`) is computed where its
collection lives and its task follows it there.

dask.distributed is optional (``pip install 'gpscale[distributed]'``) and imported only
when a cluster or a dask collection is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from .reduce import FAN_IN, as_partition, sum_results

_INSTALL = "pip install 'gpscale[distributed]'"
#: set for the worker processes of :func:`connect`'s local cluster; ``gpscale/__init__``
#: reads it (by this name) to ignore SIGINT there
LOCAL_WORKER_ENV = "GPSCALE_LOCAL_WORKER"
_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[\w.-]+):(\d{1,5})$")


def worker_threads() -> None:
    """On a dask worker, let torch use the worker's threads (once per process; a
    no-op here, so the client's torch settings are never touched)."""
    dist = sys.modules.get("distributed")
    if dist is None:
        return
    try:
        worker = dist.get_worker()
    except ValueError:
        return
    state = getattr(worker, "state", worker)
    threads = max(1, int(state.nthreads))
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


# -- objects and tasks on the workers -------------------------------------------------

def scatter(client: Any, value: Any, *, broadcast: bool = False,
            workers: Sequence[str] | None = None) -> Any:
    """``value`` sent to the workers (to every one with ``broadcast``, else to
    ``workers``): a future, or a list of futures for a list."""
    return client.scatter(value, broadcast=broadcast, workers=workers, hash=False)


def submit(client: Any, fn: Callable[..., Any], *args: Any,
           workers: Sequence[str] | None = None, **kwargs: Any) -> Any:
    """A future of ``fn(*args, **kwargs)`` run as a task (on ``workers`` when given);
    futures among the arguments are their values there."""
    return client.submit(fn, *args, workers=workers, pure=False, **kwargs)


def gather(client: Any, futures: Sequence[Any]) -> list:
    """The results of ``futures``, in order."""
    return client.gather(futures)


def result(future: Any) -> Any:
    """The result of one task, waited for."""
    return future.result()


def compute(client: Any, delayed: Any) -> Any:
    """A future of a dask ``Delayed``, computed on the cluster where its data live."""
    return client.compute(delayed)


def worker_info(client: Any) -> dict[str, dict[str, Any]]:
    """The scheduler's description of each worker, by address."""
    return client.scheduler_info().get("workers", {})


# -- maps and sums over items and partitions ------------------------------------------

def fold_map(client: Any, fn: Callable[..., Any], items: Iterable[Any], **shared: Any) -> list:
    """``[fn(item, **shared) for item in items]``, in order: a loop when ``client`` is
    None, else one task per item (e.g. K-fold ADMM folds, CholQR candidate batches).

    ``fn`` must be a pure, module-level function (it is pickled by reference, and the
    items and results must pickle too); each ``shared`` value is sent to the cluster
    once, not once per item. Torch uses the worker's thread count inside ``fn``."""
    items = list(items)
    if client is None:
        return [fn(item, **shared) for item in items]
    shipped = {k: client.scatter([v], hash=False)[0] for k, v in shared.items()}
    futures = [client.submit(_call, fn, item, pure=False, **shipped) for item in items]
    return client.gather(futures)


def _call(fn: Callable[..., Any], item: Any, **shared: Any) -> Any:
    worker_threads()
    return fn(item, **shared)


def map_partitions(client: Any, fn: Callable[..., Any], partitions: Sequence[Any],
                   *args: Any) -> list:
    """``[fn(partition, *args) for partition in partitions]``, in order: a loop when
    ``client`` is None, else one task per partition, where its data live."""
    if client is None:
        return [fn(p, *args) for p in partitions]
    futures = []
    for part in partitions:
        delayed = getattr(part, "delayed", None)
        if delayed is None:
            futures.append(client.submit(fn, part, *args, pure=False))
        else:
            futures.append(client.submit(_on_value, fn, client.compute(delayed),
                                         getattr(part, "to_xy", None), *args, pure=False))
    return client.gather(futures)


def _on_value(fn: Callable[..., Any], value: Any, to_xy: Any, *args: Any) -> Any:
    return fn(as_partition(value, to_xy), *args)


def sum_over_partitions(client: Any, fn: Callable[..., Any], partitions: Sequence[Any],
                        features: Any, scaler: Any, rows: int | None, *args: Any,
                        dtype: torch.dtype | None = None) -> Any:
    """Σ ``fn(features, partition, scaler, rows, *args, dtype=dtype)`` over the
    partitions: one task per partition, then sums of FAN_IN consecutive results on the
    workers until one remains (:func:`gpscale.parallel.reduce.stream_sum`'s tree);
    only that one comes back to the client."""
    # the feature map (and G, g) go to every worker once per call, not once per task
    features, *args = client.scatter([features, *args], broadcast=True, hash=False)
    level = []
    for part in partitions:
        delayed = getattr(part, "delayed", None)
        if delayed is None:
            level.append(client.submit(fn, features, part, scaler, rows, *args, dtype=dtype,
                                       pure=False))
        else:  # computed where the collection lives; the statistics task follows it there
            value = client.compute(delayed)
            level.append(client.submit(_on_rows, fn, features, value,
                                       getattr(part, "to_xy", None), scaler, rows, *args,
                                       dtype=dtype, pure=False))
    while len(level) > 1:
        level = [group[0] if len(group) == 1 else client.submit(sum_results, group,
                                                                  pure=False)
                 for group in (level[s : s + FAN_IN] for s in range(0, len(level), FAN_IN))]
    return level[0].result()


def _on_rows(fn: Callable[..., Any], features, value, to_xy, *args: Any, dtype=None) -> Any:
    return fn(features, as_partition(value, to_xy), *args, dtype=dtype)


# -- dask collections (a source's partitions) -----------------------------------------

def delayed_call(fn: Callable[..., Any], *args: Any) -> Any:
    """A dask ``Delayed`` of ``fn(*args)`` (the arguments may be ``Delayed`` too)."""
    import dask

    return dask.delayed(fn)(*args)


def compute_together(values: Sequence[Any]) -> tuple:
    """The values of dask objects, computed in one go by dask's current scheduler."""
    import dask

    return dask.compute(*values)


def dask_array(a: Any) -> Any:
    """An in-memory array as a ``dask.array``."""
    import dask.array as da

    return da.from_array(a)


# -- connecting -----------------------------------------------------------------------

@contextlib.contextmanager
def connect(scheduler: Any = None, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for the duration of a ``with`` block, or None.

    ``scheduler``: an address ``"tcp://host:port"`` (closed on exit) or an existing
    ``Client`` (left open); ``workers=N``: a new ``LocalCluster`` of N single-threaded
    worker processes that ignore SIGINT (:func:`_workers_ignore_sigint`), shut down on exit,
    Ctrl-C included; neither: None, i.e. compute in-process.

    An address is probed first, within dask's ``distributed.comm.timeouts.connect``
    (30 s by default; ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=60s`` to change it):
    dask itself waits forever for the greeting of a server that accepts the connection
    and never answers. A server that is not a dask scheduler, a scheduler lost during
    the block and a task every worker died on are each a ConnectionError in one line
    (see :func:`_cluster_errors`), not dask's internal errors."""
    if scheduler is not None and workers is not None:
        raise ValueError("give either scheduler= (a running cluster) or workers= (a local "
                         f"one), not both; got scheduler={scheduler!r}, workers={workers!r}")
    if scheduler is None and workers is None:
        yield None
        return
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) \
                or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        dist = _import_distributed()
        # no dashboard, and its server on a free port: a busy 8787 is no warning
        with _workers_ignore_sigint(), \
                dist.LocalCluster(n_workers=0, threads_per_worker=1, processes=True,
                                  dashboard_address=None, scheduler_kwargs={
                                      "dashboard": False, "dashboard_address": ":0"}
                                  ) as cluster, \
                dist.Client(cluster) as client, _cluster_errors(client, "the local cluster"):
            cluster.scale(int(workers))  # started inside the block: Ctrl-C closes them
            client.wait_for_workers(int(workers), timeout=max(60.0, 2 * connect_timeout()))
            yield client
        return
    if isinstance(scheduler, str):
        match = _ADDRESS.match(scheduler.strip())
        if not match or int(match.group(1)) > 65535:
            raise ValueError(f"scheduler must be an address like 'tcp://host:8786', got "
                             f"{scheduler!r}")
        address = scheduler.strip()
        dist = _import_distributed()
        _probe(address, connect_timeout())
        where = f"the dask scheduler at {address}"
        with dist.Client(address) as client, _cluster_errors(client, where):
            yield client
        return
    dist = _import_distributed()
    if not isinstance(scheduler, dist.Client):
        raise ValueError("scheduler must be an address like 'tcp://host:8786' or a "
                         f"distributed.Client, got {type(scheduler).__name__}")
    with _cluster_errors(scheduler, f"the dask scheduler at {_address_of(scheduler)}"):
        yield scheduler


@contextlib.contextmanager
def _workers_ignore_sigint() -> Iterator[None]:
    """Worker processes started in the block ignore SIGINT: they inherit
    :data:`LOCAL_WORKER_ENV`, and ``import gpscale`` (their first import: a spawned
    process re-imports the parent's main module) then ignores it. Ctrl-C at a terminal
    reaches the whole process group; the client, on its KeyboardInterrupt, cancels its
    tasks and closes the cluster, instead of each worker dying with a traceback."""
    before = os.environ.get(LOCAL_WORKER_ENV)
    os.environ[LOCAL_WORKER_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(LOCAL_WORKER_ENV, None)
        else:
            os.environ[LOCAL_WORKER_ENV] = before


def connect_timeout() -> float:
    """Seconds to wait for a scheduler to answer: dask's
    ``distributed.comm.timeouts.connect`` (environment:
    ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT``)."""
    try:
        import dask.config
        from dask.utils import parse_timedelta
    except ImportError as err:
        raise ImportError(f"running on a dask cluster needs dask.distributed: {_INSTALL}") \
            from err
    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))


_RAISE_TIMEOUT = "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=60s raises the limit"


def _probe(address: str, timeout: float) -> None:
    """Connect to ``address`` and exchange dask's greeting, all within ``timeout``
    seconds (plus a second's grace, so that dask's own connect timeout speaks first for
    a port nobody listens on); ConnectionError saying what went wrong otherwise. Runs
    in a thread of its own (with its own event loop), so it works under a running loop
    too (Jupyter) and is abandoned, not awaited, when it hangs."""
    outcome: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(_greet(address, timeout), timeout + 1.0))
            outcome["error"] = None
        except BaseException as err:  # noqa: BLE001 - reported by the caller's thread
            outcome["error"] = err

    worker = threading.Thread(target=run, name="gpscale-probe", daemon=True)
    worker.start()
    worker.join(timeout + 5.0)
    if "error" not in outcome or isinstance(outcome["error"], asyncio.TimeoutError):
        raise ConnectionError(f"{address} accepted the connection but did not answer within "
                              f"{timeout:g} s, as a dask scheduler does at once: check that "
                              f"the address is a running dask scheduler ({_RAISE_TIMEOUT})")
    err = outcome["error"]
    if err is None:
        return
    if isinstance(err, OSError):
        raise ConnectionError(f"cannot reach a dask scheduler at {address} within "
                              f"{timeout:g} s ({_first_line(err)}); check the address and "
                              f"that the scheduler is running ({_RAISE_TIMEOUT})") from None
    raise ConnectionError(f"{address} answered, but not as a dask scheduler does "
                          f"({type(err).__name__}: {_first_line(err)}): it is not a dask "
                          "scheduler, or not one this dask can talk to; check the address "
                          "and port") from None


async def _greet(address: str, timeout: float) -> None:
    from distributed.comm import connect as comm_connect

    comm = await comm_connect(address, timeout=timeout)
    await comm.close()


@contextlib.contextmanager
def _cluster_errors(client: Any, where: str) -> Iterator[None]:
    """Errors inside the block that come from the cluster, in one line naming ``where``
    (ConnectionError): the scheduler lost (dask then fails with whatever it was doing,
    e.g. an AttributeError of a closed client), a task killed on every worker it was
    tried on, a task cancelled. Other errors pass unchanged."""
    try:
        yield
    except Exception as err:
        message = _cluster_failure(client, err, where)
        if message is None:
            raise
        raise ConnectionError(message) from err


def _cluster_failure(client: Any, err: Exception, where: str) -> str | None:
    """What went wrong on the cluster to cause ``err``, or None when it is not the
    cluster's doing."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError, FuturesCancelledError
    from distributed.comm import CommClosedError

    detail = f"{type(err).__name__}: {_first_line(err)}"
    if getattr(client, "status", "running") not in ("running", "closing") \
            or isinstance(err, (CommClosedError, ConnectionError)):
        return (f"lost the connection to {where} while in use ({detail}); check that "
                "the scheduler is running and run again")
    if isinstance(err, KilledWorker):
        return (f"a worker of {where} died running a task, and so did every other worker "
                f"it was given to ({detail}); look at the workers' logs (memory?)")
    if isinstance(err, (FutureCancelledError, FuturesCancelledError)):
        return (f"{where} cancelled a task ({detail}); a worker holding its data "
                "may have died, or the scheduler restarted: run again")
    return None


def _address_of(client: Any) -> str:
    scheduler = getattr(client, "scheduler", None)
    return str(getattr(scheduler, "address", None) or "(unknown address)")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no message"


@contextlib.contextmanager
def quiet_logs(on_cluster: bool) -> Iterator[None]:
    """dask.distributed's own log records off in this process while a fit uses a
    cluster: when the scheduler goes away, dask logs tracebacks as it retries and gives
    up, and the one-line error (:func:`connect` names the lost scheduler) says it all.
    Here, not in the command line, because this is the one module that imports dask."""
    if not on_cluster:
        yield
        return
    try:
        import distributed  # noqa: F401  (its logging set-up first)
    except ImportError:  # connect() says what to install
        yield
        return
    logs = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
            if name.split(".")[0] == "distributed"]  # dask sets some children's levels
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for log, level in zip(logs, levels):
            log.setLevel(level)


def _import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(f"running on a dask cluster needs dask.distributed: {_INSTALL}") \
            from err
    return distributed
