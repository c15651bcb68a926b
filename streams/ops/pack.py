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
`decode_each` / `decode_all`, which read both.

Transactions over several records (version 2, `oppack.avsc`): a pack also says where the writer's
transaction ends in its partition (`txn_last`), so that a reader in another region, which a
mirror may hand the first records of a transaction before the rest, can apply it whole
(`streams.crdt.fold`). A transaction of one record is complete by itself; one of several records
writes every record as a pack (a lone large op as a pack of one), so each says where it ends.
Version 1 packs (`oppack_v1.avsc`, no `txn_last`) are still read: their writers never cut a
transaction across records knowingly, and a reader treats each as complete.

        +-------+-------------+-------------------------------------+-------------+---+
        | C3 01 | fingerprint | ops: count, (length, item bytes)... | txn_last    | 0 |
        +-------+-------------+-------------------------------------+-------------+---+
          Avro single-object marker and the schema's CRC-64-AVRO, then the record: the
          array (one block, then the 0 that ends it) and the long (version 2 only)
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


def _fingerprint(name: str) -> bytes:
    text = resources.files("streams.ops").joinpath(name).read_text()
    canonical = to_parsing_canonical_form(json.loads(text))
    return bytes.fromhex(_avro_fingerprint(canonical, "CRC-64-AVRO"))


PACK_FINGERPRINT = _fingerprint("oppack.avsc")
PACK_PREFIX = MARKER + PACK_FINGERPRINT
"""What every pack value this build writes starts with (and no single op-log record does: its
fingerprint is an oplog schema's)."""
PACK_V1_PREFIX = MARKER + _fingerprint("oppack_v1.avsc")
"""A version 1 pack's (no `txn_last`)."""


class PackError(ValueError):
    """A value that claims to be a pack (its prefix) but is not a well-formed one."""


def is_pack(value: bytes | None) -> TypeGuard[bytes]:
    if value is None:
        return False
    head = value[: len(PACK_PREFIX)]
    return head == PACK_PREFIX or head == PACK_V1_PREFIX


def pack(items: Sequence[bytes], txn_last: int = 0) -> bytes:
    """One pack of op-log record values, in order (Avro: the array as one block, then 0, then
    `txn_last`)."""
    out = bytearray(PACK_PREFIX)
    write_long(out, len(items))
    for item in items:
        write_long(out, len(item))
        out += item
    out.append(0)
    write_long(out, txn_last)
    return bytes(out)


def unpack(value: bytes) -> list[bytes]:
    """The op-log record values of a pack (`is_pack(value)`); PackError if it is not well formed
    (any valid Avro encoding of the array is read: several blocks, negative counts)."""
    return unpack_with_end(value)[0]


def unpack_with_end(value: bytes) -> tuple[list[bytes], int]:
    """The items of a pack and its `txn_last` (0 for a version 1 pack)."""
    v2 = value[: len(PACK_PREFIX)] == PACK_PREFIX
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
        txn_last = 0
        if v2:
            txn_last, pos = read_long(value, pos)
    except IndexError:
        raise PackError("the pack ends inside an item or count") from None
    except ValueError as exc:  # a varint over 64 bits
        raise PackError(str(exc)) from None
    if pos != n:
        raise PackError(f"{n - pos} trailing bytes after the pack")
    if not items:
        raise PackError("an empty pack")
    if txn_last < 0:
        raise PackError(f"a negative txn_last ({txn_last})")
    return items, txn_last


def decode_each(value: bytes | None) -> list[tuple[bytes, Record]]:
    """The ops a Kafka record value holds, each with its own record bytes: a pack's items in
    order, or the one op of a single record. DecodeError (naming the item) for anything that is
    not an op-log record, a malformed pack, or a pack mixing kinds or origins."""
    return decode_record(value)[0]


def decode_record(value: bytes | None) -> tuple[list[tuple[bytes, Record]], int]:
    """`decode_each`, and `continues`: the seq of the last op of the record's transaction when
    that transaction goes on past this record (its ops are to be fed to the fold with it), else
    0. DecodeError for a pack whose `txn_last` lies before its own last op."""
    if value is None or not is_pack(value):
        return [(value or b"", decode(value))], 0
    try:
        items, txn_last = unpack_with_end(value)
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
    last = out[-1][1]
    if not txn_last or not isinstance(last, Op):
        return out, 0
    if txn_last < last.seq:
        raise DecodeError(
            f"an op pack ending at seq {last.seq} says its transaction ends at {txn_last}"
        )
    return out, (txn_last if txn_last > last.seq else 0)


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


def pack_sealed(run: Sequence[Sealed], txn_last: int = 0) -> Sealed:
    """A run of sealed records (one writer, one topic, in order) as the one Kafka record to
    produce: the record itself for a run of one (unless `txn_last` says its transaction takes
    several records: then a pack of one, which says so), else a pack. A pack's headers say what
    it holds for tools that read no Avro (kcat): origin, kind, the first and last seq, the
    count, `type` OpPack and, for a transaction of several records, `txn_last`; it has no Kafka
    key (its ops may be of several stream keys)."""
    if len(run) == 1 and not txn_last:
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
    if txn_last:
        headers.append(("txn_last", b"%d" % txn_last))
    return Sealed(b"", pack([r.value for r in run], txn_last), None, headers)


def sealed_records(run: Sequence[Sealed], limit: int = PACK_BYTES) -> list[Sealed]:
    """One transaction's sealed ops for one topic partition as the Kafka records to produce: as
    few as `limit` allows (`packed`); when they take several, each a pack saying where the
    transaction ends (its last replicated op's seq), so another region applies it whole."""
    runs = list(packed([r.value for r in run], limit))
    if len(runs) == 1:
        return [pack_sealed(run)]
    last = run[-1].record
    txn_last = last.seq if isinstance(last, Op) else 0
    return [pack_sealed(run[start:end], txn_last) for start, end in runs]


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
