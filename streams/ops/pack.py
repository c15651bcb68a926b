"""Op packs: several op-log records in one Kafka record (`oppack.avsc`).

Why: a node under load commits batches of hundreds of ops per transaction, and every Kafka
record costs on every hop, whatever it holds: the writer's `produce()` call with its headers,
the broker's append and index, each mirror copier's consume and produce, and each reader's
message object, headers and hand-off. With one record per op those per-record costs were most
of a replay's time and of a mirror's. A pack carries the ops a writer appends to one partition in
one transaction, in order, so the per-record costs are paid once per pack.

The items are whole op-log record values (single-object encoded, each with its own schema
fingerprint), exactly the bytes a single-op record would carry: the op-log codec reads them
whatever version wrote them, the record gate digests them as it digests single records, and the
Spark rows carry them in their `value` column. A pack holds ops of one kind and one origin; a
writer packs only when a transaction holds two ops or more for a topic (one op stays a plain
record), and starts a new pack at `PACK_BYTES` (a single op over it is written on its own), so
every pack fits a stock broker's 1 MiB record limit.

A log may mix packs and single records (older writers wrote only single records); readers call
`streams.ops.codec.decode_all`, which reads both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import TypeGuard

from fastavro.schema import fingerprint as _avro_fingerprint
from fastavro.schema import to_parsing_canonical_form

from streams.avro_binary import read_long, write_long
from streams.crdt.ops import Op
from streams.ops.codec import DecodeError, KafkaHeaders, Record, Sealed, decode

MARKER = b"\xc3\x01"
PACK_BYTES = 512 * 1024
"""A pack is closed before its items would pass this many bytes (well under the 1,000,000-byte
record batches a stock Kafka broker takes: `streams.kafka.reading`)."""


def _fingerprint() -> bytes:
    text = resources.files("streams.ops").joinpath("oppack.avsc").read_text()
    canonical = to_parsing_canonical_form(json.loads(text))
    return bytes.fromhex(_avro_fingerprint(canonical, "CRC-64-AVRO"))


PACK_FINGERPRINT = _fingerprint()
PACK_PREFIX = MARKER + PACK_FINGERPRINT
"""What every pack value starts with (and no single op-log record does: its fingerprint is an
oplog schema's)."""


class PackError(ValueError):
    """A value that claims to be a pack (its prefix) but is not a well-formed one."""


def is_pack(value: bytes | None) -> TypeGuard[bytes]:
    return value is not None and value[: len(PACK_PREFIX)] == PACK_PREFIX


def pack(items: Sequence[bytes]) -> bytes:
    """One pack of op-log record values, in order (Avro: the array as one block, then 0)."""
    out = bytearray(PACK_PREFIX)
    write_long(out, len(items))
    for item in items:
        write_long(out, len(item))
        out += item
    out.append(0)
    return bytes(out)


def unpack(value: bytes) -> list[bytes]:
    """The op-log record values of a pack (`is_pack(value)`); PackError if it is not well formed
    (any valid Avro encoding of the array is read: several blocks, negative counts)."""
    items: list[bytes] = []
    n = len(value)
    pos = len(PACK_PREFIX)
    try:
        while True:
            count, pos = read_long(value, pos)
            if count == 0:
                break
            if count < 0:
                count = -count
                _size, pos = read_long(value, pos)
            for _ in range(count):
                size, pos = read_long(value, pos)
                end = pos + size
                if size < 0 or end > n:
                    raise PackError(f"item {len(items)} runs past the end of the pack")
                items.append(value[pos:end])
                pos = end
    except IndexError:
        raise PackError("the pack ends inside an item or count") from None
    except ValueError as exc:  # a varint over 64 bits
        raise PackError(str(exc)) from None
    if pos != n:
        raise PackError(f"{n - pos} trailing bytes after the pack")
    if not items:
        raise PackError("an empty pack")
    return items


def decode_each(value: bytes | None) -> list[tuple[bytes, Record]]:
    """The ops a Kafka record value holds, each with its own record bytes: a pack's items in
    order, or the one op of a single record. DecodeError (naming the item) for anything that is
    not an op-log record, a malformed pack, or a pack mixing kinds or origins."""
    if value is None or not is_pack(value):
        return [(value or b"", decode(value))]
    try:
        items = unpack(value)
    except PackError as exc:
        raise DecodeError(f"corrupt op pack ({len(value)} bytes): {exc}") from None
    out: list[tuple[bytes, Record]] = []
    for i, item in enumerate(items):
        try:
            out.append((item, decode(item)))
        except DecodeError as bad:  # not `exc`: compiled, one name has one exception type
            raise DecodeError(f"item {i} of an op pack of {len(items)}: {bad}") from None
    first = _writer_of(out[0][1])
    for i, (_item, record) in enumerate(out):
        if _writer_of(record) != first:
            raise DecodeError(
                f"item {i} of an op pack of {len(items)} is a {_describe(record)} after a "
                f"{_describe(out[0][1])}: a pack holds the ops of one kind and origin"
            )
    return out


def decode_all(value: bytes | None) -> list[Record]:
    """The ops a Kafka record value holds (`decode_each` without the bytes)."""
    return [record for _item, record in decode_each(value)]


def _writer_of(record: Record) -> tuple[bool, int]:
    if isinstance(record, Op):
        return True, record.origin
    return False, record.region


def _describe(record: Record) -> str:
    replicated, origin = _writer_of(record)
    return f"{'replicated' if replicated else 'local'} op of region id {origin}"


def pack_sealed(run: Sequence[Sealed]) -> Sealed:
    """A run of sealed records (one writer, one topic, in order) as the one Kafka record to
    produce: the record itself for a run of one, else a pack. A pack's headers say what it
    holds for tools that read no Avro (kcat): origin, kind, the first and last seq, the count,
    and `type` OpPack; it has no Kafka key (its ops may be of several stream keys)."""
    if len(run) == 1:
        return run[0]
    first = dict(run[0].headers)
    last = dict(run[-1].headers)
    headers: KafkaHeaders = [
        ("origin", first.get("origin")),
        ("seq", first.get("seq")),
        ("last_seq", last.get("seq")),
        ("kind", first.get("kind")),
        ("type", b"OpPack"),
        ("count", b"%d" % len(run)),
    ]
    return Sealed(b"", pack([r.value for r in run]), None, headers)


def packed(values: Sequence[bytes], limit: int = PACK_BYTES) -> Iterator[tuple[int, int]]:
    """Splits `values` (in order) into runs to write as one Kafka record each: (start, end)
    index pairs. A run of one is written as the plain record; longer runs as a pack whose
    items add up to at most `limit` bytes; a value over `limit` is a run of its own."""
    start = 0
    size = 0
    for i, value in enumerate(values):
        if i > start and size + len(value) > limit:
            yield start, i
            start, size = i, 0
        size += len(value)
    if start < len(values):
        yield start, len(values)
