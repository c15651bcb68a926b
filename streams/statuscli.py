"""`streams status`: every node of a topology file asked for CRDT.INFO: applied vectors, ops
waiting and the time since the last op per origin, fenced writers and faults."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import redis

from streams import exits
from streams.cluster.layout import slot_runs
from streams.config import NodeConfig, RegionConfig, TopologyError, format_shard_set, load
from streams.resp.tls import TlsOptions, redis_options


def add_parser(sub: Any, state_dir: Path) -> None:
    """The `status` verb on the `streams` command's subparsers."""
    status = sub.add_parser(
        "status",
        help="each node: applied vectors, ops waiting and replication lag",
        description="Ask every node of the topology file (the one `streams up` wrote, or "
        "--topology) for CRDT.INFO and show its applied vector, ops waiting and the time since "
        "the last op per origin.",
        epilog=exits.epilog(exits.DIFFERS, exits.UNRESOLVED, exits.UNREACHABLE),
    )
    status.add_argument("--topology", help="topology file (default: the one `streams up` wrote)")
    status.add_argument(
        "--user", help="authenticate as this user (AUTH user password; default: `default`)"
    )
    status.add_argument(
        "--password",
        help="authenticate with this password (the nodes' --requirepass, or --user's); "
        "default: the REDISCLI_AUTH environment variable, as redis-cli reads it",
    )
    status.add_argument(
        "--state-dir",
        type=Path,
        default=state_dir,
        help="where `streams up` wrote topology.toml (default .streams)",
    )


def slots_text(shards: int, node: NodeConfig) -> str:
    """`slots 0-8191, shards 0-1`: a node's hash slots (as maximal runs) and its shards."""
    runs = ",".join(f"{r.start}-{r.stop - 1}" for r in slot_runs(shards, node.shards))
    noun = "shard" if len(node.shards) == 1 else "shards"
    return f"slots {runs}, {noun} {format_shard_set(node.shards)}"


def run(args: argparse.Namespace) -> int:
    """`streams status`: exit 0 when every node answered and none is fenced or faulty."""
    path = Path(args.topology) if args.topology else args.state_dir / "topology.toml"
    try:
        topology = load(path)
    except (OSError, TopologyError) as exc:
        print(f"streams status: {exc} (is `streams up` running?)", file=sys.stderr)
        return exits.UNRESOLVED
    code = exits.OK
    password = args.password or os.environ.get("REDISCLI_AUTH") or None
    answers = [
        (cfg, node, _crdt_info(node, args.user, password, cfg.tls))
        for cfg in topology.regions
        for node in cfg.nodes
    ]
    failed = [(cfg, node, a) for cfg, node, a in answers if isinstance(a, redis.RedisError)]
    if failed:
        code = exits.UNREACHABLE
    if failed and len(failed) == len(answers):  # one line on stderr, not one per node
        what = "; ".join(f"{_node_name(c, n)} on {n.address}: {a}" for c, n, a in failed)
        print(
            f"streams status: no node of {path} answered ({what}); is `streams up` running?",
            file=sys.stderr,
        )
        return code
    removed = ", ".join(g.name for g in topology.removed)
    print(f"regions: {', '.join(topology.names)}" + (f" (removed: {removed})" if removed else ""))
    for cfg, node, flat in answers:
        name = _node_name(cfg, node)
        if isinstance(flat, redis.RedisError):
            print(f"{name}: unreachable on {node.address} ({flat})")
            continue
        info = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
        text = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in info.items()}
        where = node.address
        if topology.shards > 1:
            where += f" ({slots_text(topology.shards, node)})"
        print(f"{name} (id {cfg.id}, {text.get('id_mode', '?')}) on {where}")
        print(f"  applied vector:        {text.get('vector') or '-'}")
        print(f"  ops waiting (causal):  {text.get('waiting_ops') or '-'}")
        print(f"  ms since last op from: {text.get('ms_since_last_op') or '-'}")
        # Per-shard lines, as the node gives them (fields named shard...).
        for key, value in text.items():
            if key.startswith("shard"):
                print(f"  {key}: {value}")
        for key in ("fenced", "write_fault", "materializer_error"):  # fenced: taken over
            if text.get(key) and (key == "fenced" or text[key] != text.get("fenced")):
                print(f"  {key.replace('_', ' ')}: {text[key]}")
                code = max(code, exits.DIFFERS)
    return code


def _node_name(cfg: RegionConfig, node: NodeConfig) -> str:
    return cfg.name if len(cfg.nodes) == 1 else f"{cfg.name} node {node.index}"


def _crdt_info(
    node: NodeConfig,
    user: str | None = None,
    password: str | None = None,
    tls: TlsOptions | None = None,
) -> Any:
    """The node's CRDT.INFO reply, or the error that kept it from answering (a wrong password
    or a user without CRDT.INFO among its ACL rules is named as such). A node serving only
    TLS is asked over TLS with the region's files (its certificate as the client's)."""
    secure = redis_options(tls) if not node.resp_port and tls is not None else {}
    client = redis.Redis(
        host=node.bind,
        port=node.resp_port or node.tls_port,
        socket_timeout=2,
        username=user,
        password=password,
        **secure,
    )
    try:
        return client.execute_command("CRDT.INFO")  # type: ignore[no-untyped-call]
    except redis.RedisError as exc:
        return exc
    finally:
        client.close()
