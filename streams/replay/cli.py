"""The `streams log / replay / snapshot / diff / history` verbs (registered by streams/cli.py).

Exit codes, the same for every verb: 0 done / equal, 1 differs, 2 corrupt record or tainted state,
3 a position (or region, topic, snapshot) that cannot be resolved.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from streams.ops.codec import DecodeError, decode
from streams.replay import reader
from streams.replay.describe import (
    SCHEMA_VERSION,
    key_view,
    record_line,
    record_view,
    state_lines,
    text,
)
from streams.replay.positions import PositionError, parse_time
from streams.replay.run import CorruptError, Replayed, Request, replay
from streams.snapshot import SnapshotError, write_snapshot

EXIT_OK, EXIT_DIFFERS, EXIT_CORRUPT, EXIT_POSITION = 0, 1, 2, 3

Handler = Callable[[argparse.Namespace], int]


def _fail(verb: str, exc: Exception) -> int:
    print(f"streams {verb}: {exc}", file=sys.stderr)
    if isinstance(exc, PositionError | SnapshotError | OSError):
        return EXIT_POSITION
    if isinstance(exc, CorruptError):
        return EXIT_CORRUPT
    return EXIT_POSITION if isinstance(exc, reader.ReadError) else EXIT_CORRUPT


def _guard(verb: str, fn: Handler) -> Handler:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (PositionError, SnapshotError, CorruptError, reader.ReadError, OSError) as exc:
            return _fail(verb, exc)
        except KeyboardInterrupt:
            return 130

    return run


def _position_args(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--at", help="per-origin op seq, as CRDT.VECTOR prints it: r1=120,r2=98")
    where.add_argument("--offsets", help="next offset to read per topic: r1.oplog=120,r1.local=7")
    where.add_argument("--time", help="ISO 8601: each topic as it was then (record timestamps)")


def _replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--region", help="the region replayed (default: the one whose .local log the "
                   "cluster holds)")
    _position_args(p)
    p.add_argument("--snapshot", help="start from this snapshot file and read only the tail")
    p.add_argument("--on-corrupt", choices=["fail", "skip"], default="fail",
                   help="fail (default) stops at an undecodable record; skip goes on, writes "
                   "each skipped position to --audit and marks the state tainted (exit 2)")
    p.add_argument("--audit", default="streams-skipped.jsonl",
                   help="where skipped positions go (JSON lines)")
    p.add_argument("--id-mode", default="strict", choices=["strict", "semi-strict", "liberal"])


def register(sub: Any) -> dict[str, Handler]:
    """Add the verbs' subparsers to `sub`; returns verb -> handler."""
    log = sub.add_parser(
        "log", help="decoded op-log records, one per line",
        description="Print a topic's records decoded: offset, time, dot, causal context, op, key, "
        "arguments. A record that does not decode is shown as such and the listing goes on "
        "(exit 2 at the end).",
    )
    log.add_argument("--bootstrap", required=True, help="Kafka cluster HOST:PORT")
    log.add_argument("--topic", required=True, help="e.g. r1.oplog or r1.local")
    start = log.add_mutually_exclusive_group()
    start.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    start.add_argument("--time", help="ISO 8601: start at the first record at or after then")
    log.add_argument("--key", help="only ops on this stream key")
    log.add_argument("--op", help="only this op type (XAdd, Del, XDel, XTrim, GroupCreate, ...)")
    log.add_argument("--follow", action="store_true", help="keep printing new records (Ctrl-C)")
    log.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")

    rp = sub.add_parser(
        "replay", help="rebuild a region's state at a position of the logs",
        description="Rebuild region R's state (its .local log included) as of a position and "
        "print streams, groups, R's PEL and consumers, and the digest (= CRDT.DIGEST of a live "
        "node at that position).",
    )
    rp.add_argument("--bootstrap", required=True, help="the region's Kafka cluster HOST:PORT")
    _replay_args(rp)
    rp.add_argument("--key", help="print only this key")
    rp.add_argument("--digest", action="store_true", help="print only the digest")
    rp.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")
    rp.add_argument("--serve", type=int, metavar="PORT",
                    help="not built yet: serve the state read-only over RESP")

    sn = sub.add_parser(
        "snapshot", help="write a region's state and the positions it covers to a file",
        description="Replay a region (to its end, or to a position) and write a snapshot "
        "(streams/snapshot format) that a node or `streams replay --snapshot` starts from.",
    )
    sn.add_argument("--bootstrap", required=True)
    _replay_args(sn)
    sn.add_argument("--out", required=True, help="the snapshot file to write")

    df = sub.add_parser(
        "diff", help="compare two replicas; find convergence bugs and lagging keys",
        description="Replay two clusters (two regions) to the newest position they share and "
        "compare per key. A key that differs at the same position is a convergence bug: the "
        "first op after which the two diverge is found by bisection. A key that differs only "
        "because one side has not applied some ops is listed with those ops (missing from that "
        "cluster, or held back waiting for a causal dependency). Exit 0 equal, 1 differs.",
    )
    df.add_argument("--bootstrap", action="append", required=True,
                    help="a cluster HOST:PORT; give it twice")
    df.add_argument("--region", action="append",
                    help="the region of each cluster, in the same order (default: inferred)")
    df.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")
    return {"log": _guard("log", _log), "replay": _guard("replay", _replay),
            "snapshot": _guard("snapshot", _snapshot), "diff": _guard("diff", _diff)}


# --- log -------------------------------------------------------------------------------------


def _log(args: argparse.Namespace) -> int:
    topics = reader.list_topics(args.bootstrap)
    if args.topic not in topics:
        raise PositionError(f"no topic {args.topic} on {args.bootstrap} ({', '.join(topics)})")
    since = parse_time(args.time) if args.time else None
    key = args.key.encode() if args.key else None
    corrupt = 0

    def sink(raw: reader.Raw) -> bool:
        nonlocal corrupt
        if since is not None and raw.timestamp_ms is not None and raw.timestamp_ms < since:
            return True
        try:
            record = decode(raw.value)
        except DecodeError as exc:
            corrupt += 1
            if args.json:
                print(json.dumps({"v": SCHEMA_VERSION, "type": "corrupt", "topic": raw.topic,
                                  "partition": raw.partition, "offset": raw.offset,
                                  "reason": str(exc)}), flush=True)
            else:
                print(f"{raw.topic}@{raw.offset:<6} CORRUPT: {exc}", flush=True)
            return True
        if key is not None and record.body.key != key:
            return True
        if args.op and type(record.body).__name__.lower() != args.op.lower():
            return True
        view = record_view(raw.topic, raw.partition, raw.offset, raw.timestamp_ms, record)
        print(json.dumps(view) if args.json else record_line(view), flush=True)
        return True

    reader.read(args.bootstrap, {(args.topic, 0): args.from_offset}, sink, follow=args.follow)
    return EXIT_CORRUPT if corrupt else EXIT_OK


# --- replay ----------------------------------------------------------------------------------


def _request(args: argparse.Namespace, progress: bool) -> Request:
    return Request(
        bootstrap=args.bootstrap, region=args.region, at=args.at, offsets=args.offsets,
        time=args.time, snapshot=args.snapshot, on_corrupt=args.on_corrupt, audit=args.audit,
        progress=progress, id_mode=args.id_mode,
    )


def summary(result: Replayed) -> dict[str, Any]:
    fold = result.fold
    return {
        "v": SCHEMA_VERSION,
        "type": "summary",
        "region": result.region_name,
        "region_id": result.region.id,
        "vector": result.vector_named(),
        "local_seq": result.region.local_seq,
        "digest": result.region.state.digest(),
        "positions": {f"{t}:{p}": o for (t, p), o in sorted(fold.read.items())},
        "waiting_ops": result.region.causal.waiting + fold.gated + fold.waiting_local,
        "beyond_cut": fold.beyond_cut,
        "tainted": result.tainted,
        "skipped": len(result.skipped),
        "records": result.records,
        "seconds": round(result.seconds, 3),
    }


def _replay(args: argparse.Namespace) -> int:
    if args.serve is not None:
        print("streams replay: --serve is not built yet", file=sys.stderr)
        return EXIT_CORRUPT
    quiet = args.json or args.digest
    result = replay(_request(args, progress=not quiet))
    region = result.region
    key = args.key.encode() if args.key else None
    if args.digest:
        print(region.state.digest())
    elif args.json:
        keys = [key] if key is not None else sorted(region.state.keys)
        for k in keys:
            ks = region.state.keys.get(k)
            if ks is not None and ks.exists:
                print(json.dumps(key_view(k, ks)))
        print(json.dumps(summary(result)))
    else:
        s = summary(result)
        vector = ",".join(f"{n}={v}" for n, v in s["vector"].items()) or "(empty)"
        print(f"region {result.region_name} (id {region.id}) at {vector}; local seq "
              f"{region.local_seq}; {s['records']} records in {s['seconds']}s")
        for line in state_lines(region, key):
            print(line)
        if s["waiting_ops"]:
            print(f"ops read but not applied (waiting for a causal dependency or a cut): "
                  f"{s['waiting_ops']}")
        print(f"digest {s['digest']}")
    if result.tainted:
        print(f"streams replay: TAINTED: built over {len(result.skipped)} skipped record(s) "
              f"(listed in {args.audit})", file=sys.stderr)
        return EXIT_CORRUPT
    return EXIT_OK


def _snapshot(args: argparse.Namespace) -> int:
    result = replay(_request(args, progress=True))
    meta = {"writer": "streams snapshot", "created_at_ms": str(int(time.time() * 1000)),
            "source": args.bootstrap, "tainted": "true" if result.tainted else "false"}
    positions = result.fold.safe_positions()
    tmp = f"{args.out}.tmp"
    with open(tmp, "wb") as out:
        write_snapshot(result.region, positions, out, region_name=result.region_name, meta=meta)
    os.replace(tmp, args.out)
    vector = ",".join(f"{n}={v}" for n, v in result.vector_named().items())
    print(f"snapshot of {result.region_name} at {vector} -> {args.out} "
          f"(digest {result.region.state.digest()})")
    return EXIT_CORRUPT if result.tainted else EXIT_OK


# --- diff ------------------------------------------------------------------------------------


def _diff(args: argparse.Namespace) -> int:
    from streams.replay import diff as d

    if len(args.bootstrap) != 2:
        raise PositionError("give --bootstrap exactly twice")
    regions = args.region or [None, None]
    if len(regions) != 2:
        raise PositionError("give --region twice (one per --bootstrap) or not at all")
    a = d.load(args.bootstrap[0], regions[0])
    b = d.load(args.bootstrap[1], regions[1])
    names = {**a.names, **b.names}
    report = d.diff(a, b)
    side = {"a": a.name, "b": b.name}
    shared = ",".join(f"{names.get(o, o)}={s}" for o, s in sorted(report.shared.items()))
    lines: list[dict[str, Any]] = []
    for bug in report.bugs:
        lines.append({
            "v": SCHEMA_VERSION, "type": "divergence", "key": text(bug.key),
            "first_op": None if bug.op is None else d.describe_op(bug.op, names),
            "topic": None if bug.where is None else bug.where[0][0],
            "offset": None if bug.where is None else bug.where[1],
            "index": bug.index,
        })
    for lag in report.lagging:
        lines.append({
            "v": SCHEMA_VERSION, "type": "diff", "key": text(lag.key), "behind": side[lag.side],
            "missing": [d.describe_op(op, names) for op in lag.missing],
            "held": [d.describe_op(op, names) for op in lag.held],
        })
    if args.json:
        for line in lines:
            print(json.dumps(line))
        print(json.dumps({"v": SCHEMA_VERSION, "type": "summary", "a": a.name, "b": b.name,
                          "shared": shared, "equal_keys": report.equal_keys,
                          "differs": report.differs}))
    else:
        print(f"diff {a.name} ({args.bootstrap[0]}) vs {b.name} ({args.bootstrap[1]}); "
              f"shared position {shared or '(empty)'}")
        for line in lines:
            if line["type"] == "divergence":
                where = f" ({line['topic']}@{line['offset']})" if line["topic"] else ""
                print(f"CONVERGENCE BUG: key {line['key']} differs at the same position; "
                      f"first diverging op: {line['first_op'] or '(from the start)'}{where}")
            else:
                for op in line["missing"]:
                    print(f"lagging: key {line['key']}: {line['behind']} has not applied {op} "
                          "(missing from its cluster)")
                for op in line["held"]:
                    print(f"lagging: key {line['key']}: {line['behind']} has not applied {op} "
                          "(read, held back waiting for a causal dependency)")
        print(f"{report.equal_keys} key(s) equal")
    return EXIT_DIFFERS if report.differs else EXIT_OK
