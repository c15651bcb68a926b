"""A region joining a running local topology (`LocalTopology.add_region`, issue 37 part C).

The steps, in this order, and why:

1. A fresh id and name (`streams.config.joining`): one above every id any region of the file
   ever had, removed ones included (`[[removed]]`): ids are never reused, so its dots, its
   strict-mode IDs and its topics collide with nothing an old reader still accepts.
2. Its broker starts (an empty cluster).
3. The topology file is rewritten with the region, and every running node is seen to follow it
   (CRDT.INFO `regions` names it; `streams.node.topology_watch`): from then on each node's causal
   stability waits for the new region, which as far as it knows has applied nothing, so no
   tombstone is collected anywhere until the new region's own ops say how far it got, and the
   record gate accepts its ops. This must come before step 4: a tombstone collected between
   the peer's snapshot and the moment the others count the new region could be one whose DEL
   the new region never saw in its state while it later receives an op concurrent with it.
4. A peer region (the lowest running id) takes a snapshot of each shard (CRDT.SNAPSHOT), after
   step 3; the seed files are made from it (`streams.node.kafka.join_seed`: its local part
   dropped, the new region's id, no positions).
5. Its nodes boot from the seed files: they serve the peer's state at once and create the
   region's topics on its cluster.
6. The mirrors are rebuilt with the new region (every other region's home log copied onto the
   new cluster from its beginning, the new region's log onto every other cluster, where the
   running materializers find the new topic within half a second); the new nodes read the
   copies as they arrive (every log from its start, ops the seed covers dropped by seq). The
   mirrors come last so that every flow's source topic exists when they start (the local
   MirrorMaker 2's start waits for each flow's task).

Writes go on everywhere meanwhile: nothing stops or pauses. The same steps serve both mirrors
(the embedded one, and MirrorMaker 2 rebuilt with the new cluster, as removal rebuilds it). Over
op logs a retention policy truncated, the embedded mirror fills the new cluster from each home
log's first record held (`joining`), which the peer's snapshot covers
(`streams.node.kafka.join_seed` says why); with MirrorMaker 2 that is not built and refused
before anything changes. A failure after step 3 leaves the file naming the new region (its nodes
then hold tombstone collection back): remove it (`remove_region(i, force=True)`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import redis

from streams.config import NodeConfig, RegionConfig, dumps
from streams.config import TopologyError as ConfigError
from streams.config.joining import next_region_id, with_region
from streams.node.kafka.join_seed import truncated_logs, truncation_refusal, write_seeds
from topology.brokers import make_broker
from topology.node_procs import TopologyError
from topology.ports import free_port
from topology.replication import make_replication

if TYPE_CHECKING:
    from topology.local import LocalTopology

WAIT_S = 60.0


def _refusal(topo: LocalTopology) -> str | None:
    if topo.external is not None:
        return "adding a region to an external topology: use `streams region add` on its file"
    if topo.data_dir is not None or topo.tls:
        return (
            "adding a region is built for ephemeral plaintext topologies only (no data_dir,"
            " no tls): a durable one started again would not know the new region's broker"
        )
    return None


def add_region(topo: LocalTopology, timeout: float = WAIT_S) -> int:
    assert topo.topology is not None and topo.replication is not None, "start the topology first"
    why = _refusal(topo)
    if why is not None:
        raise TopologyError(why)
    topology = topo.topology
    truncated = truncated_logs(list(topology.regions), topology.shards)
    if truncated and topo.mirror != "embedded":
        raise TopologyError(truncation_refusal(truncated, "with MirrorMaker 2"))
    try:
        new_id = next_region_id(topology)
    except ConfigError as exc:
        raise TopologyError(str(exc)) from None
    name = f"r{new_id}"
    broker = make_broker(topo.broker, name)
    broker.start()
    topo.brokers[new_id] = broker
    groups = topo._groups
    ports = [free_port() for _ in groups]
    region = RegionConfig(
        name=name,
        id=new_id,
        bootstrap=broker.bootstrap,
        resp_port=ports[0],
        id_mode=topo.id_mode,
        alias=f"c{new_id}",
        nodes=tuple(
            NodeConfig(k, "127.0.0.1", port, group)
            for k, (port, group) in enumerate(zip(ports, groups, strict=True))
        )
        if len(groups) > 1
        else (),
    )
    try:
        fresh = with_region(topology, region)
    except ConfigError as exc:
        raise TopologyError(str(exc)) from None
    peers = sorted(topo.ports)
    # 3. Every running node counts it before anything is taken from a peer.
    topo.topology = fresh
    topo.topology_path.write_text(dumps(fresh))
    started = time.monotonic()
    wait_following(topo, peers, name, timeout)
    topo.timings["join_followed"] = time.monotonic() - started
    # 4. The peer's snapshot, taken now.
    peer = peers[0]
    taken: dict[int, str] = {}
    for node, group in enumerate(groups):
        reply = topo._node_client(peer, node).execute_command("CRDT.SNAPSHOT")  # type: ignore[no-untyped-call]
        taken.update(zip(group, reply.decode().split(), strict=True))
    seeds = write_seeds(
        fresh.by_id(peer), taken, fresh.region(name), topo.workdir / "join", timeout=timeout
    )
    topo.timings["join_snapshot"] = time.monotonic() - started
    # 5. Its nodes, from the seeds (each creates the region's topics on its cluster).
    topo.names[new_id] = name
    topo.bootstrap[new_id] = broker.bootstrap
    topo.node_ports[new_id] = ports
    topo.ports[new_id] = ports[0]
    if topo.metrics:
        topo.node_metrics_ports[new_id] = [free_port() for _ in groups]
        topo.metrics_ports[new_id] = topo.node_metrics_ports[new_id][0]
    for node, group in enumerate(groups):
        topo._spawn(new_id, [a for s in group for a in ("--snapshot", str(seeds[s]))], node)
    for node in range(len(groups)):
        topo._wait_ready(new_id, timeout=timeout, node=node)
        _wait_serving(topo, new_id, node, timeout)
    # 6. Mirrors with the new region, its own log there to be copied.
    topo.replication.stop()
    topo.replication = make_replication(
        topo.mirror,
        fresh,
        topo.workdir,
        per_flow=topo.manual_sync,
        joining=frozenset({name}) if truncated else frozenset(),
    )
    topo.replication.start(copying=not topo.manual_sync)
    topo.timings["join_serving"] = time.monotonic() - started
    return new_id


def _fields(client: redis.Redis) -> dict[str, bytes]:
    info = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
    return {info[k].decode(): info[k + 1] for k in range(0, len(info), 2)}


def wait_following(topo: LocalTopology, regions: list[int], name: str, timeout: float) -> None:
    """Every node of `regions` has read the topology file naming region `name` (CRDT.INFO
    `regions` names it): they count it in causal stability and accept its records."""
    deadline = time.monotonic() + timeout
    for j in regions:
        for node in range(len(topo.node_ports[j])):
            client = topo._node_client(j, node)
            while name.encode() not in _fields(client).get("regions", b"").split():
                if time.monotonic() > deadline:
                    raise TopologyError(
                        f"{topo.names[j]}'s node {node} did not take region {name} from the"
                        f" topology file within {timeout:g} s; the file names it (remove it with"
                        " remove_region(..., force=True))"
                    )
                time.sleep(0.1)


def _wait_serving(topo: LocalTopology, i: int, node: int, timeout: float) -> None:
    """The node answers CRDT.INFO (not LOADING): it read its seed and the logs there were."""
    deadline = time.monotonic() + timeout
    client = topo._node_client(i, node)
    while True:
        try:
            _fields(client)
            return
        except redis.BusyLoadingError:
            if time.monotonic() > deadline:
                raise TopologyError(
                    f"region {topo.names[i]}'s node {node} did not serve within {timeout:g} s:\n"
                    + topo.node_log(i, node=node)
                ) from None
            time.sleep(0.05)
