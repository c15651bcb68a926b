"""A region leaving a running local topology (`LocalTopology.remove_region`, issue 37 part B).

Why these steps, in this order:

1. The region's nodes stop: it writes nothing more.
2. Unless forced, everything it wrote reaches every other region first: its mirrors copy its op
   log to the end and each other region must have applied its ops up to its own last seq, else
   the removal is refused (its mirrors still run; nothing changed). With `force`, ops it wrote
   that a mirror had not copied yet are lost: no region applies them, and an op of another region
   that had seen one of them waits in every causal buffer that lacks it (docs/architecture.md,
   "Retention and new regions").
3. The topology file is rewritten with the region under `[[removed]]`: the running nodes follow
   it within about a second (`streams.node.topology_watch`): causal stability stops waiting for
   the region, so tombstones are collected again; its old records stay valid everywhere; its
   name and id can never be used again (`Topology` refuses them).
4. The mirrors are rebuilt without it (MirrorMaker 2 resumes each remaining flow from its
   committed offsets, the embedded mirror from what each target holds), and its broker stops.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from streams.config import TopologyError as ConfigError
from streams.config import dumps
from topology.node_procs import TopologyError
from topology.replication import make_replication

if TYPE_CHECKING:
    from topology.local import LocalTopology

WAIT_S = 60.0


def remove_region(
    topo: LocalTopology, i: int, force: bool = False, timeout: float = WAIT_S
) -> None:
    assert topo.topology is not None and topo.replication is not None, "start the topology first"
    if i in topo.removed:
        raise TopologyError(f"region {topo.removed[i]} (id {i}) was already removed")
    if i not in topo.ports:
        raise TopologyError(f"no region {i}: regions are {sorted(topo.ports)}")
    name = topo.names[i]
    try:
        fresh = topo.topology.without(name)  # refuses removing the only region
    except ConfigError as exc:
        raise TopologyError(str(exc)) from None
    others = [j for j in sorted(topo.ports) if j != i]
    own = _own_seq(topo, i)
    for key in [k for k in list(topo._procs) if k[0] == i]:
        topo._terminate(key)
    if not force:
        _drain(topo, i, others, own, timeout)
    topo.replication.stop()
    topo.topology = fresh
    topo.topology_path.write_text(dumps(fresh))
    topo.removed[i] = name
    for table in (topo.ports, topo.node_ports, topo.metrics_ports, topo.node_metrics_ports):
        table.pop(i, None)
    topo.replication = make_replication(topo.mirror, fresh, topo.workdir, per_flow=topo.manual_sync)
    topo.replication.start(copying=not topo.manual_sync)
    broker = topo.brokers.pop(i, None)
    if broker is not None:
        broker.stop()
    _wait_followed(topo, others, name, timeout)


def _own_seq(topo: LocalTopology, i: int) -> int | None:
    """What region i wrote (its own seq summed over shards), asked of its nodes; None when a
    node does not answer."""
    try:
        return topo.vector(i).get(topo.names[i], 0)
    except Exception:
        return None


def _drain(topo: LocalTopology, i: int, others: list[int], own: int | None, timeout: float) -> None:
    """Copy region i's log to every other region and wait until each applied all of it."""
    name = topo.names[i]
    if own is None:
        raise TopologyError(
            f"region {name}'s nodes did not say how far they wrote: whether every other region"
            " has its ops cannot be checked; remove it with force=True (ops of it that were not"
            " copied yet are lost)"
        )
    assert topo.replication is not None
    names = [topo.names[j] for j in [*others, i]]
    deadline = time.monotonic() + timeout
    try:
        while True:
            topo.replication.copy_among(names, timeout)
            behind = {
                topo.names[j]: got for j in others if (got := topo.vector(j).get(name, 0)) < own
            }
            if not behind:
                return
            if time.monotonic() > deadline:
                raise TopologyError(
                    f"region {name} wrote {own} ops, but "
                    + ", ".join(f"{r} applied {n}" for r, n in behind.items())
                    + f" within {timeout:g} s: its mirrors have not copied them; it is not"
                    " removed, its nodes stay stopped (try again, or force=True: ops of it not"
                    " copied yet are lost)"
                )
            time.sleep(0.05)
    finally:
        topo.replication.hold()


def _wait_followed(topo: LocalTopology, others: list[int], name: str, timeout: float) -> None:
    """Every remaining node has read the new file (CRDT.INFO `regions` no longer names it)."""
    deadline = time.monotonic() + timeout
    for j in others:
        for node in range(len(topo.node_ports[j])):
            client = topo._node_client(j, node)
            while True:
                info = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
                fields = {info[k].decode(): info[k + 1] for k in range(0, len(info), 2)}
                if name.encode() not in fields.get("regions", b"").split():
                    break
                if time.monotonic() > deadline:
                    raise TopologyError(f"{topo.names[j]}'s node {node} still waits for {name}")
                time.sleep(0.1)
