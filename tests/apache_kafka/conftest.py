"""The `apache_kafka` tier: the stack users deploy, Apache Kafka brokers (KRaft, one node per
region) replicated by MirrorMaker 2 (one dedicated-mode process per flow), as Java processes on
Kafka's jars from Maven Central (`scripts/kafka_jars.sh`, run by scripts/setup.sh).

Starting such a topology takes seconds of JVMs, so the seed tables share one per ID mode
(`kafka_topology`), each table on keys of its own (`KeyspaceDriver`); tests that break things
(faults) start their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from topology.jvm import kafka_libs
from topology.local import LocalTopology
from topology.replication import MirrorMakerReplication


def require_kafka() -> None:
    """Skip without Kafka's jars, except under CI (the `CI` environment variable), where a
    missing jar fails the tier: CI must really run it."""
    try:
        kafka_libs()
    except Exception as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"Apache Kafka is not set up here: {exc}")


class Topologies:
    """One three-region Kafka + MirrorMaker 2 topology for every ID mode: started on first
    use; a table of another ID mode restarts the nodes in that mode (`restart_nodes`) on the
    same brokers and MirrorMaker 2 processes, each table on keys of its own. A topology per
    mode cost ~40 s of JVM starts and stops each on 2 cores, the nodes' restart ~5 s."""

    def __init__(self) -> None:
        self.topology: LocalTopology | None = None

    def get(self, id_mode: str) -> LocalTopology:
        topo = self.topology
        if topo is None:
            topo = LocalTopology(
                regions=3,
                manual_sync=True,
                id_mode=id_mode,
                debug_clock=True,
                broker="kafka",
                mirror="mm2",
            )
            try:
                topo.start()
            except BaseException:
                topo.close()  # what did start (brokers, MirrorMaker 2, nodes) must not outlive it
                raise
            self.topology = topo
        elif topo.id_mode != id_mode:
            topo.restart_nodes(id_mode)
        return topo

    def close(self) -> None:
        if self.topology is not None:
            self.topology.close()
            self.topology = None


@pytest.fixture(scope="module")
def kafka_topologies() -> Iterator[Topologies]:
    require_kafka()
    topologies = Topologies()
    try:
        yield topologies
    finally:
        topologies.close()


@pytest.fixture(autouse=True)
def _kafka_set_up() -> None:
    """Every test of the tier needs Kafka's jars (`require_kafka`)."""
    require_kafka()


def assert_mirrormaker_never_rebootstrapped(topo: LocalTopology) -> None:
    """No MirrorMaker 2 client of this start rebootstrapped: Kafka 4's clients do so in a loop
    while no broker they know answers (a broker down, or ports a cluster no longer has) unless
    told not to (`metadata.recovery.strategy = none`, topology/mm2/README.md)."""
    replication = topo.replication
    assert isinstance(replication, MirrorMakerReplication)
    for process in replication.processes:
        assert "Rebootstrapping" not in process.log_since_start(), process.name
