"""`streams region add NAME --bootstrap HOST:PORT --port N`: a region joins a running topology
(issue 37, part C; `topology.join` does the same for `LocalTopology`, and says why the steps come
in this order).

1. The topology file gains the region under an id no region of the file ever had (`--id`, else one
   above every id ever used; a removed region's id or name is refused).
2. Every node of the other regions must be seen to follow the file (CRDT.INFO `regions` names the
   new region): they count it in causal stability from then on, so no tombstone it could still
   need is collected. A node that does not answer or follow within `--timeout` stops the command
   here (exit 1); run it again: a file that already names the region as given is not rewritten.
3. A peer region (`--from`, else the first other region) takes a snapshot of each shard now
   (CRDT.SNAPSHOT), and the seed files of the new region are written from it under
   `--seed-dir` (`streams.node.kafka.join_seed`: the peer's local part dropped, no positions).
4. The operator then starts the mirrors to and from the new cluster (`streams up --topology FILE`
   restarted, or MirrorMaker 2 configured with the new cluster) and the new region's nodes with
   the seed files (`--snapshot`), as the command prints.

Refused while a retention policy has deleted records from a home op log (the join over truncated
logs is not built: `streams.node.kafka.join_seed` says why).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import redis

from streams import exits
from streams.config import RegionConfig, Topology, TopologyError, dump, load
from streams.config.joining import next_region_id, with_region


def _client(node_bind: str, port: int, password: str | None) -> redis.Redis:
    return redis.Redis(host=node_bind, port=port, socket_timeout=5, password=password)


def _regions_of(client: redis.Redis) -> list[str]:
    flat = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
    info = {flat[k].decode(): flat[k + 1] for k in range(0, len(flat), 2)}
    return [name.decode() for name in info.get("regions", b"").split()]


def _not_following(topology: Topology, name: str, password: str | None, timeout: float) -> str:
    """Which nodes of the other regions do not name region `name` within `timeout` ("": none)."""
    deadline = time.monotonic() + timeout
    waiting = [
        (region.name, node)
        for region in topology.regions
        if region.name != name
        for node in region.nodes
    ]
    why: dict[str, str] = {}
    while waiting and time.monotonic() < deadline:
        for region_name, node in list(waiting):
            client = _client(node.bind, node.resp_port, password)
            try:
                if name in _regions_of(client):
                    waiting.remove((region_name, node))
                    why.pop(f"{region_name} node {node.index}", None)
                    continue
                why[f"{region_name} node {node.index}"] = "does not name it yet"
            except redis.RedisError as exc:
                why[f"{region_name} node {node.index}"] = f"does not answer ({exc})"
            finally:
                client.close()
        time.sleep(0.2)
    return ", ".join(f"{where} {what}" for where, what in why.items())


def run_add(args: argparse.Namespace) -> int:
    path = Path(args.topology) if args.topology else args.state_dir / "topology.toml"
    password = args.password or os.environ.get("REDISCLI_AUTH") or None
    try:
        topology = load(path)
        known = args.name in topology.names
        if not known:
            if not args.bootstrap or not args.port:
                raise TopologyError("--bootstrap and --port are needed for a new region")
            region = RegionConfig(
                name=args.name,
                id=args.id if args.id is not None else next_region_id(topology),
                bootstrap=args.bootstrap,
                resp_port=args.port,
                id_mode=args.id_mode or topology.regions[0].id_mode,
            )
            topology = with_region(topology, region)
        region = topology.region(args.name)
        if known and (args.bootstrap, args.port) not in {
            (None, None),
            (region.bootstrap, region.resp_port),
        }:
            raise TopologyError(
                f"region {args.name!r} is already in the topology, with another cluster or port"
                f" ({region.bootstrap}, port {region.resp_port})"
            )
        others = [r for r in topology.regions if r.name != args.name]
        if not others:
            raise TopologyError(f"no other region to take {args.name}'s state from")
        peer = topology.region(args.source) if args.source else others[0]
        if peer.name == args.name:
            raise TopologyError("--from must name another region")
    except (OSError, TopologyError, KeyError) as exc:
        text = exc.args[0] if isinstance(exc, KeyError) else exc
        print(f"streams region add: {text}", file=sys.stderr)
        return exits.UNRESOLVED
    from streams.node.kafka.join_seed import truncated_logs, truncation_refusal, write_seeds

    try:
        truncated = truncated_logs(others, topology.shards)
    except ConnectionError as exc:
        print(f"streams region add: a region's cluster does not answer: {exc}", file=sys.stderr)
        return exits.UNREACHABLE
    if truncated:
        print(
            f"streams region add: {truncation_refusal(truncated, 'by streams region add')}",
            file=sys.stderr,
        )
        return exits.UNRESOLVED
    if not known:
        dump(topology, path)
    lagging = _not_following(topology, args.name, password, args.timeout)
    if lagging:
        print(
            f"streams region add: {path} names {args.name} (id {region.id}), but {lagging}"
            f" within {args.timeout:g} s: do not start it yet; run this command again once"
            " they follow the file (it is not rewritten)",
            file=sys.stderr,
        )
        return exits.DIFFERS
    taken: dict[int, str] = {}
    try:
        for node in peer.nodes:
            client = _client(node.bind, node.resp_port, password)
            try:
                reply = client.execute_command("CRDT.SNAPSHOT")  # type: ignore[no-untyped-call]
            finally:
                client.close()
            taken.update(zip(node.shards, reply.decode().split(), strict=True))
        seeds = write_seeds(peer, taken, region, Path(args.seed_dir), timeout=args.timeout)
    except (redis.RedisError, ValueError, OSError) as exc:
        print(f"streams region add: the snapshot of {peer.name} failed: {exc}", file=sys.stderr)
        return exits.DIFFERS
    files = " ".join(f"shard {shard}: {f}" for shard, f in sorted(seeds.items()))
    print(
        f"{args.name} (id {region.id}) added to {path}; every other region's nodes count it."
        f" Seeds from {peer.name}'s snapshot: {files}. Now start the mirrors to and from"
        f" {region.bootstrap} (restart `streams up --topology {path}`, or add the cluster to"
        f" MirrorMaker 2), then its node(s): python -m streams.node --topology {path} --region"
        f" {args.name} --snapshot FILE (once per shard it owns: the seed of that shard)"
    )
    return exits.OK
