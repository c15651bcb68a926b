"""Fixtures of the pipeline tests: one SparkSession and one 3-region history for the session.

Why shared: a Spark JVM costs seconds to start and its first Python worker more, and the history
(brokers, mirrors, nodes) a couple more; every test here reads the same history and writes
nothing to it. Tests that must change a history (injected divergence, live streaming) start their
own small topology. Everything started here is stopped at the end of the session.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pyspark.sql import SparkSession

from streams.pipeline.session import spark_session
from topology.local import LocalTopology


@pytest.fixture(scope="package", autouse=True)
def one_spark_worker_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist (scripts/test.sh, phase 2), one worker at a time is in this package;
    the others go on with other tiers' modules, or wait here having started nothing.

    Why: Spark waits a fixed 10 s (PythonWorkerFactory, not configurable in Spark 4.3) for a
    Python worker it starts to connect back; with three workers running Spark jobs and their
    subprocess JVMs on 2 cores at once, a worker took longer and a streaming query failed with
    "Python worker failed to connect back" (CI, stop 46). The lock is taken before the Spark
    session and the history start (both fixtures ask for it), so a waiting worker holds no idle
    JVM or topology. The lock file lies in the run's shared base temp directory: the workers of
    one run share it, no two runs do. It did not stop the next CI run failing the same way (the
    other workers' brokers are load enough): the follow test also restarts a query Spark failed
    so (`spark_workers.py`).
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    path = tmp_path_factory.getbasetemp().parent / "spark-package.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="package")
def spark(one_spark_worker_at_a_time: None) -> Iterator[SparkSession]:
    session = spark_session("local[2]", shuffle_partitions=4, app="streams-tests")
    try:
        yield session
    finally:
        session.stop()


@dataclass
class History:
    topo: LocalTopology
    keys: list[bytes]


def write_history(topo: LocalTopology) -> list[bytes]:
    """Three regions writing concurrently: adds, deletes, trims, XDEL, groups with reads and
    acks, a destroyed group, duplicate IDs (semi-strict), synced in between and at the end."""
    c1, c2, c3 = (topo.client(i) for i in (1, 2, 3))
    for i in range(30):
        c1.xadd("orders", {"n": str(i), "by": "r1"})
        c2.xadd("orders", {"n": str(i), "by": "r2"})
    c3.xadd("events", {"e": "boot"})
    c1.xgroup_create("orders", "billing", id="0")
    topo.sync()
    c1.xreadgroup("billing", "alice", {"orders": ">"}, count=10)
    c1.xack("orders", "billing", *[e[0] for e in c1.xrange("orders", count=5)])
    c2.xtrim("orders", maxlen=40)
    c3.xadd("orders", {"late": "r3"})
    c1.xdel("orders", c1.xrange("orders", count=1)[0][0])
    c2.xadd("dup", {"from": "r2"}, id="5-1")
    c3.xadd("dup", {"from": "r3"}, id="5-1")
    c3.xgroup_create("events", "g", id="$")
    for i in range(10):
        c3.xadd("gone", {"i": str(i)})
    topo.sync()
    c2.delete("gone")
    c1.xadd("gone", {"after": "del"})  # concurrent with r2's DEL: observed-remove keeps it
    c3.xgroup_destroy("events", "g")
    c2.xadd("events", {"e": "r2"})
    topo.sync()
    return [b"orders", b"events", b"dup", b"gone"]


@pytest.fixture(scope="package")
def history(one_spark_worker_at_a_time: None) -> Iterator[History]:
    with LocalTopology(regions=3, manual_sync=True, id_mode="semi-strict") as topo:
        keys = write_history(topo)
        yield History(topo, keys)
