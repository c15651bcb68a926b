"""The `streams log / replay / snapshot / diff / history` verbs (registered by streams/cli.py):
their arguments here, what they do in `streams.replay.verbs`. Every verb reads every shard of the
region (each folded on its own) unless `--shard N` names one.

Exit codes, the same for every verb (`streams.exits`, listed in each verb's --help): 0 done /
equal, 1 differs, 2 corrupt record or tainted state, 3 a position (or region, topic, snapshot)
that cannot be resolved, 4 no Kafka broker answered, 64 usage, 130 Ctrl-C, 141 stdout closed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from streams import exits, progress
from streams.kafka.clusters import ClusterMismatch
from streams.kafka.gate import RecordRefused
from streams.ops.codec import DecodeError
from streams.replay import kafka_connect, reader, verbs
from streams.replay.describe import SCHEMA_VERSION
from streams.replay.positions import PositionError
from streams.replay.run import DEFAULT_AUDIT, CorruptError
from streams.snapshot import SnapshotError

Handler = Callable[[argparse.Namespace], int]
_REPLAY_CODES = exits.epilog(exits.CORRUPT, exits.UNRESOLVED, exits.UNREACHABLE)


def _fail(verb: str, exc: Exception) -> int:
    print(f"streams {verb}: {exc}", file=sys.stderr)
    if isinstance(exc, kafka_connect.Unreachable):
        return exits.UNREACHABLE
    if isinstance(exc, CorruptError | DecodeError | RecordRefused):
        return exits.CORRUPT
    return exits.UNRESOLVED  # a position, snapshot, topic, file that cannot be resolved


def _guard(verb: str, fn: Handler) -> Handler:
    """Expected failures become one line on stderr and their exit status. A closed stdout
    (BrokenPipeError, an OSError too) and Ctrl-C go on to `streams.exits.guarded`."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except BrokenPipeError:
            raise
        except (
            PositionError,
            SnapshotError,
            CorruptError,
            DecodeError,
            RecordRefused,  # diff: a record that does not decode, or that the gate refuses
            ClusterMismatch,  # a position read from another Kafka cluster
            reader.ReadError,
            OSError,
        ) as exc:
            return _fail(verb, exc)

    return run


def _position_args(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--at",
        help="per-origin op seq, as CRDT.VECTOR prints it: r1=120,r2=98 (with several shards: "
        "one shard's, with --shard N; or each shard's: '0:r1=120,r2=98;1:r1=80')",
    )
    where.add_argument(
        "--offsets",
        help="next offset to read per topic partition: r1.oplog=120,r1.oplog:3=40,r1.local=7 "
        "(partition 0 when omitted); cluster=ID,... says which Kafka cluster they were read "
        "from (the --json summary's `offsets` prints them so), and offsets of another cluster "
        "are refused (exit 3)",
    )
    where.add_argument(
        "--time", help="ISO 8601: each topic partition as it was then (record timestamps)"
    )


def _shard_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--shard", type=int, metavar="N", help=f"{what} (default: every shard)")


TOPOLOGY_HELP = (
    "a topology file (as `streams up` writes it): the cluster is the one of --region, and every "
    "record read is checked against its regions and signing keys as a node checks it (an "
    "unsigned record of a signing region is skipped and counted). Without it the reader checks "
    "what the logs tell: each op log holds its own region's ops, and two records under one dot "
    "with other bytes stop it; signatures cannot be checked"
)


def _cluster_args(p: argparse.ArgumentParser, what: str = "the region's Kafka cluster") -> None:
    p.add_argument("--bootstrap", help=f"{what} HOST:PORT")
    p.add_argument("--topology", help=TOPOLOGY_HELP)
    kafka_connect.add_verbose_argument(p)


def _replay_args(p: argparse.ArgumentParser, snapshot: bool = True) -> None:
    p.add_argument(
        "--region",
        help="the region replayed (default: the one whose .local log the "
        "cluster holds; required with --topology)",
    )
    _position_args(p)
    if snapshot:
        p.add_argument(
            "--snapshot",
            action="append",
            help="start from this snapshot file and read only the tail; repeat it with one file "
            "per shard (a shard without one is replayed from the start). A snapshot read from "
            "another Kafka cluster is translated: every log is read from its start and the ops "
            "the snapshot covers are dropped by seq (noted on stderr)",
        )
    p.add_argument(
        "--on-corrupt",
        choices=["fail", "skip"],
        default="fail",
        help="fail (default) stops at a record that does not decode or that the record gate "
        "refuses (an op in another region's log, a second record under a dot); skip goes on, "
        "writes each skipped position to --audit and marks the state tainted (exit 2). A "
        "forged record (a signing region's, unsigned) is always skipped, as the node skips it",
    )
    p.add_argument(
        "--audit",
        default=DEFAULT_AUDIT,
        help="the JSON-lines file every skipped record is appended to (forged ones, and with "
        f"--on-corrupt skip the refused ones; default: ./{DEFAULT_AUDIT} in the current "
        "directory, created only when a record is skipped)",
    )
    p.add_argument("--id-mode", default="strict", choices=["strict", "semi-strict", "liberal"])


def register(sub: Any) -> dict[str, Handler]:
    """Add the verbs' subparsers to `sub`; returns verb -> handler."""
    log = sub.add_parser(
        "log",
        help="decoded op-log records, one per line",
        description="Print a topic's records decoded: offset, time, dot, causal context, op, key, "
        "arguments. A record that does not decode is shown as such and the listing goes on "
        "(exit 2 at the end).",
        epilog=exits.epilog(exits.CORRUPT, exits.UNRESOLVED, exits.UNREACHABLE),
    )
    _cluster_args(log, "the Kafka cluster")
    log.add_argument("--region", help="with --topology: whose cluster to read")
    log.add_argument("--topic", required=True, help="e.g. r1.oplog or r1.local")
    _shard_arg(log, "only this shard's partition of the topic")
    start = log.add_mutually_exclusive_group()
    start.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    start.add_argument("--time", help="ISO 8601: start at the first record at or after then")
    log.add_argument("--key", help="only ops on this stream key")
    log.add_argument("--op", help="only this op type (XAdd, Del, XDel, XTrim, GroupCreate, ...)")
    log.add_argument("--follow", action="store_true", help="keep printing new records (Ctrl-C)")
    log.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")

    rp = sub.add_parser(
        "replay",
        help="rebuild a region's state at a position of the logs",
        description="Rebuild region R's state (its .local log included) as of a position and "
        "print streams, groups, R's PEL and consumers, and the digest (= CRDT.DIGEST of a live "
        "node at that position). A region of several shards is folded shard by shard; --shard N "
        "replays one.",
        epilog=_REPLAY_CODES,
    )
    _cluster_args(rp)
    _replay_args(rp)
    _shard_arg(rp, "replay only this shard")
    progress.add_arguments(rp)
    rp.add_argument("--key", help="print only this key")
    rp.add_argument("--digest", action="store_true", help="print only the digest")
    rp.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")
    rp.add_argument(
        "--serve",
        type=int,
        metavar="PORT",
        help="serve the replayed state read-only over RESP on this port (0: a free "
        "one, printed) until Ctrl-C: redis-cli / redis-py can run XRANGE, "
        "XREVRANGE, XINFO, XPENDING, XLEN ...; writes are refused. REPLAY.SEEK "
        "<position> moves the view (r1=120,r2=98 | AT v | OFFSETS t=o,... | TIME "
        "iso | END), REPLAY.POSITION prints the position and digest",
    )
    rp.add_argument("--host", default="127.0.0.1", help="with --serve: address to bind")

    sn = sub.add_parser(
        "snapshot",
        help="write a region's state and the positions it covers to a file",
        description="Replay a region (to its end, or to a position) and write a snapshot "
        "(streams/snapshot format) that a node or `streams replay --snapshot` starts from.",
        epilog=_REPLAY_CODES,
    )
    _cluster_args(sn)
    _replay_args(sn)
    _shard_arg(sn, "only this shard's snapshot, written to --out")
    progress.add_arguments(sn)
    sn.add_argument(
        "--out",
        required=True,
        help="the snapshot file to write; with several shards one file per shard, -s<N> before "
        "the extension (r1.snap: r1-s0.snap, r1-s1.snap, ...)",
    )

    df = sub.add_parser(
        "diff",
        help="compare two replicas; find convergence bugs and lagging keys",
        description="Replay two clusters (two regions) to the newest position they share and "
        "compare per key. A key that differs at the same position is a convergence bug: the "
        "first op after which the two diverge is found by bisection. A key that differs only "
        "because one side has not applied some ops is listed with those ops (missing from that "
        "cluster, or held back waiting for a causal dependency).",
        epilog=exits.epilog(exits.DIFFERS, exits.CORRUPT, exits.UNRESOLVED, exits.UNREACHABLE),
    )
    clusters = df.add_mutually_exclusive_group(required=True)
    clusters.add_argument(
        "--bootstrap",
        action="append",
        help="a cluster HOST:PORT; give it twice (or --topology with --region twice)",
    )
    clusters.add_argument(
        "--topology", help=TOPOLOGY_HELP.replace("of --region", "of each --region")
    )
    df.add_argument(
        "--region",
        action="append",
        help="the region of each cluster, in the same order (default: inferred; required with "
        "--topology)",
    )
    _shard_arg(df, "compare only this shard")
    kafka_connect.add_verbose_argument(df)
    progress.add_arguments(df)
    df.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")

    hs = sub.add_parser(
        "history",
        help="every op that touched a key, in the order the region applied them",
        description="Replay a region from the start of its logs and list every op that touched "
        "KEY, from every region's op log on the cluster and the region's own .local log, in the "
        "order the region applied them: the apply index, topic@offset, dot, causal context, "
        "origin time, and what the op changed (the entry an XADD added; the entries an XDEL, "
        "XTRIM or DEL removed, and those it kept because it had not observed them; whether a "
        "group create took effect or a tombstone beat it; what a local op delivered, acked or "
        "claimed, and consumers created or deleted). Ops read but not applied (waiting for a "
        "causal dependency, or past the position) are listed last.",
        epilog=_REPLAY_CODES,
    )
    hs.add_argument("key", help="the stream key")
    _cluster_args(hs)
    _replay_args(hs, snapshot=False)
    progress.add_arguments(hs)
    _shard_arg(hs, "the key's shard (found from the key when omitted; --at then applies to it)")
    hs.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")
    return {
        "log": _guard("log", verbs.log),
        "replay": _guard("replay", verbs.replay_verb),
        "snapshot": _guard("snapshot", verbs.snapshot_verb),
        "diff": _guard("diff", verbs.diff_verb),
        "history": _guard("history", verbs.history_verb),
    }
