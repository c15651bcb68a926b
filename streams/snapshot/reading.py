"""Read a region snapshot back: `read_snapshot(fp)` (the whole state, checked) and
`read_shard(fp)` (which shard a file holds, from its header alone).

Separate from the writer (`streams.snapshot.format`, whose schema and converters it uses) so
that each stays small; the checks are the format's guarantees: a truncated, reordered or
self-inconsistent file raises `SnapshotError` and never yields a partial state.

Both versions are read: version 1's entries are added one by one (re-packed into fresh blocks
under the node limits in force), version 2's blocks are installed as they are
(`EntryLogs.install_blocks`: a block that disagrees with its own payload, its CRC or the order of
the log is refused), so a 1M-entry state loads in a fraction of the time and keeps its node
boundaries. Either way the loaded state's digest must be the trailer's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any, BinaryIO

import fastavro
from fastavro.schema import to_parsing_canonical_form

from streams.crdt.blocks import BLOCK_FORMAT, READABLE_FORMATS
from streams.crdt.causal import CausalBuffer
from streams.crdt.entries import BlockError, PackedBlock
from streams.crdt.groups import Consumer, Group, PendingEntry
from streams.crdt.idmp import IdmpProducer, IdmpRecord, IdmpState
from streams.crdt.region import Region
from streams.crdt.state import KeyState
from streams.ids import IdMode
from streams.snapshot.format import (
    _NS,
    MAGIC_KEY,
    READABLE_VERSIONS,
    Positions,
    SnapshotError,
    _block_crc,
    _id_in,
    _oids_in,
    _schema_json,
)

_ENTRY_RECORD = {1: "EntryChunk", 2: "EntryBlocks", 3: "EntryBlocks"}


def _canonical(schema_json: str) -> str | None:
    """A schema's Parsing Canonical Form (None: not a schema)."""
    try:
        return str(to_parsing_canonical_form(json.loads(schema_json)))
    except Exception:  # json and fastavro raise several types on junk
        return None


_CANONICAL = {v: to_parsing_canonical_form(_schema_json(v)) for v in READABLE_VERSIONS}
"""Each version's schema: a file must embed exactly its version's (a damaged one is refused even
where it describes records the file does not hold)."""
"""The entry record each version has (the other version's is refused)."""


def read_snapshot(fp: BinaryIO | IO[bytes]) -> tuple[Region, Positions, dict[str, str]]:
    """Read a snapshot; returns (region, positions, meta). Raises SnapshotError on anything
    unreadable, truncated, out of order or inconsistent with its own counts and digest."""
    region, positions, meta, digest = read_snapshot_unchecked(fp)
    if digest is not None and region.state.digest() != digest:
        raise SnapshotError(DIGEST_MISMATCH)
    return region, positions, meta


DIGEST_MISMATCH = "snapshot state does not match its recorded digest"


def read_snapshot_unchecked(
    fp: BinaryIO | IO[bytes],
) -> tuple[Region, Positions, dict[str, str], str | None]:
    """`read_snapshot` without its last check: returns (region, positions, meta, the trailer's
    digest, None when the writer recorded none) for the caller to compare with
    `region.state.digest()` later. Every other check is made: a node booting from its store
    checks the digest after it serves (`streams.node.runtime.digest_check` says why)."""
    try:
        reader = fastavro.reader(fp, return_record_name=True)
    except Exception as exc:  # fastavro raises ValueError, EOFError, ... on a bad header
        raise SnapshotError(f"not a streams snapshot (unreadable container header: {exc})") from exc
    version = reader.metadata.get(MAGIC_KEY)
    if version not in [str(v) for v in READABLE_VERSIONS]:
        raise SnapshotError(
            f"unsupported snapshot format version {version!r} "
            f"(this build reads {', '.join(map(str, READABLE_VERSIONS))})"
        )
    embedded = reader.metadata.get("avro.schema", "")
    if _canonical(embedded) != _CANONICAL[int(version)]:
        raise SnapshotError(
            f"the schema embedded in a version {version} snapshot is not that version's"
        )
    builder = _Builder(int(version))
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


@dataclass(frozen=True)
class SnapshotHeader:
    """What a snapshot covers, from its header alone: the log positions (next offset per
    (topic, partition)), the causal applied vector (origin id -> seq) and the meta. The
    retention rule needs only these (`streams.kafka.retention`), not the state."""

    region_id: int
    positions: dict[tuple[str, int], int]
    vector: dict[int, int]
    meta: dict[str, str]


def read_header(fp: BinaryIO | IO[bytes]) -> SnapshotHeader:
    """The header of a snapshot file (SnapshotError when unreadable)."""
    name, body = _first_record(fp)
    if not isinstance(name, str) or name.removeprefix(_NS) != "Header":
        raise SnapshotError("not a streams snapshot (its first record is not a header)")
    return SnapshotHeader(
        int(body["region_id"]),
        {(p["topic"], int(p["partition"])): int(p["next_offset"]) for p in body["positions"]},
        {int(v["region"]): int(v["seq"]) for v in body["vector"]},
        dict(body["meta"]),
    )


def _first_record(fp: BinaryIO | IO[bytes]) -> tuple[Any, Any]:
    try:
        reader = fastavro.reader(fp, return_record_name=True)
        first: Any = next(iter(reader))
        name, body = first["item"]
    except Exception as exc:  # fastavro raises ValueError, EOFError, ...: no common base
        raise SnapshotError(f"not a streams snapshot (unreadable header: {exc})") from exc
    return name, body


def read_shard(fp: BinaryIO | IO[bytes]) -> int:
    """The shard a snapshot holds, from its header alone: its `shard` meta when it has one, else
    the partition its positions name (a shard reads and writes only its own partition of every
    log), else 0. Raises SnapshotError for an unreadable header or positions in several
    partitions without a `shard` meta."""
    name, body = _first_record(fp)
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

    def __init__(self, version: int) -> None:
        self.version = version
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
        self.idmp_left = 0

    def fail(self, why: str) -> SnapshotError:
        return SnapshotError(f"invalid snapshot at record {self.count}: {why}")

    def take(self, name: str, body: dict[str, Any]) -> None:
        if self.done:
            raise self.fail("records after the trailer")
        if self.region is None and name != "Header":
            raise self.fail(f"{name} before the header")
        handler = getattr(self, f"_on_{name}", None)
        foreign = name in _ENTRY_RECORD.values() and name != _ENTRY_RECORD[self.version]
        if handler is None or foreign:
            raise self.fail(f"unknown record type {name} (format version {self.version})")
        handler(body)
        self.count += 1

    def _on_Header(self, b: dict[str, Any]) -> None:  # noqa: N802
        if self.region is not None:
            raise self.fail("a second header")
        if b["format_version"] != self.version:
            raise self.fail(f"format_version {b['format_version']} (expected {self.version})")
        if self.version >= 2 and b["block_format"] not in READABLE_FORMATS:
            raise self.fail(
                f"blocks encoded as {b['block_format']!r}; this build holds {BLOCK_FORMAT!r}"
            )
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
        if self.idmp_left:
            raise self.fail(f"key {self.key!r}: {self.idmp_left} IDMP records missing")
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
            if entry.consumer is None:  # NACKed: nobody's
                continue
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
        if b.get("idmp") is not None:
            ks.idmp = self._idmp(b["idmp"])
        self.region.state.keys[key] = ks
        self.key, self.ks = key, ks
        self.expected = {"entries": int(b["entry_count"]), "groups": int(b["group_count"])}
        self.keys += 1

    def _idmp(self, union: Any) -> IdmpState:
        m: dict[str, Any] = union[1] if isinstance(union, tuple) else union  # (name, record)
        idmp = IdmpState()
        if m["duration_s"] is not None and m["maxsize"] is not None:
            idmp.config = (int(m["duration_s"]), int(m["maxsize"]))
        ts, origin, seq = (int(v) for v in m["stamp"])
        idmp.stamp = (ts, origin, seq)
        idmp.added, idmp.duplicates = int(m["added"]), int(m["duplicates"])
        self.idmp_left = int(m["record_count"])
        return idmp

    def _on_IdmpRecords(self, b: dict[str, Any]) -> None:  # noqa: N802
        ks = self._current(b, "IdmpRecords")
        if ks.idmp is None or len(b["records"]) > self.idmp_left:
            raise self.fail(f"key {self.key!r}: IDMP records its KeyMeta does not announce")
        for r in b["records"]:
            pid = bytes(r["pid"])
            producer = ks.idmp.producers.get(pid)
            if producer is None:
                producer = ks.idmp.producers[pid] = IdmpProducer()
            dot = (int(r["dot"]["origin"]), int(r["dot"]["seq"]))
            record = IdmpRecord(
                int(r["origin"]), _id_in(r["id"]), dot, int(r["ts_ms"]), r["cleared"], r["lost"]
            )
            producer.add(bytes(r["iid"]), record)
        self.idmp_left -= len(b["records"])

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

    def _on_EntryBlocks(self, b: dict[str, Any]) -> None:  # noqa: N802
        ks = self._current(b, "EntryBlocks")
        if self.group is not None:
            raise self.fail("entries after a group of the same key")
        blocks: list[PackedBlock] = []
        for r in b["blocks"]:
            dead = bytes(r["dead"])
            p = PackedBlock(
                _id_in(r["first"]),
                _id_in(r["last"]),
                int(r["slots"]),
                int.from_bytes(dead, "little"),
                int(r["lp_base"]),
                bytes(r["payload"]),
            )
            if _block_crc(p, dead) != r["crc32"] or len(dead) != (p.slots + 7) // 8:
                raise self.fail(f"key {self.key!r}: block at {p.first} fails its CRC")
            blocks.append(p)
        try:
            self.entries += ks.entries.install_blocks(int(b["origin"]), blocks)
        except BlockError as exc:
            raise self.fail(f"key {self.key!r} origin {b['origin']}: {exc}") from None

    def _on_GroupMeta(self, b: dict[str, Any]) -> None:  # noqa: N802
        ks = self._current(b, "GroupMeta")
        self._close_group()
        name = bytes(b["group"])
        if name in ks.groups:
            raise self.fail(f"group {name!r} repeated")
        group = Group(name, _id_in(b["default_cursor"]), _oids_in(b["cursors"]), b["entries_read"])
        group.ack_sent = _oids_in(b["ack_sent"])
        group.nack_seq = int(b.get("nack_seq", 0))
        group.region_acks = {
            int(r["region"]): _oids_in(r["frontier"]) for r in b.get("region_acks", [])
        }
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
            owner = p["consumer"]
            group.pel[(ms, seq, int(p["origin"]))] = PendingEntry(
                None if owner is None else bytes(owner),
                int(p["delivery_time"]),
                int(p["delivery_count"]),
                int(p.get("nack_order", 0)),
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

    def result(self) -> tuple[Region, Positions, dict[str, str], str | None]:
        if self.region is None:
            raise SnapshotError("empty or truncated snapshot: no header")
        if not self.done:
            raise SnapshotError(f"truncated snapshot: no trailer after {self.count} records")
        return self.region, self.positions, self.meta, self.digest
