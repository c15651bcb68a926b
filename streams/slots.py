"""Redis Cluster's key space: 16384 hash slots, and how a database's shards divide them.

A key's slot is Redis Cluster's (`keyHashSlot` in cluster.c): CRC16 (XMODEM) of the key, or of its
hash tag (the bytes between the first `{` and the next `}`, when that is not empty), mod 16384.
Keys that share a hash tag share a slot, so a client can keep related streams together.

A database of S shards gives each shard one contiguous slot range, split as `redis-cli --cluster
create` splits the slots over S masters, so a sharded region's CLUSTER SLOTS looks like a fresh
Redis Cluster of S masters. The split depends only on S: every region computes the same one, which
is what lets the mirror copy partition s of an op log to partition s of the other clusters.

A leaf module (pure, no imports of ours): the node, the topology, the tools and the SDK share it.
"""

from __future__ import annotations

import binascii
from bisect import bisect_right
from functools import lru_cache

SLOTS = 16384


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as Redis's crc16.c; the C
    implementation in the standard library is that very CRC."""
    return binascii.crc_hqx(data, 0)


def hash_tag(key: bytes) -> bytes:
    """The part of `key` that is hashed: its hash tag when it has a non-empty one, else all."""
    start = key.find(b"{")
    if start < 0:
        return key
    end = key.find(b"}", start + 1)
    if end < 0 or end == start + 1:
        return key
    return key[start + 1 : end]


def key_slot(key: bytes) -> int:
    """The hash slot of a key, 0..16383 (CLUSTER KEYSLOT)."""
    return crc16(hash_tag(key)) & (SLOTS - 1)


@lru_cache(maxsize=64)
def shard_ranges(shards: int) -> tuple[range, ...]:
    """The slot range of each of `shards` shards, as redis-cli --cluster create assigns slots to
    that many masters (cluster.c's `clusterManagerCommandCreate`: `lround` of a running float)."""
    if not 1 <= shards <= SLOTS:
        raise ValueError(f"a database has 1..{SLOTS} shards, not {shards}")
    per = SLOTS / shards
    ranges: list[range] = []
    first = 0
    cursor = 0.0
    for i in range(shards):
        last = _lround(cursor + per - 1)
        if last > SLOTS - 1 or i == shards - 1:
            last = SLOTS - 1
        ranges.append(range(first, last + 1))
        first = last + 1
        cursor += per
    return tuple(ranges)


def _lround(value: float) -> int:
    """C's lround: halves away from zero (Python's round() rounds halves to even)."""
    return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


@lru_cache(maxsize=64)
def _starts(shards: int) -> tuple[int, ...]:
    return tuple(r.start for r in shard_ranges(shards))


def shard_of_slot(slot: int, shards: int) -> int:
    """Which of `shards` shards owns `slot`."""
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot {slot} is not within 0..{SLOTS - 1}")
    return bisect_right(_starts(shards), slot) - 1


def shard_of(key: bytes, shards: int) -> int:
    """Which of `shards` shards holds `key` (always 0 with one shard, without hashing)."""
    if shards == 1:
        return 0
    return shard_of_slot(key_slot(key), shards)
