"""Replay one region's logs from a Kafka cluster to a position: the engine behind the verbs.

A region of S shards is S replicated state machines (DESIGN.md section 13): shard s is partition
s of every log, numbers its own ops and never depends on another shard. So the replay folds each
partition into its own `Region` with its own `Fold`, exactly as the node's shard s does, and the
region's digest combines the shards' digests (`streams.crdt.keyspace.digest`) as CRDT.DIGEST
does. With `shard` (`--shard N`) or `key` (history) only that shard's partitions are read.

Reads the region's `.local` partitions first (so each fold knows every local op's gate before
the replicated ops arrive), then every op-log topic's partitions together, from the snapshots'
positions when given (one file per shard; a snapshot read from another Kafka cluster is
translated by seq, `streams.kafka.clusters`). Every record goes through the shared admission step
(`streams.kafka.records`: the record gate the node's materializer uses, per shard), and its
`continues` goes to the fold as `txn_last`, so another region's transaction read in part (cut
by a mirror, or by the end of what was read) is not applied half. Forged records (a signing
region's, unsigned) are skipped and counted, as the node skips them. Corrupt and untrusted
records fail closed (`CorruptError`) unless `on_corrupt` is "skip": then the shard's result is
tainted. Every skipped record is written to the audit file.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from streams.crdt import ops
from streams.crdt.fold import Fold, Observer, Record
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.kafka import clusters, retention
from streams.kafka.gate import RecordRefused, Refusal
from streams.kafka.records import Admission, Admitted, Skip, Trust
from streams.kafka.snapshot_chunks import read_complete
from streams.kafka.topics import snapshot_topic
from streams.progress import Progress
from streams.replay import reader
from streams.replay.describe import SCHEMA_VERSION
from streams.replay.logs import Logs, discover
from streams.replay.positions import (
    Cut,
    PositionError,
    parse_offsets_on,
    parse_time,
    resolve_cuts,
)
from streams.replay.replayed import Replayed
from streams.snapshot import Positions, SnapshotError, read_shard, read_snapshot

Partition = tuple[str, int]
Listener = Callable[[Partition, int, Record], None]
"""Called with every decoded record before the fold is fed it (history: what was read)."""
RegionFactory = Callable[[int, IdMode], Region]

DEFAULT_AUDIT = "streams-skipped.jsonl"
"""Where `--on-corrupt skip` appends skipped positions unless `--audit` says otherwise (created
only when a record is skipped)."""


class SnapshotPastError(PositionError):
    """The position asked for lies before the snapshot's (refold from the start instead)."""


class TruncatedError(PositionError):
    """The replay would start before a log's first record still held: the retention policy
    deleted what it needs (`streams.kafka.retention`); the text says what it cannot show."""


class CorruptError(RuntimeError):
    """A record that does not decode, or that the record gate refuses, with no `--on-corrupt
    skip` (exit code 2); `kind` says which (`streams.kafka.gate.Refusal`)."""

    def __init__(self, text: str, kind: Refusal = Refusal.CORRUPT) -> None:
        super().__init__(text)
        self.kind = kind


@dataclass
class Request:
    bootstrap: str
    region: str | None = None
    at: str | None = None
    offsets: str | None = None
    time: str | None = None
    snapshot: str | Sequence[str] | None = None
    """A snapshot file, or several (one per shard: `streams.snapshot.read_shard` tells which;
    files of shards not replayed are passed over); a shard without one replays from the start."""
    shard: int | None = None
    """Replay only this shard (`--shard N`); None: every shard (or `key`'s)."""
    key: bytes | None = None
    """Replay only the shard that holds this key (history)."""
    on_corrupt: str = "fail"
    audit: str | None = None
    progress: bool = False
    """Report progress on stderr about once a second (`streams.progress`)."""
    observer: Observer | None = None
    id_mode: str = "strict"
    listen: Listener | None = None
    make_region: RegionFactory | None = None
    """A Region subclass to fold into (history watches one key); not with a snapshot."""
    trust: Trust | None = None
    """What the record gate checks against: the topology file's regions and signing keys
    (`--topology`); None: the regions learned from the logs (no signature is checked)."""

    def snapshot_files(self) -> list[str]:
        if self.snapshot is None:
            return []
        return [self.snapshot] if isinstance(self.snapshot, str) else list(self.snapshot)


@dataclass
class Start:
    """Where one shard's fold starts: a fresh region, or a snapshot's region and positions."""

    region: Region
    positions: Positions = field(default_factory=dict)
    tainted: bool = False


def _starts(req: Request, logs: Logs, shards: list[int], notes: list[str]) -> dict[int, Start]:
    """Each replayed shard's starting point: its snapshot file when one was given. A snapshot
    read from another Kafka cluster is translated by seq (`streams.kafka.clusters`): its state,
    every log read from its beginning; one without a cluster id is used as before, noted."""
    mode = IdMode.parse(req.id_mode)
    starts = {s: Start((req.make_region or Region)(logs.region_id, mode)) for s in shards}
    files = req.snapshot_files()
    if files and req.make_region is not None:
        raise PositionError("this verb replays from the start: it takes no --snapshot")
    seen: dict[int, str] = {}
    for path in files:
        with open(path, "rb") as fp:
            shard = read_shard(fp)
            fp.seek(0)
            region, positions, meta = read_snapshot(fp)
        if shard >= logs.shards:
            raise PositionError(
                f"snapshot {path} is of shard {shard}, but region {logs.region_name} has "
                f"{logs.shards} shard(s)"
            )
        if shard in seen:
            raise PositionError(f"{seen[shard]} and {path} are both snapshots of shard {shard}")
        seen[shard] = path
        if region.id != logs.region_id:
            raise PositionError(
                f"snapshot {path} is of region id {region.id}, not {logs.region_name} "
                f"(id {logs.region_id})"
            )
        if shard in starts:
            tainted = meta.get("tainted", "") not in ("", "false")
            taken_on = clusters.snapshot_cluster(meta)
            positions, origin = clusters.translate(positions, taken_on, logs.cluster_id)
            source = clusters.elsewhere(meta, req.bootstrap)
            if origin is clusters.Origin.OTHER:
                notes.append(
                    clusters.translated_note(f"snapshot {path}", taken_on, logs.cluster_id)
                )
            elif source is not None:  # an older snapshot of another address: translated too
                positions = {}
                notes.append(clusters.translated_note(f"snapshot {path}", source, req.bootstrap))
            elif origin is clusters.Origin.UNKNOWN and positions:
                notes.append(clusters.unknown_warning(f"snapshot {path}", logs.cluster_id))
            starts[shard] = Start(region, positions, tainted)
    return starts


def _cuts(req: Request, logs: Logs, starts: dict[int, Start]) -> dict[int, Cut] | None:
    if not req.at:
        return None
    cuts = resolve_cuts(req.at, logs.ids, logs.shards, list(starts))
    for shard, cut in cuts.items():
        for origin, seq in starts[shard].region.vector.items():
            if seq > cut.get(origin, 0):
                raise SnapshotPastError(
                    f"the snapshot is past the requested position ({logs.names.get(origin, origin)}"
                    f"={seq} > {cut.get(origin, 0)}{_in_shard(logs, shard)})"
                )
    return cuts


def _from_stored(req: Request, logs: Logs, starts: dict[int, Start], notes: list[str]) -> None:
    """A shard replayed from the beginning whose logs no longer reach it (retention deleted
    their first records) starts from the newest snapshot stored in `<region>.snapshot` that the
    logs do reach and that is not past the position asked for (`--at`, `--offsets`); noted.
    Not with `--snapshot` (the operator chose), `--time` (a snapshot says no time), or a verb
    that must see every op (history). When none fits, `_check_reaches` says what is missing."""
    if req.snapshot_files() or req.make_region is not None or req.time:
        return
    topics = [logs.local, *logs.oplogs]
    fresh = [s for s, start in starts.items() if not start.positions]
    begin = [(t, s) for t in topics for s in fresh]
    lows = reader.low_watermarks(req.bootstrap, begin)
    truncated = sorted({s for (_t, s), low in lows.items() if low > 0})
    if not truncated:
        return
    cuts = resolve_cuts(req.at, logs.ids, logs.shards, list(starts)) if req.at else {}
    stops = _stops(req, logs, starts)
    topic = snapshot_topic(logs.region_name)
    for shard in truncated:
        for snapshot_id, data in read_complete(req.bootstrap, topic, keep=64, partition=shard):
            try:
                region, positions, meta = read_snapshot(io.BytesIO(data))
            except SnapshotError:
                continue
            if (
                region.id != logs.region_id
                or clusters.compare(clusters.snapshot_cluster(meta), logs.cluster_id)
                is clusters.Origin.OTHER
            ):
                continue
            cut = cuts.get(shard)
            if cut is not None and any(q > cut.get(o, 0) for o, q in region.vector.items()):
                continue  # past the position asked for
            if any(positions.get(p, 0) > stop for p, stop in stops.items() if p[1] == shard):
                continue
            if any(positions.get((t, shard), 0) < lows[(t, shard)] for t in topics):
                continue  # the logs no longer reach this one either
            starts[shard] = Start(region, positions, meta.get("tainted", "") not in ("", "false"))
            notes.append(
                f"shard {shard}: the logs no longer reach the beginning (the retention policy"
                f" deleted their first records): replayed from snapshot {snapshot_id} stored in"
                f" {topic}"
            )
            break


def _check_reaches(req: Request, topics: list[str], starts: dict[int, Start]) -> None:
    """Refuse a replay that would start before what a log still holds (records deleted by the
    retention policy), saying what it cannot show, rather than fold a state with ops missing."""
    begin = {(t, s): start.positions.get((t, s), 0) for t in topics for s, start in starts.items()}
    lows = reader.low_watermarks(req.bootstrap, list(begin))
    for (topic, shard), low in sorted(lows.items()):
        start = begin[(topic, shard)]
        if retention.reaches(low, start):
            continue
        source = "the snapshot's position" if starts[shard].positions else "the beginning"
        raise TruncatedError(
            f"{topic} partition {shard} now starts at offset {low}: the records before it were"
            f" deleted by the retention policy, and this replay starts at offset {start}"
            f" ({source}), so it cannot show the ops of those {low - start} offsets nor any"
            " state before them; replay from a snapshot at or past them (--snapshot FILE:"
            " `streams snapshot` writes one; the region's nodes keep theirs in <region>.snapshot)"
        )


def _stops(req: Request, logs: Logs, starts: dict[int, Start]) -> dict[Partition, int]:
    stops: dict[Partition, int] = {}
    if not req.offsets:
        return stops
    taken_on, offsets = parse_offsets_on(req.offsets)
    clusters.check(
        "--offsets",
        taken_on,
        logs.cluster_id,
        "give offsets of this cluster (`streams replay --json` prints them with its id), or a "
        "per-origin --at, which means the same on every cluster",
    )
    for (topic, partition), offset in offsets.items():
        if topic not in logs.topics:
            raise PositionError(
                f"--offsets: no topic {topic} among the logs of {logs.region_name} on "
                f"{logs.bootstrap} ({', '.join(logs.topics)})"
            )
        if partition not in starts:
            which = f"shard {partition} is not replayed (--shard)"
            if partition >= logs.shards:
                which = f"{topic} has {logs.shards} partition(s)"
            raise PositionError(f"--offsets: {topic}:{partition}: {which}")
        if offset < starts[partition].positions.get((topic, partition), 0):
            raise SnapshotPastError(f"--offsets: the snapshot is past {topic}:{partition}={offset}")
        stops[(topic, partition)] = offset
    return stops


def _refused_text(exc: RecordRefused) -> str:
    """A gate refusal as a replay words it (the gate's own text speaks of the node's
    materializer and its --skip-record)."""
    return (
        f"refusing the record at topic {exc.topic} partition {exc.partition} offset "
        f"{exc.offset}: {exc.reason}"
    )


def _in_shard(logs: Logs, shard: int) -> str:
    return f" in shard {shard}" if logs.shards > 1 else ""


class _Audit:
    """The `--on-corrupt skip` audit file: opened at the first skipped record, never before."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.fp: TextIO | None = None

    def write(self, entry: dict[str, Any]) -> None:
        if self.fp is None and self.path:
            self.fp = open(self.path, "a")  # noqa: SIM115 (closed after the read)
        if self.fp is not None:
            self.fp.write(json.dumps(entry) + "\n")
            self.fp.flush()

    def close(self) -> None:
        if self.fp is not None:
            self.fp.close()


def replay(req: Request) -> Replayed:
    started = time.monotonic()
    logs = discover(req.bootstrap, req.region)
    notes: list[str] = []
    starts = _starts(req, logs, logs.shards_for(req.shard, req.key), notes)
    _from_stored(req, logs, starts, notes)
    cuts = _cuts(req, logs, starts)
    stops = _stops(req, logs, starts)
    until_ms = parse_time(req.time) if req.time else None

    folds = {
        shard: Fold(
            start.region,
            positions=start.positions,
            cut=None if cuts is None else cuts[shard],
            observer=req.observer,
        )
        for shard, start in starts.items()
    }
    result = Replayed(folds, logs, tainted_shards={s for s, x in starts.items() if x.tainted})
    result.notes = notes
    trust = logs.trust(req.trust)
    result.checks = trust.describe()
    # One gate per shard, as the node's shards have: every shard numbers its own dots.
    admissions = {shard: Admission(trust.gate(logs.region_id)) for shard in starts}
    max_seq: dict[tuple[int, int], int] = {}
    audit = _Audit(req.audit)
    progress = Progress("replay", req.progress)

    def skipped(skip: Skip, shard: int) -> None:
        entry = {"v": SCHEMA_VERSION, "type": "skipped", "kind": skip.kind.value}
        entry.update(
            topic=skip.topic, partition=skip.partition, offset=skip.offset, reason=skip.reason
        )
        result.skipped.append(entry)
        if skip.taints:
            result.tainted_shards.add(shard)
        audit.write(entry)

    def sink(raw: reader.Raw) -> bool:
        part = (raw.topic, raw.partition)
        fold = folds[raw.partition]
        if until_ms is not None and raw.timestamp_ms is not None and raw.timestamp_ms > until_ms:
            return False
        result.records += 1
        progress.tick()  # the records the result counts, so the two figures agree
        admission = admissions[raw.partition]
        try:
            admitted = admission.admit(raw.topic, raw.partition, raw.offset, raw.value, raw.headers)
        except RecordRefused as exc:
            if req.on_corrupt != "skip":
                raise CorruptError(
                    f"{exc if exc.kind is Refusal.CORRUPT else _refused_text(exc)} (nothing was "
                    "skipped; --on-corrupt skip replays over it and marks the state tainted)",
                    exc.kind,
                ) from exc
            admitted = Admitted([], 0, (admission.count(Skip.of(exc)),))
        for skip in admitted.skipped:
            skipped(skip, raw.partition)
        records = admitted.records
        if not records:
            fold.skip(part, raw.offset)
            return True
        for record in records:
            if isinstance(record, ops.Op):
                top = (raw.partition, record.origin)
                max_seq[top] = max(max_seq.get(top, 0), record.seq)
            if req.listen is not None:
                req.listen(part, raw.offset, record)
            fold.feed(part, raw.offset, record, admitted.continues)
        # An op log's partition holds one origin's ops of one shard in seq order: past the
        # shard's cut, nothing more is needed.
        last = records[-1]
        if not isinstance(last, ops.Op) or fold.cut is None:
            return True
        return last.seq <= fold.cut.get(last.origin, 0)

    def read_from(topics: list[str]) -> dict[Partition, int]:
        begin = {
            (t, s): start.positions.get((t, s), 0) for t in topics for s, start in starts.items()
        }
        return reader.read(req.bootstrap, begin, sink, stops=stops, headers=bool(trust.keys))

    _check_reaches(req, [logs.local, *logs.oplogs], starts)
    try:
        ended = read_from([logs.local])
        ended.update(read_from(logs.oplogs))
    finally:
        audit.close()
        progress.finish()
    for fold in folds.values():
        fold.finish()
    for part, wanted in stops.items():
        reached = max(ended.get(part, 0), folds[part[1]].read.get(part, 0))
        if reached < wanted:
            raise PositionError(
                f"--offsets: {part[0]}:{part[1]} ends at offset {reached}, before {wanted}"
            )
    for shard, cut in (cuts or {}).items():
        for cut_origin, cut_seq in cut.items():
            applied = folds[shard].region.vector.get(cut_origin, 0)
            top = max(max_seq.get((shard, cut_origin), 0), applied)
            if top < cut_seq:
                who = logs.names.get(cut_origin, str(cut_origin))
                raise PositionError(
                    f"--at: the logs hold ops of {who} up to seq {top}{_in_shard(logs, shard)}, "
                    f"not {cut_seq}"
                )
    result.seconds = time.monotonic() - started
    return result
