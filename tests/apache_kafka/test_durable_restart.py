"""The durable default (`streams up`: Apache Kafka with MirrorMaker 2, data under a directory)
comes back with everything after 100,000 XADDs (pipelined and single, with groups and pending
entries): stopped cleanly and started again, then with every process SIGKILLed and started
again, each time on the brokers' addresses of before (MirrorMaker 2 keeps its connectors'
bootstrap servers in its config topics: on new ports its admin clients loop). The same at
1,000,000 is `python -m apache_kafka.durable_history` (docs/durability.md)."""

from __future__ import annotations

from pathlib import Path

from apache_kafka.conftest import assert_mirrormaker_never_rebootstrapped, require_kafka
from apache_kafka.durable_history import observe, snapshots_checked, topology, write_history

TOTAL = 100_000


def test_the_durable_default_restarts_with_everything_after_a_clean_stop_and_after_sigkill(
    tmp_path: Path,
) -> None:
    require_kafka()
    with topology(tmp_path, 2) as topo:
        write_history(topo.client(1), TOTAL)
        topo.sync(timeout=300)
        before = observe(topo)
        addresses = dict(topo.bootstrap)
    assert sum(before[1]["xlen"]) == TOTAL  # type: ignore[index]
    with topology(tmp_path, 2) as topo:
        print(f"\nclean restart: nodes serving after {topo.timings['nodes']:.1f} s")
        assert observe(topo) == before
        # each node served its snapshot before checking its digest; checked, it matched
        assert set(snapshots_checked(topo).values()) == {b"matched"}
        assert topo.bootstrap == addresses
        assert_mirrormaker_never_rebootstrapped(topo)
        topo.crash()
    with topology(tmp_path, 2) as topo:
        print(f"after SIGKILL of every process: nodes serving after {topo.timings['nodes']:.1f} s")
        assert observe(topo) == before
        assert set(snapshots_checked(topo).values()) == {b"matched"}
        assert topo.bootstrap == addresses
        topo.client(1).xadd(b"after", {b"f": b"v"})  # and it takes writes again
        topo.sync(timeout=60)
        assert topo.client(2).xlen(b"after") == 1
        assert_mirrormaker_never_rebootstrapped(topo)
