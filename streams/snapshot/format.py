"""Write and read a region snapshot: `write_snapshot(region, positions, out)` / `read_snapshot(fp)`.

The file is an Avro object container file (fastavro, deflate blocks) of `snapshot_v1.avsc`
records; see the package docstring for the layout and the guarantees. Everything goes through
the public surface of `streams.crdt` (`EntryLogs.add`, `EntryLogs.origin_entries`, `Group`,
`CausalBuffer`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import IO, Any, BinaryIO

import fastavro

from streams.crdt.causal import CausalBuffer
from streams.crdt.entries import EntryLogs
from streams.crdt.groups import Consumer, Group, PendingEntry
from streams.crdt.region import Region
from streams.crdt.state import KeyState
from streams.ids import U64_MAX, IdMode, StreamID

FORMAT_VERSION = 1
MAGIC_KEY = "streams.snapshot.format_version"
"""Container-file metadata naming the format version, readable without decoding any record."""

MAX_CHUNK_ITEMS = 1000
"""At most this many entries / PEL entries / consumers per chunk record."""
MAX_CHUNK_BYTES = 1 << 20
"""A chunk is closed once its field bytes reach this (one huge entry gets a chunk to itself)."""

Partition = tuple[str, int]
Positions = dict[Partition, int]
"""(topic, partition) -> the next offset to read."""

_NS = "streams.snapshot."
_TWO_64 = 1 << 64
_I64_MAX = (1 << 63) - 1


class SnapshotError(ValueError):
    """A snapshot that cannot be read completely and exactly: never a partial state."""


def _schema_json() -> dict[str, Any]:
    text = resources.files("streams.snapshot").joinpath("schemas", "snapshot_v1.avsc").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


_PARSED = fastavro.parse_schema(_schema_json())


# --- small converters ------------------------------------------------------------------------


def _u64_out(v: int) -> int:
    if not 0 <= v <= U64_MAX:
        raise ValueError(f"stream ID part {v} is outside 0..2^64-1")
    return v - _TWO_64 if v > _I64_MAX else v


def _u64_in(v: int) -> int:
    return v + _TWO_64 if v < 0 else v


def _id_out(sid: StreamID) -> dict[str, int]:
    return {"ms": _u64_out(sid[0]), "seq": _u64_out(sid[1])}


def _id_in(d: Mapping[str, int]) -> StreamID:
    return (_u64_in(d["ms"]), _u64_in(d["seq"]))


def _oids_out(items: Mapping[int, StreamID]) -> list[dict[str, Any]]:
    return [{"origin": o, "id": _id_out(sid)} for o, sid in sorted(items.items())]


def _oids_in(items: list[dict[str, Any]]) -> dict[int, StreamID]:
    return {int(d["origin"]): _id_in(d["id"]) for d in items}


DottedEntry = tuple[StreamID, int, tuple[bytes, ...]]


def _entries_by_origin(entries: EntryLogs) -> Iterator[tuple[int, Iterator[DottedEntry]]]:
    """Per origin (ascending): its (id, dot seq, fields) in ID order."""
    for origin in entries.origins():
        yield origin, entries.origin_entries(origin)


def _chunks(items: Iterable[Any], size_of: Any) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    used = 0
    for item in items:
        chunk.append(item)
        used += size_of(item)
        if len(chunk) >= MAX_CHUNK_ITEMS or used >= MAX_CHUNK_BYTES:
            yield chunk
            chunk, used = [], 0
    if chunk:
        yield chunk


# --- writing ---------------------------------------------------------------------------------


def write_snapshot(
    region: Region,
    positions: Mapping[Partition, int],
    out: BinaryIO | IO[bytes],
    *,
    region_name: str | None = None,
    meta: Mapping[str, str] | None = None,
    with_digest: bool = True,
) -> None:
    """Write `region`'s materialized state and the log positions it covers to `out`.

    Ops waiting in the region's causal buffer are not written: `positions` must not pass them
    (the replay fold's `safe_positions()` rewinds each topic to its first unapplied record), so
    the tail replay reads them again.
    """
    for (topic, partition), offset in positions.items():
        if offset < 0 or partition < 0 or not topic:
            raise ValueError(f"bad position {topic}[{partition}]={offset}")
    fastavro.writer(
        out,
        _PARSED,
        _records(region, positions, region_name, dict(meta or {}), with_digest),
        codec="deflate",
        metadata={MAGIC_KEY: str(FORMAT_VERSION)},
    )


def _records(
    region: Region,
    positions: Mapping[Partition, int],
    region_name: str | None,
    meta: dict[str, str],
    with_digest: bool,
) -> Iterator[dict[str, Any]]:
    count = 0
    keys = 0
    entries_total = 0

    def rec(name: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal count
        count += 1
        return {"item": (_NS + name, body)}

    yield rec(
        "Header",
        {
            "format_version": FORMAT_VERSION,
            "region_id": region.id,
            "region_name": region_name,
            "id_mode": region.mode.value,
            "local_seq": region.local_seq,
            "vector": [{"region": r, "seq": s} for r, s in sorted(region.vector.items())],
            "positions": [
                {"topic": t, "partition": p, "next_offset": o}
                for (t, p), o in sorted(positions.items())
            ],
            "meta": meta,
        },
    )
    state = region.state
    for key in sorted(state.keys):
        ks = state.keys[key]
        keys += 1
        yield rec(
            "KeyMeta",
            {
                "key": key,
                "last_id": _id_out(ks.last_id),
                "entries_added": ks.entries_added,
                "max_deleted_id": _id_out(ks.max_deleted_id),
                "entry_count": ks.entries.length,
                "group_count": len(ks.groups),
                "del_tombstones": [{"origin": o, "seq": s} for o, s in ks.del_tombstones],
                "group_tombstones": [
                    {"group": g, "dots": [{"origin": o, "seq": s} for o, s in dots]}
                    for g, dots in sorted(ks.group_tombstones.items())
                ],
            },
        )
        for origin, dotted in _entries_by_origin(ks.entries):
            for chunk in _chunks(dotted, lambda e: 16 + sum(map(len, e[2]))):
                entries_total += len(chunk)
                yield rec(
                    "EntryChunk",
                    {
                        "key": key,
                        "origin": origin,
                        "entries": [
                            {"id": _id_out(sid), "dot_seq": dot, "fields": list(fields)}
                            for sid, dot, fields in chunk
                        ],
                    },
                )
        for name in sorted(ks.groups):
            yield from (rec(n, b) for n, b in _group_records(key, ks.groups[name]))
    digest = state.digest() if with_digest else None
    yield {
        "item": (
            _NS + "Trailer",
            {"records": count, "keys": keys, "entries": entries_total, "digest": digest},
        )
    }


def _group_records(key: bytes, group: Group) -> Iterator[tuple[str, dict[str, Any]]]:
    yield (
        "GroupMeta",
        {
            "key": key,
            "group": group.name,
            "default_cursor": _id_out(group.default_cursor),
            "cursors": _oids_out(group.cursors),
            "ack_sent": _oids_out(group.ack_sent),
            "entries_read": group.entries_read,
            "pending_count": len(group.pel),
            "consumer_count": len(group.consumers),
        },
    )
    for chunk in _chunks(group.pel.items(), lambda _e: 64):
        yield (
            "PendingChunk",
            {
                "key": key,
                "group": group.name,
                "entries": [
                    {
                        "origin": origin,
                        "id": _id_out((ms, seq)),
                        "consumer": p.consumer,
                        "delivery_time": p.delivery_time,
                        "delivery_count": p.delivery_count,
                    }
                    for (ms, seq, origin), p in chunk
                ],
            },
        )
    consumers = sorted(group.consumers.values(), key=lambda c: c.name)
    for chunk in _chunks(consumers, lambda c: 16 + len(c.name)):
        yield (
            "ConsumerChunk",
            {
                "key": key,
                "group": group.name,
                "consumers": [{"name": c.name, "seen_time": c.seen_time} for c in chunk],
            },
        )


# --- reading ---------------------------------------------------------------------------------


def read_snapshot(fp: BinaryIO | IO[bytes]) -> tuple[Region, Positions, dict[str, str]]:
    """Read a snapshot; returns (region, positions, meta). Raises SnapshotError on anything
    unreadable, truncated, out of order or inconsistent with its own counts and digest."""
    try:
        reader = fastavro.reader(fp, return_record_name=True)
    except Exception as exc:  # fastavro raises ValueError, EOFError, ... on a bad header
        raise SnapshotError(f"not a streams snapshot (unreadable container header: {exc})") from exc
    version = reader.metadata.get(MAGIC_KEY)
    if version != str(FORMAT_VERSION):
        raise SnapshotError(
            f"unsupported snapshot format version {version!r} (this build reads {FORMAT_VERSION})"
        )
    builder = _Builder()
    try:
        for datum in reader:
            if not isinstance(datum, dict) or not isinstance(datum.get("item"), tuple):
                raise SnapshotError(f"record {builder.count} is not a snapshot record")
            name, body = datum["item"]
            builder.take(name.removeprefix(_NS), body)
    except SnapshotError:
        raise
    except Exception as exc:  # zlib, EOF, fastavro's own errors: no common base class
        raise SnapshotError(
            f"corrupt or truncated snapshot after {builder.count} records: {exc!r}"
        ) from exc
    return builder.result()


def read_shard(fp: BinaryIO | IO[bytes]) -> int:
    """The shard a snapshot holds, from its header alone: its `shard` meta when it has one, else
    the partition its positions name (a shard reads and writes only its own partition of every
    log), else 0. Raises SnapshotError for an unreadable header or positions in several
    partitions without a `shard` meta."""
    try:
        reader = fastavro.reader(fp, return_record_name=True)
        first: Any = next(iter(reader))
        name, body = first["item"]
    except Exception as exc:  # fastavro raises ValueError, EOFError, ...: no common base
        raise SnapshotError(f"not a streams snapshot (unreadable header: {exc})") from exc
    if not isinstance(name, str) or name.removeprefix(_NS) != "Header":
        raise SnapshotError("not a streams snapshot (its first record is not a header)")
    meta = dict(body["meta"])
    if "shard" in meta:
        try:
            return int(meta["shard"])
        except ValueError:
            raise SnapshotError(f"snapshot meta shard={meta['shard']!r} is not a number") from None
    partitions = {int(p["partition"]) for p in body["positions"]}
    if len(partitions) > 1:
        raise SnapshotError(
            f"a snapshot of several shards (positions in partitions {sorted(partitions)}): "
            "a node boots each shard from a snapshot of that shard"
        )
    return partitions.pop() if partitions else 0


class _Builder:
    """Rebuilds a Region from the records in file order, checking the order and the counts."""

    def __init__(self) -> None:
        self.count = 0
        self.region: Region | None = None
        self.positions: Positions = {}
        self.meta: dict[str, str] = {}
        self.key: bytes | None = None
        self.ks: KeyState | None = None
        self.group: Group | None = None
        self.expected: dict[str, int] = {}
        self.keys = 0
        self.entries = 0
        self.done = False
        self.digest: str | None = None

    def fail(self, why: str) -> SnapshotError:
        return SnapshotError(f"invalid snapshot at record {self.count}: {why}")

    def take(self, name: str, body: dict[str, Any]) -> None:
        if self.done:
            raise self.fail("records after the trailer")
        if self.region is None and name != "Header":
            raise self.fail(f"{name} before the header")
        handler = getattr(self, f"_on_{name}", None)
        if handler is None:
            raise self.fail(f"unknown record type {name}")
        handler(body)
        self.count += 1

    def _on_Header(self, b: dict[str, Any]) -> None:  # noqa: N802
        if self.region is not None:
            raise self.fail("a second header")
        if b["format_version"] != FORMAT_VERSION:
            raise self.fail(f"format_version {b['format_version']} (expected {FORMAT_VERSION})")
        try:
            mode = IdMode.parse(b["id_mode"])
        except ValueError as exc:
            raise self.fail(str(exc)) from None
        region = Region(int(b["region_id"]), mode)
        region.causal = CausalBuffer({int(v["region"]): int(v["seq"]) for v in b["vector"]})
        region.local_seq = int(b["local_seq"])
        self.region = region
        self.positions = {
            (p["topic"], int(p["partition"])): int(p["next_offset"]) for p in b["positions"]
        }
        self.meta = dict(b["meta"])
        if b["region_name"] is not None:
            self.meta.setdefault("region_name", b["region_name"])

    def _close_key(self) -> None:
        if self.ks is None:
            return
        self._close_group()
        if self.ks.entries.length != self.expected["entries"]:
            raise self.fail(
                f"key {self.key!r} has {self.ks.entries.length} entries, "
                f"its KeyMeta says {self.expected['entries']}"
            )
        if len(self.ks.groups) != self.expected["groups"]:
            raise self.fail(f"key {self.key!r}: group count differs from its KeyMeta")

    def _close_group(self) -> None:
        g = self.group
        if g is None:
            return
        if len(g.pel) != self.expected["pel"] or len(g.consumers) != self.expected["consumers"]:
            raise self.fail(f"group {g.name!r} of {self.key!r}: PEL or consumer count differs")
        for key, entry in g.pel.items():
            owner = g.consumers.get(entry.consumer)
            if owner is None:
                raise self.fail(f"group {g.name!r}: pending entry owned by unknown consumer")
            owner.pending.add(key)
        self.group = None

    def _on_KeyMeta(self, b: dict[str, Any]) -> None:  # noqa: N802
        assert self.region is not None
        self._close_key()
        key = bytes(b["key"])
        if self.key is not None and key <= self.key:
            raise self.fail("keys out of order or repeated")
        ks = KeyState()
        ks.last_id = _id_in(b["last_id"])
        ks.entries_added = int(b["entries_added"])
        ks.max_deleted_id = _id_in(b["max_deleted_id"])
        ks.del_tombstones = [(int(d["origin"]), int(d["seq"])) for d in b["del_tombstones"]]
        ks.group_tombstones = {
            bytes(t["group"]): [(int(d["origin"]), int(d["seq"])) for d in t["dots"]]
            for t in b["group_tombstones"]
        }
        self.region.state.keys[key] = ks
        self.key, self.ks = key, ks
        self.expected = {"entries": int(b["entry_count"]), "groups": int(b["group_count"])}
        self.keys += 1

    def _current(self, b: dict[str, Any], what: str) -> KeyState:
        if self.ks is None or bytes(b["key"]) != self.key:
            raise self.fail(f"{what} for key {bytes(b['key'])!r} outside its key")
        return self.ks

    def _on_EntryChunk(self, b: dict[str, Any]) -> None:  # noqa: N802
        ks = self._current(b, "EntryChunk")
        if self.group is not None:
            raise self.fail("entries after a group of the same key")
        origin = int(b["origin"])
        for e in b["entries"]:
            ks.entries.add(origin, int(e["dot_seq"]), _id_in(e["id"]), tuple(e["fields"]))
        self.entries += len(b["entries"])

    def _on_GroupMeta(self, b: dict[str, Any]) -> None:  # noqa: N802
        ks = self._current(b, "GroupMeta")
        self._close_group()
        name = bytes(b["group"])
        if name in ks.groups:
            raise self.fail(f"group {name!r} repeated")
        group = Group(name, _id_in(b["default_cursor"]), _oids_in(b["cursors"]), b["entries_read"])
        group.ack_sent = _oids_in(b["ack_sent"])
        ks.groups[name] = group
        self.group = group
        self.expected["pel"] = int(b["pending_count"])
        self.expected["consumers"] = int(b["consumer_count"])

    def _group_of(self, b: dict[str, Any], what: str) -> Group:
        self._current(b, what)
        if self.group is None or bytes(b["group"]) != self.group.name:
            raise self.fail(f"{what} for group {bytes(b['group'])!r} outside its group")
        return self.group

    def _on_PendingChunk(self, b: dict[str, Any]) -> None:  # noqa: N802
        group = self._group_of(b, "PendingChunk")
        for p in b["entries"]:
            ms, seq = _id_in(p["id"])
            group.pel[(ms, seq, int(p["origin"]))] = PendingEntry(
                bytes(p["consumer"]), int(p["delivery_time"]), int(p["delivery_count"])
            )

    def _on_ConsumerChunk(self, b: dict[str, Any]) -> None:  # noqa: N802
        group = self._group_of(b, "ConsumerChunk")
        for c in b["consumers"]:
            name = bytes(c["name"])
            group.consumers[name] = Consumer(name, int(c["seen_time"]))

    def _on_Trailer(self, b: dict[str, Any]) -> None:  # noqa: N802
        self._close_key()
        if int(b["records"]) != self.count:
            raise self.fail(f"trailer counts {b['records']} records, read {self.count}")
        if int(b["keys"]) != self.keys or int(b["entries"]) != self.entries:
            raise self.fail("trailer key or entry count differs from the records read")
        self.digest = b["digest"]
        self.done = True

    def result(self) -> tuple[Region, Positions, dict[str, str]]:
        if self.region is None:
            raise SnapshotError("empty or truncated snapshot: no header")
        if not self.done:
            raise SnapshotError(f"truncated snapshot: no trailer after {self.count} records")
        if self.digest is not None and self.region.state.digest() != self.digest:
            raise SnapshotError("snapshot state does not match its recorded digest")
        return self.region, self.positions, self.meta
