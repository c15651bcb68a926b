"""What each verb does with its parsed arguments (`streams.replay.arguments` defines the arguments):
`log`, `replay`, `snapshot`, `diff`, `history`, and their output, text or JSON lines.

Shards: a region of one shard prints exactly what it printed before shards existed; with S > 1
the text names shards and partitions (`r1.oplog:3@12`, `shard 2 of 4`, per-shard vectors, the
per-shard `--at` form) and the JSON lines gain `shard` / `shards` fields.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from streams import exits
from streams.config import TopologyError
from streams.config import load as load_topology
from streams.kafka.clusters import SNAPSHOT_META
from streams.kafka.gate import RecordRefused, Refusal
from streams.kafka.records import Admission, Trust
from streams.progress import Progress
from streams.progress import wanted as progress_wanted
from streams.replay import reader
from streams.replay.describe import (
    SCHEMA_VERSION,
    key_view,
    place,
    record_line,
    record_view,
    state_lines,
    text,
)
from streams.replay.positions import (
    PositionError,
    at_text,
    offsets_text,
    parse_time,
    vector_text,
)
from streams.replay.replayed import Replayed
from streams.replay.run import Request, replay
from streams.snapshot import write_snapshot

EXIT_OK, EXIT_DIFFERS, EXIT_CORRUPT = exits.OK, exits.DIFFERS, exits.CORRUPT  # streams/exits.py


def bootstrap(args: argparse.Namespace) -> str:
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


def trust(args: argparse.Namespace) -> Trust | None:
    """What the record gate checks against: the topology file's regions and signing keys when
    `--topology` names one; None: what the logs on the cluster tell (no signatures)."""
    if not getattr(args, "topology", None):
        return None
    try:
        return Trust.of(load_topology(args.topology).signers)
    except TopologyError as exc:
        raise PositionError(str(exc)) from None


def notes(result: Replayed) -> None:
    """What the operator should know about how the result was read, on stderr."""
    for note in result.notes:
        print(f"streams: note: {note}", file=sys.stderr)


def request(args: argparse.Namespace, progress: bool) -> Request:
    return Request(
        bootstrap=bootstrap(args),
        trust=trust(args),
        region=args.region,
        at=args.at,
        offsets=args.offsets,
        time=args.time,
        snapshot=getattr(args, "snapshot", None),
        shard=args.shard,
        on_corrupt=args.on_corrupt,
        audit=args.audit,
        progress=progress,
        id_mode=args.id_mode,
    )


def _tainted(verb: str, result: Replayed, audit: str) -> int:
    forged = result.skipped_by_kind().get("forged", 0)
    if forged:
        print(
            f"streams {verb}: skipped {forged} forged record(s) (a signing region's, without "
            f"its signature; listed in {audit}): they cannot be real, the state is not tainted",
            file=sys.stderr,
        )
    if not result.tainted:
        return EXIT_OK
    print(
        f"streams {verb}: TAINTED: built over {result.tainting} skipped record(s) "
        f"(listed in {audit})",
        file=sys.stderr,
    )
    return EXIT_CORRUPT


def _which(result: Replayed) -> str:
    """` shard 2 of 4` when one shard of several was replayed, else nothing."""
    return "" if result.shard is None else f" shard {result.shard} of {result.shards}"


# --- log -------------------------------------------------------------------------------------


def log(args: argparse.Namespace) -> int:
    cluster = bootstrap(args)
    counts = reader.partition_counts(cluster)
    checked = trust(args)
    if args.topic not in counts:
        raise PositionError(f"no topic {args.topic} on {cluster} ({', '.join(counts)})")
    partitions = counts[args.topic]
    if args.shard is not None and not 0 <= args.shard < partitions:
        raise PositionError(f"--shard {args.shard}: {args.topic} has {partitions} partition(s)")
    parts = [args.shard] if args.shard is not None else list(range(partitions))
    since = parse_time(args.time) if args.time else None
    key = args.key.encode() if args.key else None
    if checked is None:  # no topology file: the regions the op logs' first records name
        oplogs = [(t, p) for t in reader.oplog_topics(list(counts)) for p in range(counts[t])]
        first = reader.first_records(cluster, oplogs)
        checked = Trust.from_logs((t, raw.value) for (t, _p), raw in sorted(first.items()))
    gates = {p: Admission(checked.gate()) for p in parts}  # a shard numbers its own dots
    corrupt = 0

    def refused(raw: reader.Raw, kind: Refusal, reason: str) -> None:
        if args.json:
            line = {"v": SCHEMA_VERSION, "type": "corrupt", "topic": raw.topic}
            if kind is not Refusal.CORRUPT:
                line["type"] = "skipped"
                line["kind"] = kind.value
            line.update(partition=raw.partition, offset=raw.offset, reason=reason)
            print(json.dumps(line), flush=True)
        else:
            where = place(raw.topic, raw.partition, None, partitions)
            print(f"{where}@{raw.offset:<6} {kind.value.upper()}: {reason}", flush=True)

    def sink(raw: reader.Raw) -> bool:
        nonlocal corrupt
        if since is not None and raw.timestamp_ms is not None and raw.timestamp_ms < since:
            return True
        try:
            admitted = gates[raw.partition].admit(
                raw.topic, raw.partition, raw.offset, raw.value, raw.headers
            )
        except RecordRefused as exc:  # listed, and the listing goes on (exit 2 at the end)
            corrupt += 1
            refused(raw, exc.kind, exc.reason)
            return True
        for skip in admitted.skipped:  # forged: not an op of the region, and listed as such
            refused(raw, skip.kind, skip.reason)
        for record in admitted.records:  # a pack's ops share its offset
            if key is not None and record.body.key != key:
                continue
            if args.op and type(record.body).__name__.lower() != args.op.lower():
                continue
            view = record_view(raw.topic, raw.partition, raw.offset, raw.timestamp_ms, record)
            print(json.dumps(view) if args.json else record_line(view, partitions), flush=True)
        return True

    heads = bool(checked.keys)
    if args.follow:  # every partition at once, for as long as it runs
        starts = {(args.topic, p): args.from_offset for p in parts}
        reader.read(cluster, starts, sink, follow=True, headers=heads)
    else:  # partition after partition: the listing's order does not depend on fetch timing
        lows = reader.low_watermarks(cluster, [(args.topic, p) for p in parts])
        for (topic, p), low in sorted(lows.items()):
            if low > args.from_offset:
                print(
                    f"note: {topic} partition {p} starts at offset {low}: the records before it"
                    " were deleted by the retention policy",
                    file=sys.stderr,
                )
        for p in parts:
            reader.read(cluster, {(args.topic, p): args.from_offset}, sink, headers=heads)
    return EXIT_CORRUPT if corrupt else EXIT_OK


# --- replay ----------------------------------------------------------------------------------


def summary(result: Replayed) -> dict[str, Any]:
    line: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": "summary",
        "region": result.region_name,
        "region_id": result.region_id,
        "vector": result.vector_named(),
        "local_seq": result.local_seq,
        "digest": result.digest(),
        "positions": {f"{t}:{p}": o for (t, p), o in result.positions().items()},
        "cluster_id": result.cluster_id,
        "offsets": offsets_text(result.positions(), result.cluster_id),
        "waiting_ops": result.waiting(),
        "beyond_cut": result.beyond_cut,
        "tainted": result.tainted,
        "skipped": len(result.skipped),
        "skipped_by_kind": result.skipped_by_kind(),
        "checks": result.checks,
        "records": result.records,
        "seconds": round(result.seconds, 3),
    }
    if result.shards > 1:
        line["shards"] = result.shards
        line["shard"] = result.shard
        line["at"] = result.at()
        line["per_shard"] = [
            {
                "shard": s,
                "vector": {
                    result.names.get(o, str(o)): n for o, n in sorted(region.vector.items())
                },
                "local_seq": region.local_seq,
                "digest": region.state.digest(),
                "waiting_ops": result.waiting(s),
                "tainted": s in result.tainted_shards,
            }
            for s, region in result.regions().items()
        ]
    return line


def replay_verb(args: argparse.Namespace) -> int:
    if args.serve is not None:
        from streams.replay.serve import serve_replay

        return serve_replay(request(args, progress_wanted(args)), args.host, args.serve)
    result = replay(request(args, progress_wanted(args)))
    notes(result)
    key = args.key.encode() if args.key else None
    states = [region.state for region in result.regions().values()]
    if args.digest:
        print(result.digest())
    elif args.json:
        space = result.keyspace()
        keys = [key] if key is not None else sorted(k for s in states for k in s.keys)
        for k in keys:
            ks = space.raw(k)
            if ks is not None and ks.exists:
                print(json.dumps(key_view(k, ks)))
        print(json.dumps(summary(result)))
    else:
        s = summary(result)
        vector = ",".join(f"{n}={v}" for n, v in s["vector"].items()) or "(empty)"
        several = f"; {result.shards} shards" if result.shard is None and result.shards > 1 else ""
        print(
            f"region {result.region_name} (id {result.region_id}){_which(result)} at {vector}; "
            f"local seq {result.local_seq}{several}; {s['records']} records in {s['seconds']}s"
        )
        if several:
            for shard, region in result.regions().items():
                at = vector_text(region.vector, result.names) or "(empty)"
                print(f"shard {shard} at {at}; local seq {region.local_seq}")
        for line in state_lines(states, key):
            print(line)
        if s["waiting_ops"]:
            print(
                f"ops read but not applied (waiting for a causal dependency or a cut): "
                f"{s['waiting_ops']}"
            )
        print(f"digest {s['digest']}")
    return _tainted("replay", result, args.audit)


# --- snapshot --------------------------------------------------------------------------------


def shard_file(path: str, shard: int) -> str:
    """`r1.snap` -> `r1-s2.snap`: shard 2's file when a snapshot is written per shard."""
    stem, ext = os.path.splitext(path)
    return f"{stem}-s{shard}{ext}"


def snapshot_verb(args: argparse.Namespace) -> int:
    req = request(args, progress_wanted(args))
    result = replay(req)
    notes(result)
    per_file = result.shard is None and result.shards > 1
    written: list[str] = []
    for shard, fold in result.folds.items():
        out = shard_file(args.out, shard) if per_file else args.out
        meta = {
            "writer": "streams snapshot",
            "created_at_ms": str(int(time.time() * 1000)),
            "source": req.bootstrap,
            **({SNAPSHOT_META: result.cluster_id} if result.cluster_id else {}),
            "tainted": "true" if shard in result.tainted_shards else "false",
            "shard": str(shard),
        }
        tmp = f"{out}.tmp"
        with open(tmp, "wb") as fp:
            write_snapshot(
                fold.region, fold.safe_positions(), fp, region_name=result.region_name, meta=meta
            )
        os.replace(tmp, out)
        written.append(out)
        vector = vector_text(fold.region.vector, result.names)
        which = f" shard {shard}" if per_file else _which(result)
        print(
            f"snapshot of {result.region_name}{which} at {vector} -> {out} "
            f"(digest {fold.region.state.digest()})"
        )
    if per_file:
        boot = " ".join(f"--snapshot {path}" for path in written)
        print(f"region {result.region_name} digest {result.digest()}; a node boots with {boot}")
    return EXIT_CORRUPT if result.tainted else EXIT_OK


# --- diff ------------------------------------------------------------------------------------


def diff_verb(args: argparse.Namespace) -> int:
    from streams.replay import diff as d

    regions = args.region or [None, None]
    if len(regions) != 2:
        raise PositionError("give --region twice (one per --bootstrap) or not at all")
    checked = trust(args)
    bootstraps = args.bootstrap or []
    if not bootstraps and args.topology and None not in regions:
        try:
            bootstraps = [load_topology(args.topology).region(r).bootstrap for r in regions]
        except KeyError as exc:
            raise PositionError(f"--topology {args.topology}: {exc.args[0]}") from None
    if len(bootstraps) != 2:
        raise PositionError("give --bootstrap exactly twice (or --topology and --region twice)")
    with Progress("diff", progress_wanted(args)) as progress:
        a = d.load(bootstraps[0], regions[0], args.shard, progress, checked)
        b = d.load(bootstraps[1], regions[1], args.shard, progress, checked)
        reports = d.diff_clusters(a, b, progress)
    names = {**a.names, **b.names}
    sharded = a.shards > 1
    side = {"a": a.name, "b": b.name}
    for which, cluster in (("a", a), ("b", b)):
        for skip in cluster.skipped:
            print(f"streams diff: {cluster.name} ({which}): {skip.text()}", file=sys.stderr)
    shared = at_text({s: r.shared for s, r in reports.items()}, names, a.shards)
    lines: list[dict[str, Any]] = []
    for shard, report in reports.items():
        tag = {"shard": shard} if sharded else {}
        for bug in report.bugs:
            where = bug.where
            lines.append(
                {
                    "v": SCHEMA_VERSION,
                    "type": "divergence",
                    "key": text(bug.key),
                    **tag,
                    "first_op": None if bug.op is None else d.describe_op(bug.op, names),
                    "topic": None if where is None else where[0][0],
                    **({"partition": None if where is None else where[0][1]} if sharded else {}),
                    "offset": None if where is None else where[1],
                    "cluster_id": a.cluster_id,  # the offset is one of side a's cluster
                    "index": bug.index,
                }
            )
        for lag in report.lagging:
            lines.append(
                {
                    "v": SCHEMA_VERSION,
                    "type": "diff",
                    "key": text(lag.key),
                    **tag,
                    "behind": side[lag.side],
                    "missing": [d.describe_op(op, names) for op in lag.missing],
                    "held": [d.describe_op(op, names) for op in lag.held],
                }
            )
    equal = sum(r.equal_keys for r in reports.values())
    differs = any(r.differs for r in reports.values())
    if args.json:
        for line in lines:
            print(json.dumps(line))
        end = {"v": SCHEMA_VERSION, "type": "summary", "a": a.name, "b": b.name}
        end.update(shared=shared, equal_keys=equal, differs=differs)
        end.update(clusters={"a": a.cluster_id, "b": b.cluster_id})
        end.update(skipped={"a": len(a.skipped), "b": len(b.skipped)})
        print(json.dumps(end))
        return EXIT_DIFFERS if differs else EXIT_OK
    print(
        f"diff {a.name} ({bootstraps[0]}) vs {b.name} ({bootstraps[1]}); "
        f"shared position {shared or '(empty)'}"
    )
    for line in lines:
        key = f"key {line['key']}" + (f" (shard {line['shard']})" if sharded else "")
        if line["type"] == "divergence":
            found = ""
            if line["topic"]:
                at = place(line["topic"], line.get("partition", 0), line["offset"], a.shards)
                found = f" ({at})"
            print(
                f"CONVERGENCE BUG: {key} differs at the same position; "
                f"first diverging op: {line['first_op'] or '(from the start)'}{found}"
            )
            continue
        for op in line["missing"]:
            print(
                f"lagging: {key}: {line['behind']} has not applied {op} (missing from its cluster)"
            )
        for op in line["held"]:
            print(
                f"lagging: {key}: {line['behind']} has not applied {op} "
                "(read, held back waiting for a causal dependency)"
            )
    print(f"{equal} key(s) equal")
    return EXIT_DIFFERS if differs else EXIT_OK


# --- history ---------------------------------------------------------------------------------


def history_verb(args: argparse.Namespace) -> int:
    from streams.replay import history as hist

    h = hist.history(request(args, progress_wanted(args)), args.key.encode())
    result = h.result
    views = [hist.step_view(step, h) for step in [*h.steps, *h.unapplied]]
    summary_line = hist.summary_view(h)
    if args.json:
        for view in views:
            print(json.dumps(view))
        print(json.dumps(summary_line))
    else:
        vector = ",".join(f"{n}={v}" for n, v in summary_line["vector"].items()) or "(empty)"
        print(
            f"history of {args.key} in region {result.region_name} (id {result.region_id})"
            f"{_which(result)} at {vector}: {len(h.steps)} op(s) applied, {len(h.unapplied)} "
            f"read but not applied; {result.records} records in {summary_line['seconds']}s"
        )
        if not views:
            print(f"(no op in these logs touched key {args.key})")
        for view in views:
            print(hist.step_line(view, result.names, result.shards))
    return _tainted("history", result, args.audit)
