"""Replay one region's logs from a Kafka cluster to a position: the engine behind the verbs.

Reads the region's `.local` topic first (so the fold knows every local op's gate before the
replicated ops arrive), then every op-log topic on the cluster together, from the snapshot's
positions when one is given. Corrupt records fail closed (`CorruptError`) unless `on_corrupt`
is "skip": then each skipped position is written to the audit file and the result is tainted.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from streams.crdt import ops
from streams.crdt.fold import Fold, Observer, Record
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.ops.codec import DecodeError, decode
from streams.replay import reader
from streams.replay.describe import SCHEMA_VERSION
from streams.replay.positions import PositionError, parse_offsets, parse_time, resolve_at
from streams.snapshot import read_snapshot
from topology.topics import LOCAL_SUFFIX, OPLOG_SUFFIX

Partition = tuple[str, int]
Listener = Callable[[Partition, int, Record], None]
"""Called with every decoded record before the fold is fed it (history: what was read)."""
RegionFactory = Callable[[int, IdMode], Region]

DEFAULT_AUDIT = "streams-skipped.jsonl"
"""Where `--on-corrupt skip` appends skipped positions unless `--audit` says otherwise (created
only when a record is skipped)."""


class SnapshotPastError(PositionError):
    """The position asked for lies before the snapshot's (refold from the start instead)."""


class CorruptError(RuntimeError):
    """A record that does not decode, with no `--on-corrupt skip` (exit code 2)."""


@dataclass
class Request:
    bootstrap: str
    region: str | None = None
    at: str | None = None
    offsets: str | None = None
    time: str | None = None
    snapshot: str | None = None
    on_corrupt: str = "fail"
    audit: str | None = None
    progress: bool = False
    observer: Observer | None = None
    id_mode: str = "strict"
    listen: Listener | None = None
    make_region: RegionFactory | None = None
    """A Region subclass to fold into (history watches one key); not with a snapshot."""


@dataclass
class Replayed:
    fold: Fold
    region_name: str
    names: dict[int, str]
    topics: list[str]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    tainted: bool = False
    records: int = 0
    seconds: float = 0.0

    @property
    def region(self) -> Region:
        return self.fold.region

    def vector_named(self) -> dict[str, int]:
        return {self.names.get(o, str(o)): s for o, s in sorted(self.region.vector.items())}


def origin_name(topic: str) -> str:
    """`r1.oplog` and MirrorMaker 2's `A.r1.oplog` both name region r1."""
    return topic.removesuffix(OPLOG_SUFFIX).rsplit(".", 1)[-1]


class Progress:
    """`replay: N records, X ops/s, ETA` on stderr about once a second (off with --json)."""

    def __init__(self, enabled: bool, total: int | None, out: TextIO = sys.stderr) -> None:
        self.enabled = enabled
        self.total = total
        self.out = out
        self.done = 0
        self.started = time.monotonic()
        self._last = self.started

    def __call__(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if not self.enabled or now - self._last < 1.0:
            return
        self._last = now
        rate = self.done / max(now - self.started, 1e-6)
        eta = ""
        if self.total and rate > 0:
            eta = f", ETA {max(0.0, (self.total - self.done) / rate):.0f}s"
        of = f" of ~{self.total}" if self.total else ""
        print(f"replay: {self.done}{of} records, {rate:,.0f} records/s{eta}", file=self.out,
              flush=True)


def replay(req: Request) -> Replayed:
    started = time.monotonic()
    topics = reader.list_topics(req.bootstrap)
    locals_ = reader.local_topics(topics)
    if req.region is not None:
        local = f"{req.region}{LOCAL_SUFFIX}"
        if local not in topics:
            have = ", ".join(t.removesuffix(LOCAL_SUFFIX) for t in locals_) or "none"
            raise PositionError(
                f"no topic {local} on {req.bootstrap}: this cluster holds the local log of {have}"
            )
    elif len(locals_) == 1:
        local = locals_[0]
    else:
        raise PositionError(
            f"{req.bootstrap} holds {len(locals_)} region-local logs ({', '.join(locals_)}): "
            "name the region with --region"
        )
    region_name = local.removesuffix(LOCAL_SUFFIX)
    oplogs = reader.oplog_topics(topics)
    firsts = reader.first_records(req.bootstrap, [*oplogs, local])
    names: dict[int, str] = {}
    region_id: int | None = None
    for topic, raw in firsts.items():
        try:
            record = decode(raw.value)
        except DecodeError:
            continue  # reported where it is read for real
        if isinstance(record, ops.Op):
            names.setdefault(record.origin, origin_name(topic))
        elif topic == local:
            region_id = record.region
    ids = {name: rid for rid, name in names.items()}
    if region_id is None:
        region_id = ids.get(region_name)
    if region_id is None and region_name.startswith("r") and region_name[1:].isdigit():
        region_id = int(region_name[1:])
    if region_id is None:
        region_id = 0  # the region never wrote: its id matters for nothing replayed
    names.setdefault(region_id, region_name)

    mode = IdMode.parse(req.id_mode)
    region = (req.make_region or Region)(region_id, mode)
    start_positions: dict[Partition, int] = {}
    tainted = False
    if req.snapshot is not None:
        if req.make_region is not None:
            raise PositionError("this verb replays from the start: it takes no --snapshot")
        with open(req.snapshot, "rb") as fp:
            region, start_positions, meta = read_snapshot(fp)
        if region.id != region_id:
            raise PositionError(
                f"snapshot {req.snapshot} is of region id {region.id}, not {region_name} "
                f"(id {region_id})"
            )
        tainted = meta.get("tainted", "") not in ("", "false")

    cut = resolve_at(req.at, ids) if req.at else None
    if cut is not None:
        for origin, seq in region.vector.items():
            if seq > cut.get(origin, 0):
                raise SnapshotPastError(
                    f"the snapshot is past the requested position ({names.get(origin, origin)}"
                    f"={seq} > {cut.get(origin, 0)})"
                )
    stops: dict[Partition, int] = {}
    if req.offsets:
        for topic, offset in parse_offsets(req.offsets).items():
            if topic not in topics:
                raise PositionError(f"--offsets: no topic {topic} on {req.bootstrap}")
            if offset < start_positions.get((topic, 0), 0):
                raise SnapshotPastError(f"--offsets: the snapshot is past {topic}={offset}")
            stops[(topic, 0)] = offset
    until_ms = parse_time(req.time) if req.time else None

    fold = Fold(region, positions=start_positions, cut=cut, observer=req.observer)
    result = Replayed(fold, region_name, names, [local, *oplogs], tainted=tainted)
    max_seq: dict[int, int] = {}
    audit_fp: TextIO | None = None  # opened at the first skipped record, never before

    def sink(raw: reader.Raw) -> bool:
        nonlocal audit_fp
        part = (raw.topic, raw.partition)
        if until_ms is not None and raw.timestamp_ms is not None and raw.timestamp_ms > until_ms:
            return False
        result.records += 1
        try:
            record = decode(raw.value)
        except DecodeError as exc:
            where = f"topic {raw.topic} partition {raw.partition} offset {raw.offset}"
            if req.on_corrupt != "skip":
                raise CorruptError(
                    f"cannot decode the record at {where}: {exc} (nothing was skipped; "
                    "--on-corrupt skip replays over it and marks the state tainted)"
                ) from exc
            entry = {
                "v": SCHEMA_VERSION,
                "type": "skipped",
                "topic": raw.topic,
                "partition": raw.partition,
                "offset": raw.offset,
                "reason": str(exc),
            }
            result.skipped.append(entry)
            result.tainted = True
            if audit_fp is None and req.audit:
                audit_fp = open(req.audit, "a")  # noqa: SIM115 (closed after the read)
            if audit_fp is not None:
                audit_fp.write(json.dumps(entry) + "\n")
                audit_fp.flush()
            fold.skip(part, raw.offset)
            return True
        if isinstance(record, ops.Op):
            max_seq[record.origin] = max(max_seq.get(record.origin, 0), record.seq)
        if req.listen is not None:
            req.listen(part, raw.offset, record)
        fold.feed(part, raw.offset, record)
        # An op log holds one origin's ops in seq order: past the cut, nothing more is needed.
        past = isinstance(record, ops.Op) and cut is not None
        return not (past and record.seq > cut.get(record.origin, 0))  # type: ignore[union-attr]

    progress = Progress(req.progress, None)
    try:
        local_part = (local, 0)
        reader.read(
            req.bootstrap,
            {local_part: start_positions.get(local_part, 0)},
            sink,
            stops=stops,
            progress=progress,
        )
        starts = {(t, 0): start_positions.get((t, 0), 0) for t in oplogs}
        ended = reader.read(req.bootstrap, starts, sink, stops=stops, progress=progress)
    finally:
        if audit_fp is not None:
            audit_fp.close()
    fold.finish()
    for part, wanted in stops.items():
        reached = max(ended.get(part, 0), fold.read.get(part, 0))
        if reached < wanted:
            raise PositionError(f"--offsets: {part[0]} ends at offset {reached}, before {wanted}")
    if cut is not None:
        for cut_origin, cut_seq in cut.items():
            top = max(max_seq.get(cut_origin, 0), region.vector.get(cut_origin, 0))
            if top < cut_seq:
                who = names.get(cut_origin, str(cut_origin))
                raise PositionError(
                    f"--at: the logs hold ops of {who} up to seq {top}, not {cut_seq}"
                )
    result.seconds = time.monotonic() - started
    return result
