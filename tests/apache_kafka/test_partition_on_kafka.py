"""A region's cluster cut off the network for 30 s under a load of writers and group readers in
every region (each cluster on its own test host in a network namespace): every XADD a client saw
acknowledged is in every region exactly once, r1 and r3 take writes all along, r2 notices and
takes writes again after the link comes back. A module of its own: the process faults of
test_faults_on_kafka.py share a topology that lives until their module ends, and two sets of
three JVM clusters on 2 cores starve each other (CI failed so)."""

from __future__ import annotations

import time

import pytest
from faults.workload import first_write, run_load

from apache_kafka.hosts import available, hosts
from apache_kafka.test_faults_on_kafka import RATE, check_all, kafka_topology
from topology.local import LocalTopology

PARTITION_S = 30.0


def mirrormaker_ran_out_of_heap(topo: LocalTopology) -> bool:
    """Whether a MirrorMaker 2 process of `topo` logged an OutOfMemoryError."""
    return any(
        "OutOfMemoryError" in log.read_text(errors="replace")
        for log in (topo.workdir / "mm2").rglob("mirrormaker.log")
    )


def test_a_regions_cluster_cut_off_for_30_s_under_load_loses_and_doubles_nothing() -> None:
    why = available()
    if why is not None:
        pytest.skip(why)
    with hosts(3) as made:
        placed = {i: host.broker_host for i, host in made.items()}
        with kafka_topology(placed) as topo:
            figures: dict[str, float] = {}

            def partition() -> None:
                time.sleep(3.0)
                made[2].down()
                time.sleep(PARTITION_S)
                made[2].up()
                healed = time.monotonic()
                assert first_write(topo.ports[2], 120) is not None, "r2 takes no write again"
                figures["heal_to_write_s"] = time.monotonic() - healed

            ledgers = run_load(
                topo, [1, 2, 3], seconds=PARTITION_S + 8.0, rate=RATE, during=partition
            )
            print(
                f"\nr2's cluster cut off at 3 s for {PARTITION_S:g} s; r2 took writes"
                f" {figures['heal_to_write_s']:.1f} s after the link came back"
            )
            try:
                check_all(topo, ledgers)
            except TimeoutError as exc:
                if mirrormaker_ran_out_of_heap(topo):
                    # Seen when the cut let connections reach a proxy (`apache_kafka.hosts`).
                    raise AssertionError(
                        f"{exc}; MirrorMaker 2 logged an OutOfMemoryError: did a connection "
                        "to the cut-off host reach something that answered?"
                    ) from exc
                raise
            assert ledgers[1].errors, "the partition went unnoticed by r2's writer"
            assert not ledgers[0].outages and not ledgers[2].outages, (
                "r1 and r3 must take writes all along"
            )
