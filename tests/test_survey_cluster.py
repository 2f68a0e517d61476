"""Issue 47: with a cluster given to a method that uses it, the survey pass that learns a
table's encoding runs as tasks on the workers (one per partition), and gives the levels
and encoding of the in-process survey; ``auto`` and methods that train in this process
survey here (whether a cluster is used is decided from what the survey finds)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpscale
from gpscale import cli
from gpscale.io import open_source
from gpscale.plan import survey_cluster

distributed = pytest.importorskip("distributed")
SRC = Path(gpscale.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None,
                                  env={"PYTHONPATH": os.fspath(SRC)}) as local, \
            distributed.Client(local) as c:
        yield c


def _files(folder, n=120, parts=3):
    """A messy table in ``parts`` Parquet files: text levels (one named "(missing)"),
    missing values, a date; the levels differ between files."""
    rng = np.random.default_rng(0)
    city = rng.choice(["Austin", "Dallas", "(missing)", None], n)
    city[: n // parts] = np.where(city[: n // parts] == "Dallas", "Austin", city[: n // parts])
    size = rng.uniform(50, 300, n)
    size[rng.random(n) < 0.2] = np.nan
    day = [f"2020-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(n)]
    y = rng.standard_normal(n)
    folder.mkdir()
    for k, idx in enumerate(np.array_split(np.arange(n), parts)):
        pq.write_table(pa.table({"city": pa.array(city[idx].tolist(), pa.string()),
                                 "size": size[idx], "sold": [day[i] for i in idx],
                                 "price": y[idx]}), folder / f"p{k}.parquet")
    return str(folder)


def _survey_tasks(stream):
    return [t for t in stream.data if "partition_survey" in str(t["key"])]


def test_the_survey_runs_on_the_workers_and_equals_the_in_process_one(client, tmp_path):
    data = _files(tmp_path / "t")
    here = open_source(data, target="price")
    with distributed.get_task_stream(client) as stream:
        there = open_source(data, target="price", client=client)
    assert len(_survey_tasks(stream)) == 3
    assert there.encoding == here.encoding
    assert there.encoding.code("city").levels == ("(missing)", "Austin", "Dallas")
    np.testing.assert_array_equal(there.to_arrays()[0], here.to_arrays()[0])


def test_a_fit_on_the_cluster_surveys_there(client, tmp_path):
    data = _files(tmp_path / "t")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.get_task_stream(client) as stream:
            remote = gpscale.fit(data, target="price", method="rff", scheduler=client,
                                 max_iter=3, seed=0)
        local = gpscale.fit(data, target="price", method="rff", max_iter=3, seed=0)
    assert len(_survey_tasks(stream)) == 3 and remote.inputs == local.inputs


def test_the_command_line_surveys_on_the_scheduler_it_is_given(client, tmp_path):
    data = _files(tmp_path / "t")
    with distributed.get_task_stream(client) as stream:
        assert cli.main(["fit", "-q", "--data", data, "--target", "price", "--method",
                         "rff", "--option", "max_iter=3", "--scheduler",
                         client.scheduler.address, "--out", str(tmp_path / "m.pt")]) == 0
    assert len(_survey_tasks(stream)) == 3


def test_only_a_named_method_that_uses_the_cluster_opens_it_first():
    assert survey_cluster("rff", "tcp://h:1", None) == ("tcp://h:1", None)
    assert survey_cluster("sgpr", None, 2) == (None, 2) or not gpscale.METHODS[
        "sgpr"].uses_cluster
    assert survey_cluster("auto", None, 2) == (None, None)
    assert survey_cluster("svgp", None, None) == (None, None)
    assert survey_cluster("no-such-method", None, 2) == (None, None)


def test_a_bad_request_is_refused_before_a_cluster_starts(monkeypatch):
    from gpscale import api

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was started for a request that cannot run")

    monkeypatch.setattr(api, "connect", refuse)
    with pytest.raises(ValueError, match="does not take option"):
        gpscale.fit(np.zeros((4, 1)), np.arange(4.0), method="rff", workers=2, bogus=1)
    with pytest.raises(ValueError, match="budget"):
        gpscale.fit(np.zeros((4, 1)), np.arange(4.0), method="rff", workers=2, budget=5)
