"""The snapshot file from per-key pieces encoded on the executors: the same bytes as
`streams.snapshot.write_snapshot`, with the per-entry work spread over the cluster.

Why: `write_snapshot` walks every entry in Python (Avro records, then `State.digest()`), on the
driver, in one thread: about 8 us per op, as much as a sixth of the whole job's CPU and all of it
serial. Each key's part of the file is independent of the others, so an executor encodes it right
after folding the key (`key_part`) and the driver only does byte work: concatenating the
records into Avro container blocks, deflating them (zlib, in threads: it releases the GIL) and
feeding sha256.

What stays the snapshot module's: the records themselves (`streams.snapshot.format._records`, run
on a Region holding the one key), the schema, the header and the block rule of fastavro's writer
(a block is closed once its records reach `SYNC_INTERVAL` bytes; deflate = zlib without its
2-byte header and checksum). The per-key digest input is `State.digest()`'s loop for one key
(`digest_feed`); sha256 over the keys' inputs in key order is the state's digest. Both are
checked against `write_snapshot` and `State.digest()` byte for byte (tests/pipeline/test_pure.py).
"""

from __future__ import annotations

import hashlib
import io
import os
import zlib
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any, BinaryIO

import fastavro

from streams.avro_binary import long_bytes
from streams.crdt.region import Region
from streams.crdt.state import KeyState, feed_key
from streams.snapshot.format import _NS, _PARSED, FORMAT_VERSION, MAGIC_KEY, Partition, _records

SYNC_INTERVAL = 16_000
"""fastavro's default `sync_interval` (1000 * 16-byte sync marker), which `write_snapshot` uses."""


@dataclass
class KeyPart:
    """One key's part of a snapshot: its Avro records (each binary-encoded alone), how many
    entries they hold, its input to the state digest (empty when the key does not exist), and
    the shard whose snapshot it belongs in."""

    key: bytes
    records: list[bytes]
    entries: int
    digest_feed: bytes
    shard: int = 0


def _encode(record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, record)
    return buf.getvalue()


def digest_feed(key: bytes, ks: KeyState) -> bytes:
    """What `State.digest()` feeds sha256 for this key (nothing for a key that does not exist)."""
    if not ks.exists:
        return b""
    out: list[bytes] = []
    feed_key(out.append, key, ks)
    return b"".join(out)


def key_part(key: bytes, ks: KeyState, shard: int = 0) -> KeyPart:
    """Encode one key's snapshot records and digest input (runs on an executor)."""
    region = Region(0)
    region.state.keys[key] = ks
    records = list(_records(region, {}, None, {}, False))[1:-1]  # without Header and Trailer
    return KeyPart(
        key, [_encode(r) for r in records], ks.entries.length, digest_feed(key, ks), shard
    )


def _header_bytes(sync_marker: bytes) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        _PARSED,
        [],
        codec="deflate",
        metadata={MAGIC_KEY: str(FORMAT_VERSION)},
        sync_marker=sync_marker,
    )
    return buf.getvalue()


def _deflate(block: bytes) -> bytes:
    return zlib.compress(block)[2:-1]


class _Blocks:
    """Avro container blocks written in order, deflated by a few threads ahead of the writer."""

    def __init__(self, out: BinaryIO | IO[bytes], sync_marker: bytes, threads: int) -> None:
        self.out = out
        self.sync = sync_marker
        self.pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="snapshot-deflate")
        self.window = max(1, threads) * 2
        self.pending: deque[tuple[int, Future[bytes]]] = deque()
        self.buf = bytearray()
        self.count = 0

    def add(self, record: bytes) -> None:
        self.buf += record
        self.count += 1
        if len(self.buf) >= SYNC_INTERVAL:
            self._close_block()

    def _close_block(self) -> None:
        self.pending.append((self.count, self.pool.submit(_deflate, bytes(self.buf))))
        self.buf = bytearray()
        self.count = 0
        while len(self.pending) > self.window:
            self._write_one()

    def _write_one(self) -> None:
        count, future = self.pending.popleft()
        data = future.result()
        self.out.write(long_bytes(count) + long_bytes(len(data)) + data + self.sync)

    def finish(self, write: bool = True) -> None:
        """Write what is left (or, after a failure, drop it)."""
        try:
            if write and self.count:
                self._close_block()
            while write and self.pending:
                self._write_one()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def write_parts(
    region: Region,
    positions: Mapping[Partition, int],
    parts: Iterable[KeyPart],
    out: BinaryIO | IO[bytes],
    *,
    region_name: str | None = None,
    meta: Mapping[str, str] | None = None,
    sync_marker: bytes | None = None,
    threads: int = 2,
) -> str:
    """Write what `write_snapshot(region', positions, out, ...)` writes, where region' is
    `region` (id, mode, local_seq, vector; its state is not read) holding the keys of `parts`
    (given in increasing key order); returns the state digest."""
    for (topic, partition), offset in positions.items():
        if offset < 0 or partition < 0 or not topic:
            raise ValueError(f"bad position {topic}[{partition}]={offset}")
    marker = sync_marker if sync_marker is not None else _random_marker()
    header = next(iter(_records(region, positions, region_name, dict(meta or {}), False)))
    out.write(_header_bytes(marker))
    blocks = _Blocks(out, marker, threads)
    h = hashlib.sha256()
    records = keys = entries = 0
    last: bytes | None = None
    ok = False
    try:
        blocks.add(_encode(header))
        records += 1
        for part in parts:
            if last is not None and part.key <= last:
                raise ValueError(f"snapshot keys out of order: {part.key!r} after {last!r}")
            last = part.key
            keys += 1
            entries += part.entries
            h.update(part.digest_feed)
            for record in part.records:
                blocks.add(record)
                records += 1
        blocks.add(
            _encode(
                {
                    "item": (
                        _NS + "Trailer",
                        {
                            "records": records,
                            "keys": keys,
                            "entries": entries,
                            "digest": h.hexdigest(),
                        },
                    )
                }
            )
        )
        ok = True
    finally:
        blocks.finish(write=ok)
    return h.hexdigest()


def _random_marker() -> bytes:
    return os.urandom(16)
