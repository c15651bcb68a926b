"""The snapshot format and its writer: `write_snapshot(region, positions, out)`.

The file is an Avro object container file (fastavro, deflate blocks) of `snapshot_v2.avsc`
records (`format_version=1` still writes `snapshot_v1.avsc`, for tests of the reader); see the
package docstring for the layout and the guarantees. The reader is `streams.snapshot.reading`
(it shares this module's schemas and converters). Everything goes through the public surface of
`streams.crdt` (`EntryLogs.packed_blocks` / `install_blocks`, `EntryLogs.origin_entries` / `add`
for version 1, `Group`, `CausalBuffer`).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import IO, Any, BinaryIO

import fastavro

from streams.avro_binary import signed_u64, unsigned_u64
from streams.crdt.blocks import BLOCK_FORMAT
from streams.crdt.entries import EntryLogs, PackedBlock
from streams.crdt.groups import Group
from streams.crdt.idmp import IdmpState
from streams.crdt.region import Region
from streams.ids import StreamID

FORMAT_VERSION = 3
"""The version written. Versions 1 (entries one by one) and 2 (blocks, before the Redis 8 state:
IDMP, NACKed entries, per-region ack frontiers) are still read, and written on request."""
READABLE_VERSIONS = (1, 2, 3)
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


class SnapshotError(ValueError):
    """A snapshot that cannot be read completely and exactly: never a partial state."""


def _schema_json(version: int = FORMAT_VERSION) -> dict[str, Any]:
    name = f"snapshot_v{version}.avsc"
    text = resources.files("streams.snapshot").joinpath("schemas", name).read_text()
    schema: dict[str, Any] = _without_docs(json.loads(text))
    return schema


def _without_docs(node: Any) -> Any:
    """The schema without its `doc`s, as files embed it: the docs are for readers of the .avsc,
    and every byte of the embedded schema is a byte a damaged file may hide a flip in."""
    if isinstance(node, dict):
        return {k: _without_docs(v) for k, v in node.items() if k != "doc"}
    if isinstance(node, list):
        return [_without_docs(v) for v in node]
    return node


_PARSED = fastavro.parse_schema(_schema_json())
_PARSED_BY_VERSION = {
    FORMAT_VERSION: _PARSED,
    1: fastavro.parse_schema(_schema_json(1)),
    2: fastavro.parse_schema(_schema_json(2)),
}


# --- small converters ------------------------------------------------------------------------


def _id_out(sid: StreamID) -> dict[str, int]:
    return {"ms": signed_u64(sid[0]), "seq": signed_u64(sid[1])}


def _id_in(d: Mapping[str, int]) -> StreamID:
    return (unsigned_u64(d["ms"]), unsigned_u64(d["seq"]))


def _oids_out(items: Mapping[int, StreamID]) -> list[dict[str, Any]]:
    return [{"origin": o, "id": _id_out(sid)} for o, sid in sorted(items.items())]


def _oids_in(items: list[dict[str, Any]]) -> dict[int, StreamID]:
    return {int(d["origin"]): _id_in(d["id"]) for d in items}


def _dead_out(p: PackedBlock) -> bytes:
    return p.dead.to_bytes((p.slots + 7) // 8, "little")


def _block_crc(p: PackedBlock, dead: bytes) -> int:
    """CRC-32 of a block's numbers, dead mask and payload: Avro's deflate has no checksum, and a
    flipped dot-seq delta would change no digest."""
    head = b"%d-%d %d-%d %d %d:" % (*p.first, *p.last, p.slots, p.lp_base)
    return zlib.crc32(p.payload, zlib.crc32(dead, zlib.crc32(head)))


def _block_out(p: PackedBlock) -> dict[str, Any]:
    dead = _dead_out(p)
    return {
        "first": _id_out(p.first),
        "last": _id_out(p.last),
        "slots": p.slots,
        "dead": dead,
        "lp_base": p.lp_base,
        "payload": p.payload,
        "crc32": _block_crc(p, dead),
    }


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
    format_version: int = FORMAT_VERSION,
) -> None:
    """Write `region`'s materialized state and the log positions it covers to `out`
    (`format_version` 1: entries one by one, as before version 2; for tests of the reader).

    Ops waiting in the region's causal buffer are not written: `positions` must not pass them
    (the replay fold's `safe_positions()` rewinds each topic to its first unapplied record), so
    the tail replay reads them again.
    """
    for (topic, partition), offset in positions.items():
        if offset < 0 or partition < 0 or not topic:
            raise ValueError(f"bad position {topic}[{partition}]={offset}")
    if format_version not in _PARSED_BY_VERSION:
        raise ValueError(f"snapshot format version {format_version} is not written")
    fastavro.writer(
        out,
        _PARSED_BY_VERSION[format_version],
        _records(region, positions, region_name, dict(meta or {}), with_digest, format_version),
        codec="deflate",
        metadata={MAGIC_KEY: str(format_version)},
    )


def _records(
    region: Region,
    positions: Mapping[Partition, int],
    region_name: str | None,
    meta: dict[str, str],
    with_digest: bool,
    version: int = FORMAT_VERSION,
) -> Iterator[dict[str, Any]]:
    count = 0
    keys = 0
    entries_total = 0

    def rec(name: str, body: dict[str, Any]) -> dict[str, Any]:
        nonlocal count
        count += 1
        return {"item": (_NS + name, body)}

    header = {
        "format_version": version,
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
    }
    if version >= 2:
        header["block_format"] = BLOCK_FORMAT
    yield rec("Header", header)
    state = region.state
    for key in sorted(state.keys):
        ks = state.keys[key]
        keys += 1
        extra: dict[str, Any] = {}
        if version >= 3:
            extra["idmp"] = None if ks.idmp is None else _idmp_meta(ks.idmp)
        yield rec(
            "KeyMeta",
            {
                **extra,
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
        entries_total += ks.entries.length
        yield from (rec(n, b) for n, b in _entry_records(key, ks.entries, version))
        if version >= 3 and ks.idmp is not None:
            yield from (rec("IdmpRecords", b) for b in _idmp_records(key, ks.idmp))
        for name in sorted(ks.groups):
            yield from (rec(n, b) for n, b in _group_records(key, ks.groups[name], version))
    digest = state.digest() if with_digest else None
    yield {
        "item": (
            _NS + "Trailer",
            {"records": count, "keys": keys, "entries": entries_total, "digest": digest},
        )
    }


def _entry_records(
    key: bytes, entries: EntryLogs, version: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A key's entry records: per origin its entries (version 1) or its blocks, in ID order."""
    for origin in entries.origins():
        if version == 1:
            dotted = entries.origin_entries(origin)
            for chunk in _chunks(dotted, lambda e: 16 + sum(map(len, e[2]))):
                yield (
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
            continue
        blocks = entries.packed_blocks(origin)
        for chunk in _chunks(blocks, lambda p: 64 + len(p.payload)):
            yield (
                "EntryBlocks",
                {
                    "key": key,
                    "origin": origin,
                    "blocks": [_block_out(p) for p in chunk],
                },
            )


def _idmp_meta(idmp: IdmpState) -> dict[str, Any]:
    duration_s, maxsize = idmp.config if idmp.config is not None else (None, None)
    return {
        "duration_s": duration_s,
        "maxsize": maxsize,
        "stamp": list(idmp.stamp),
        "added": idmp.added,
        "duplicates": idmp.duplicates,
        "record_count": sum(1 for _record in idmp.records()),
    }


def _idmp_records(key: bytes, idmp: IdmpState) -> Iterator[dict[str, Any]]:
    for chunk in _chunks(idmp.records(), lambda r: 48 + len(r[0]) + len(r[1])):
        yield {
            "key": key,
            "records": [
                {
                    "pid": pid,
                    "iid": iid,
                    "origin": r.origin,
                    "id": _id_out(r.id),
                    "dot": {"origin": r.dot[0], "seq": r.dot[1]},
                    "ts_ms": r.ts_ms,
                    "cleared": r.cleared,
                    "lost": r.lost,
                }
                for pid, iid, r in chunk
            ],
        }


def _group_records(
    key: bytes, group: Group, version: int = FORMAT_VERSION
) -> Iterator[tuple[str, dict[str, Any]]]:
    extra: dict[str, Any] = {}
    if version >= 3:
        extra["nack_seq"] = group.nack_seq
        extra["region_acks"] = [
            {"region": r, "frontier": _oids_out(f)} for r, f in sorted(group.region_acks.items())
        ]
    yield (
        "GroupMeta",
        {
            **extra,
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
                        **({"nack_order": p.nack_order} if version >= 3 else {}),
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
