"""A region node SIGKILLed under load from writers in all three regions, then restarted: every
XADD a client saw acknowledged is in every region exactly once, nothing deleted came back, the
killed region's PEL is back (entries at most re-delivered), and the logs fold to the digests."""

from __future__ import annotations

import time

from faults.workload import (
    check_dots,
    check_logs_fold_to_nodes,
    check_no_loss,
    check_pel,
    first_write,
    prepare,
    run_load,
    settle,
    summary,
)
from topology.local import LocalTopology

RATE = 60.0
"""Requests a second per region (three regions)."""


def test_a_node_killed_under_load_loses_no_acknowledged_write_and_converges() -> None:
    with LocalTopology(regions=3, manual_sync=False) as topo:
        prepare(topo)
        figures: dict[str, float] = {}

        def crash() -> None:
            time.sleep(2.0)
            topo.kill_node(2)
            killed = time.monotonic()
            time.sleep(0.5)
            topo.start_node(2)
            figures["restart_s"] = time.monotonic() - killed - 0.5
            assert first_write(topo.ports[2], 60) is not None, "r2 takes no write again"
            figures["kill_to_write_s"] = time.monotonic() - killed

        ledgers = run_load(topo, [1, 2, 3], seconds=6.0, rate=RATE, during=crash)
        settle(topo)
        print(
            f"\nnode crash: 3 regions x {RATE:g} req/s for 6 s, SIGKILL r2 at 2 s, "
            "restart 0.5 s later"
        )
        print(summary(ledgers))
        print(
            f"  r2 restart (spawn to PING) {figures['restart_s']:.2f}s, kill to first write "
            f"{figures['kill_to_write_s']:.2f}s"
        )
        counts = check_no_loss(topo, ledgers)
        print(f"  checked in every region: {counts}")
        pel = check_pel(topo.client(2), ledgers[1])
        print(f"  r2 PEL after restart: {pel}")
        check_logs_fold_to_nodes(topo)
        print("  every node's digest equals a fresh fold of its cluster's logs")
        dots = check_dots(topo)
        print(f"  op logs 1..n without repeats on every cluster: {dots}")
        assert ledgers[1].errors, "the kill went unnoticed by r2's writer"
