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
from streams.replay.run import DEFAULT_AUDIT, CorruptError, Replayed, Request, replay
from streams.snapshot import SnapshotError, write_snapshot
from topology.config import TopologyError
from topology.config import load as load_topology

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


def _cluster_args(p: argparse.ArgumentParser, what: str = "the region's Kafka cluster") -> None:
    p.add_argument("--bootstrap", help=f"{what} HOST:PORT")
    p.add_argument("--topology", help="a topology file (as `streams up` writes it): the "
                   "cluster is the one of --region")


def _bootstrap(args: argparse.Namespace) -> str:
    """The cluster to read: --bootstrap, else --region's cluster in --topology."""
    if args.bootstrap:
        return str(args.bootstrap)
    if not args.topology:
        raise PositionError("give --bootstrap HOST:PORT, or --topology FILE with --region NAME")
    try:
        topology = load_topology(args.topology)
    except TopologyError as exc:
        raise PositionError(str(exc)) from None
    if not args.region:
        regions = ", ".join(topology.names)
        raise PositionError(f"--topology: name the region with --region ({regions})")
    try:
        return topology.region(args.region).bootstrap
    except KeyError as exc:
        raise PositionError(f"--topology {args.topology}: {exc.args[0]}") from None


def _replay_args(p: argparse.ArgumentParser, snapshot: bool = True) -> None:
    p.add_argument("--region", help="the region replayed (default: the one whose .local log the "
                   "cluster holds; required with --topology)")
    _position_args(p)
    if snapshot:
        p.add_argument("--snapshot", help="start from this snapshot file and read only the tail")
    p.add_argument("--on-corrupt", choices=["fail", "skip"], default="fail",
                   help="fail (default) stops at an undecodable record; skip goes on, writes "
                   "each skipped position to --audit and marks the state tainted (exit 2)")
    p.add_argument("--audit", default=DEFAULT_AUDIT,
                   help="with --on-corrupt skip: the JSON-lines file skipped positions are "
                   f"appended to (default: ./{DEFAULT_AUDIT} in the current directory, created "
                   "only when a record is skipped)")
    p.add_argument("--id-mode", default="strict", choices=["strict", "semi-strict", "liberal"])


def register(sub: Any) -> dict[str, Handler]:
    """Add the verbs' subparsers to `sub`; returns verb -> handler."""
    log = sub.add_parser(
        "log", help="decoded op-log records, one per line",
        description="Print a topic's records decoded: offset, time, dot, causal context, op, key, "
        "arguments. A record that does not decode is shown as such and the listing goes on "
        "(exit 2 at the end).",
    )
    _cluster_args(log, "the Kafka cluster")
    log.add_argument("--region", help="with --topology: whose cluster to read")
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
    _cluster_args(rp)
    _replay_args(rp)
    rp.add_argument("--key", help="print only this key")
    rp.add_argument("--digest", action="store_true", help="print only the digest")
    rp.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")
    rp.add_argument("--serve", type=int, metavar="PORT",
                    help="serve the replayed state read-only over RESP on this port (0: a free "
                    "one, printed) until Ctrl-C: redis-cli / redis-py can run XRANGE, "
                    "XREVRANGE, XINFO, XPENDING, XLEN ...; writes are refused. REPLAY.SEEK "
                    "<position> moves the view (r1=120,r2=98 | AT v | OFFSETS t=o,... | TIME "
                    "iso | END), REPLAY.POSITION prints the position and digest")
    rp.add_argument("--host", default="127.0.0.1", help="with --serve: address to bind")

    sn = sub.add_parser(
        "snapshot", help="write a region's state and the positions it covers to a file",
        description="Replay a region (to its end, or to a position) and write a snapshot "
        "(streams/snapshot format) that a node or `streams replay --snapshot` starts from.",
    )
    _cluster_args(sn)
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

    hs = sub.add_parser(
        "history", help="every op that touched a key, in the order the region applied them",
        description="Replay a region from the start of its logs and list every op that touched "
        "KEY, from every region's op log on the cluster and the region's own .local log, in the "
        "order the region applied them: the apply index, topic@offset, dot, causal context, "
        "origin time, and what the op changed (the entry an XADD added; the entries an XDEL, "
        "XTRIM or DEL removed, and those it kept because it had not observed them; whether a "
        "group create took effect or a tombstone beat it; what a local op delivered, acked or "
        "claimed, and consumers created or deleted). Ops read but not applied (waiting for a "
        "causal dependency, or past the position) are listed last. Exit 0 done, 2 corrupt or "
        "tainted, 3 a position that cannot be resolved.",
    )
    hs.add_argument("key", help="the stream key")
    _cluster_args(hs)
    _replay_args(hs, snapshot=False)
    hs.add_argument("--json", action="store_true", help=f"JSON lines (schema v{SCHEMA_VERSION})")
    return {"log": _guard("log", _log), "replay": _guard("replay", _replay),
            "snapshot": _guard("snapshot", _snapshot), "diff": _guard("diff", _diff),
            "history": _guard("history", _history)}


# --- log -------------------------------------------------------------------------------------


def _log(args: argparse.Namespace) -> int:
    bootstrap = _bootstrap(args)
    topics = reader.list_topics(bootstrap)
    if args.topic not in topics:
        raise PositionError(f"no topic {args.topic} on {bootstrap} ({', '.join(topics)})")
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

    reader.read(bootstrap, {(args.topic, 0): args.from_offset}, sink, follow=args.follow)
    return EXIT_CORRUPT if corrupt else EXIT_OK


# --- replay ----------------------------------------------------------------------------------


def _request(args: argparse.Namespace, progress: bool) -> Request:
    return Request(
        bootstrap=_bootstrap(args), region=args.region, at=args.at, offsets=args.offsets,
        time=args.time, snapshot=getattr(args, "snapshot", None), on_corrupt=args.on_corrupt,
        audit=args.audit, progress=progress, id_mode=args.id_mode,
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
        from streams.replay.serve import serve_replay

        return serve_replay(_request(args, progress=True), args.host, args.serve)
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
            "source": _bootstrap(args), "tainted": "true" if result.tainted else "false"}
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


# --- history ---------------------------------------------------------------------------------


def _history(args: argparse.Namespace) -> int:
    from streams.replay import history as hist

    h = hist.history(_request(args, progress=not args.json), args.key.encode())
    result = h.result
    names = result.names
    views = [hist.step_view(step, h) for step in [*h.steps, *h.unapplied]]
    summary_line = hist.summary_view(h)
    if args.json:
        for view in views:
            print(json.dumps(view))
        print(json.dumps(summary_line))
    else:
        vector = ",".join(f"{n}={v}" for n, v in summary_line["vector"].items()) or "(empty)"
        print(f"history of {args.key} in region {result.region_name} (id {result.region.id}) at "
              f"{vector}: {len(h.steps)} op(s) applied, {len(h.unapplied)} read but not "
              f"applied; {result.records} records in {summary_line['seconds']}s")
        if not views:
            print(f"(no op in these logs touched key {args.key})")
        for view in views:
            print(hist.step_line(view, names))
    if result.tainted:
        print(f"streams history: TAINTED: built over {len(result.skipped)} skipped record(s) "
              f"(listed in {args.audit})", file=sys.stderr)
        return EXIT_CORRUPT
    return EXIT_OK
