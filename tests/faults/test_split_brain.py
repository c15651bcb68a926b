"""Split brain: while writers run in all three regions, a second node process for region r1 starts
(same topology and region, another RESP port) and a writer of its own starts on it. The second
node's writer registers r1's transactional id, which fences the first: the old node refuses
writes with an error naming the fence (it keeps serving reads, following the new writer's log);
r1's op log never forks (seqs 1..n, each once, on every cluster); every write either node
acknowledged is in every region exactly once, and the logs fold to the nodes' digests.
"""

from __future__ import annotations

import time

import redis
from support import free_port, wait_until

from faults.workload import (
    Process,
    Writer,
    check_dots,
    check_no_loss,
    converge,
    fold_digest,
    plain_client,
    prepare,
    run_load,
    summary,
)
from topology.local import LocalTopology

RATE = 40.0
"""Requests a second per writer (three regions, and the second node of r1)."""
FENCED = "another writer took over region r1"
"""What a fenced node's refusals say (streams/node/kafka/writer.py: "... (fenced); this node no
longer accepts writes")."""


class SecondNode(Process):
    """Another `python -m streams.node` for a region of `topo`, on a port of its own."""

    def __init__(self, topo: LocalTopology, region: int) -> None:
        super().__init__(topo.workdir / f"node-r{region}-second.log")
        self.topo = topo
        self.region = region
        self.port = free_port()

    def run(self) -> None:
        """Start it and wait until it answers."""
        topology, name = str(self.topo.topology_path), self.topo.names[self.region]
        self.start(  # --takeover: the region's first node is live (else: refused, exit 3)
            "streams.node",
            *["--topology", topology, "--region", name, "--port", str(self.port), "--takeover"],
        )
        probe = plain_client(self.port, timeout=1)
        try:
            wait_until(lambda: self._answers(probe), timeout=60, interval=0.05)
        finally:
            probe.close()

    def _answers(self, probe: redis.Redis) -> bool:
        assert self.alive(), self.output()
        try:
            return bool(probe.ping())
        except redis.ConnectionError:
            return False


def first_refusal(port: int, timeout: float) -> str:
    """Write to the old node until it answers with an error that is not LOADING; its text."""
    client = plain_client(port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.xadd(b"probe:old", {b"p": b"x"})
            except redis.BusyLoadingError:
                pass
            except redis.ResponseError as exc:
                return str(exc)
            assert time.monotonic() < deadline, "the old node still takes writes"
            time.sleep(0.02)
    finally:
        client.close()


def test_a_second_node_for_a_region_fences_the_first_and_the_log_never_forks() -> None:
    with LocalTopology(regions=3, manual_sync=False) as topo:
        prepare(topo)
        second = SecondNode(topo, 1)
        marks: dict[str, float | str] = {}
        writers: list[Writer] = []
        try:

            def split() -> None:
                time.sleep(2.0)
                started = time.monotonic()
                second.run()
                marks["second_ready_s"] = time.monotonic() - started
                writer = Writer(topo, 1, RATE, port=second.port, tag="r1-second")
                writer.start()
                writers.append(writer)
                marks["old_refuses"] = first_refusal(topo.ports[1], 30)
                marks["old_refuses_after_s"] = time.monotonic() - started
                time.sleep(3.0)

            ledgers = run_load(topo, [1, 2, 3], seconds=0, rate=RATE, during=split, tail=1.0)
            ledgers += [w.stop() for w in writers]
            new = plain_client(second.port)
            nodes = {"r1": new, "r2": topo.client(2), "r3": topo.client(3)}
            converged_s = converge(nodes)
            old = topo.client(1)
            old_final = first_refusal(topo.ports[1], 5)
            digest = new.execute_command("CRDT.DIGEST")
            wait_until(lambda: old.execute_command("CRDT.DIGEST") == digest, timeout=30)
            print(
                f"\nsplit brain: 3 regions x {RATE:g} req/s; a second r1 node started 2 s in, "
                "with a writer of its own"
            )
            print(summary(ledgers))
            print(
                f"  second node serving {marks['second_ready_s']:.2f}s after its start; the old "
                f"node refused a write {marks['old_refuses_after_s']:.2f}s after that start: "
                f"{str(marks['old_refuses'])[:120]}"
            )
            print(f"  the old node still refuses at the end: {old_final[:100]}")
            print(f"  converged (new r1, r2, r3) {converged_s:.2f}s after the writers stopped")
            assert FENCED in str(marks["old_refuses"]), marks["old_refuses"]
            assert FENCED in old_final, old_final
            assert any(FENCED in error for error in ledgers[0].errors), ledgers[0].errors
            assert ledgers[3].added, "the second node acknowledged nothing"
            counts = check_no_loss(topo, ledgers, nodes={**nodes, "r1 (fenced node, reading)": old})
            print(f"  checked on the new r1, r2, r3 and the fenced r1: {counts}")
            for i in topo.ports:
                folded = fold_digest(topo.bootstrap[i], topo.names[i])
                assert folded == nodes[topo.names[i]].execute_command("CRDT.DIGEST").decode()
            print("  every region's logs fold to its (new) node's digest")
            dots = check_dots(topo)
            print(f"  op logs 1..n, none twice, on every cluster (no fork): {dots}")
        finally:
            for writer in writers:
                if writer.is_alive():
                    writer.stop()
            second.stop()
