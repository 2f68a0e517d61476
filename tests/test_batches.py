"""ShuffledStream: minibatches from partitions through a shuffle buffer — every row once
per epoch, seeded, a new order each epoch, memory bounded by the buffer, the scaler
applied; and the run_minibatch hook that consumes it."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpscale.preprocessing import Standardizer
from gpscale.train.batches import ShuffledStream
from gpscale.train.minibatch import run_minibatch


class Part:
    """A partition of rows whose X[:, 0] is the row's id (X[:, 1] = -id, y = 2 id + 1);
    ``log`` counts the rows handed out by chunks()."""

    def __init__(self, start, size, log=None):
        ids = np.arange(start, start + size, dtype=np.float64)
        self.X, self.y = np.stack([ids, -ids], axis=1), 2 * ids + 1
        self.num_rows, self.log = size, log

    def chunks(self, rows):
        for s in range(0, self.num_rows, rows):
            if self.log is not None:
                self.log["read"] += len(self.y[s:s + rows])
            yield self.X[s:s + rows], self.y[s:s + rows]


def parts(sizes, log=None):
    starts = np.cumsum([0, *sizes])
    return [Part(int(a), int(k), log) for a, k in zip(starts, sizes)]


def ids(batches):
    return torch.cat([X[:, 0] for X, _ in batches]).long().tolist()


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=7).filter(lambda s: sum(s)),
       rows=st.integers(1, 50), buffer=st.integers(1, 150), batch=st.integers(1, 30),
       seed=st.integers(0, 2**31 - 1))
def test_every_row_exactly_once_per_epoch(sizes, rows, buffer, batch, seed):
    n, log = sum(sizes), {"read": 0}
    stream = ShuffledStream(parts(sizes, log), batch, buffer_rows=buffer, rows=rows, seed=seed)
    cap = max(buffer, batch)
    for _ in range(2):
        out, emitted = [], log["read"]
        for X, y in stream.epoch():
            # held rows: read but not yet handed out, at most the buffer plus one chunk
            assert log["read"] - emitted <= cap + rows - 1
            emitted += len(y)
            out.append((X, y))
        assert sorted(ids(out)) == list(range(n))  # every row, once
        assert [len(y) for _, y in out] == [batch] * (n // batch) + (
            [n % batch] if n % batch else [])
        assert len(out) == stream.batches_per_epoch == math.ceil(n / batch)
        for X, y in out:  # rows stay whole
            assert X.dtype == y.dtype == torch.float64
            assert torch.equal(X[:, 1], -X[:, 0]) and torch.equal(y, 2 * X[:, 0] + 1)


@settings(max_examples=50, deadline=None)
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=5), batch=st.integers(1, 9),
       buffer=st.integers(1, 80), seed=st.integers(0, 2**31 - 1))
def test_seeded_reproducible(sizes, batch, buffer, seed):
    def run(s):
        stream = ShuffledStream(parts(sizes), batch, buffer_rows=buffer, rows=7, seed=s)
        return [ids(stream.epoch()) for _ in range(3)]

    assert run(seed) == run(seed)
    gen = torch.Generator().manual_seed(seed)  # a generator given to epoch() is used
    stream = ShuffledStream(parts(sizes), batch, buffer_rows=buffer, rows=7, seed=seed + 1)
    assert [ids(stream.epoch(gen)) for _ in range(3)] == run(seed)


@pytest.mark.parametrize("sizes, buffer, batch", [
    ([50] * 8, 50, 10),     # a buffer of one partition
    ([50] * 8, 400, 10),    # all rows
    ([400], 40, 8),         # one partition: only the buffer shuffles
    ([13, 7, 40, 1, 19], 5, 5),
])
def test_each_epoch_a_new_order_and_seeds_differ(sizes, buffer, batch):
    stream = ShuffledStream(parts(sizes), batch, buffer_rows=buffer, rows=16, seed=0)
    orders = [ids(stream.epoch()) for _ in range(3)]
    assert orders[0] != orders[1] != orders[2] != orders[0]
    other = ShuffledStream(parts(sizes), batch, buffer_rows=buffer, rows=16, seed=1)
    assert ids(other.epoch()) != orders[0]


def test_partitions_are_visited_in_a_random_order():
    # a buffer of one partition read whole: an epoch's first batch is from the first
    # partition visited, which changes from epoch to epoch
    stream = ShuffledStream(parts([50] * 8), 10, buffer_rows=50, rows=50, seed=0)
    first = [int(next(iter(stream.epoch()))[0][0, 0]) // 50 for _ in range(100)]
    assert sorted(set(first)) == list(range(8))


def test_buffer_of_all_rows_mixes_every_partition_and_no_buffer_keeps_file_order():
    full = ShuffledStream(parts([100] * 6), 60, buffer_rows=600, rows=25, seed=3)
    first = next(iter(full.epoch()))[0][:, 0].long()
    assert len(set((first // 100).tolist())) == 6  # one batch holds rows of every file
    none = ShuffledStream(parts([100]), 1, buffer_rows=1, rows=1, seed=3)
    assert ids(none.epoch()) == list(range(100))  # nothing to shuffle with
    chunk = ShuffledStream(parts([100]), 1, buffer_rows=1, rows=25, seed=3)
    got = ids(chunk.epoch())  # the rows of a chunk in memory are shuffled together
    assert got != list(range(100)) and [sorted(got[s:s + 25]) for s in range(0, 100, 25)] \
        == [list(range(s, s + 25)) for s in range(0, 100, 25)]

    def mean_span(buffer):  # files a batch of 10 rows draws from, on average
        stream = ShuffledStream(parts([100] * 6), 10, buffer_rows=buffer, rows=25, seed=3)
        return np.mean([len(set((X[:, 0].long() // 100).tolist())) for X, _ in stream.epoch()])

    # a buffer of one file mixes a few neighbouring files; all rows: 6(1 - (5/6)^10) ≈ 5
    assert 2 < mean_span(100) < 3.5 < 4.5 < mean_span(600) < 5.5


def test_scaler_dtype_device_and_plain_pass():
    X = np.random.default_rng(0).normal(3.0, 5.0, (90, 2))
    y = X[:, 0] * 2 + 1
    sc = Standardizer.fit(X, y)

    class Raw:
        num_rows = 90

        def chunks(self, rows):
            for s in range(0, 90, rows):
                yield X[s:s + rows], y[s:s + rows]

    stream = ShuffledStream([Raw()], 16, scaler=sc, buffer_rows=32, rows=10, seed=0,
                            dtype=torch.float32, device="cpu")
    Xb, yb = next(iter(stream.epoch()))
    assert Xb.dtype == yb.dtype == torch.float32 and Xb.shape == (16, 2)
    got = torch.cat([c[0] for c in stream.chunks()]).double()
    torch.testing.assert_close(got, torch.as_tensor(sc.transform_x(X)), rtol=1e-6, atol=1e-6)
    assert abs(float(torch.cat([c[1] for c in stream.chunks()]).double().mean())) < 1e-6


def test_bad_arguments_and_rows_without_target():
    with pytest.raises(ValueError, match="partitions is empty"):
        ShuffledStream([], 4)
    for kw in ({"buffer_rows": 0}, {"rows": 0}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            ShuffledStream(parts([5]), 2, **kw)
    with pytest.raises(ValueError, match="batch_size"):
        ShuffledStream(parts([5]), 0)

    class NoTarget(Part):
        def chunks(self, rows):
            yield self.X, None

    with pytest.raises(ValueError, match="no target"):
        list(ShuffledStream([NoTarget(0, 4)], 2).epoch())


def test_run_minibatch_batches_hook_gets_the_loop_generator_and_is_closed():
    seen, closed, gens = [], [], []

    def batches(gen):
        gens.append(gen)
        try:
            for k in range(4):
                yield ("batch", k)
        finally:
            closed.append(True)

    def step(batch, t):
        seen.append(batch)
        return 1.0

    res = run_minibatch(step, [torch.zeros(1)], n=16, batch_size=4, epochs=1.5, seed=5,
                        batches=batches)
    assert res.n_evals == 6 and seen == [("batch", k) for k in (0, 1, 2, 3, 0, 1)]
    assert len(closed) == 2  # the second epoch stopped half way and was closed
    assert gens[0] is gens[1] and gens[0].initial_seed() == 5
