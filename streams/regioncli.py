"""`streams region remove NAME [--force]`: a region leaves the topology file (issue 37, part B).

The running nodes of the other regions follow the file within about a second
(`streams.node.topology_watch`): causal stability stops waiting for the region, so tombstones are
collected again; its old records stay valid; its name and id are never used again (`[[removed]]`).
Without `--force`, every other region must already have applied every op the region wrote, as
its nodes and theirs report it (stop writing to it first); otherwise nothing changes. With
`--force` (its nodes are gone), ops of it that no mirror had copied are lost. Its nodes and the
mirrors to and from its cluster are then stopped by the operator (`streams up --topology FILE`
restarts the mirrors from the file).

`streams region add NAME --bootstrap HOST:PORT --port N`: a region joins (issue 37, part C;
`streams.region_add` says how).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import redis

from streams import exits
from streams.config import RegionConfig, Topology, TopologyError, dump, load


def add_parser(sub: Any, state_dir: Path) -> None:
    parser = sub.add_parser(
        "region",
        help="add a region to the topology, or remove one, while the others serve",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        epilog=exits.epilog(exits.DIFFERS, exits.UNRESOLVED),
    )
    parser.add_argument("action", choices=["remove", "add"])
    parser.add_argument("name", metavar="NAME", help="the region")
    parser.add_argument(
        "--force",
        action="store_true",
        help="remove it even when its nodes do not answer or others lack some of its ops "
        "(those ops are lost)",
    )
    parser.add_argument("--topology", help="topology file (default: the one `streams up` wrote)")
    parser.add_argument("--state-dir", type=Path, default=state_dir)
    parser.add_argument("--password", help="the nodes' password (default: $REDISCLI_AUTH)")
    parser.add_argument("--bootstrap", help="add: the new region's Kafka cluster")
    parser.add_argument("--port", type=int, help="add: its node's RESP port")
    parser.add_argument("--id", type=int, help="add: its id (default: above every id ever used)")
    parser.add_argument("--id-mode", help="add: its ID mode (default: the first region's)")
    parser.add_argument(
        "--from", dest="source", help="add: the region whose snapshot seeds it (default: first)"
    )
    parser.add_argument(
        "--seed-dir", default=".", help="add: where its seed snapshot files go (default: .)"
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="add: seconds to wait for the nodes"
    )


def _vector(region: RegionConfig, password: str | None) -> dict[str, int]:
    """The region's applied ops per origin name, summed over its nodes (each node's CRDT.INFO
    `vector` sums its own shards); raises redis.RedisError when a node does not answer."""
    total: dict[str, int] = {}
    for node in region.nodes:
        client = redis.Redis(
            host=node.bind, port=node.resp_port, socket_timeout=2, password=password
        )
        try:
            flat = client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
        finally:
            client.close()
        info = {flat[k].decode(): flat[k + 1] for k in range(0, len(flat), 2)}
        for item in info.get("vector", b"").decode().split():
            name, _, seq = item.partition("=")
            total[name] = total.get(name, 0) + int(seq)
    return total


def _missing(topology: Topology, name: str, password: str | None) -> str | None:
    """Why the region cannot leave without losing ops (None: every other region has them)."""
    gone = topology.region(name)
    try:
        wrote = _vector(gone, password).get(name, 0)
    except redis.RedisError as exc:
        return f"its nodes do not answer ({exc}), so how far it wrote is unknown"
    behind = []
    for other in topology.others(name):
        try:
            got = _vector(other, password).get(name, 0)
        except redis.RedisError as exc:
            behind.append(f"{other.name} does not answer ({exc})")
            continue
        if got < wrote:
            behind.append(f"{other.name} applied {got}")
    if behind:
        return f"it wrote {wrote} ops, but " + ", ".join(behind)
    return None


def run(args: argparse.Namespace) -> int:
    if args.action == "add":
        from streams.region_add import run_add

        return run_add(args)
    path = Path(args.topology) if args.topology else args.state_dir / "topology.toml"
    try:
        topology = load(path)
        fresh = topology.without(args.name)
    except (OSError, TopologyError, KeyError) as exc:
        text = exc.args[0] if isinstance(exc, KeyError) else exc
        print(f"streams region remove: {text}", file=sys.stderr)
        return exits.UNRESOLVED
    password = args.password or os.environ.get("REDISCLI_AUTH") or None
    if not args.force:
        why = _missing(topology, args.name, password)
        if why is not None:
            print(
                f"streams region remove: {args.name} is not removed: {why}; wait for the mirrors"
                " (stop writing to it first), or --force (its ops not copied yet are lost)",
                file=sys.stderr,
            )
            return exits.DIFFERS
    dump(fresh, path)
    print(
        f"{args.name} removed from {path}: the other regions' nodes stop waiting for it within"
        f" a second; stop its nodes and the mirrors to and from its cluster (regions now:"
        f" {', '.join(fresh.names)})"
    )
    return exits.OK
