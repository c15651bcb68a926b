"""Shards as the pipeline sees them: how many a cluster has, one output per shard, digests.

A database of S shards keeps shard s in partition s of every op-log topic (DESIGN.md section 13),
so S is the partition count of the op logs, the same for every `*.oplog` and `*.local` topic (the
node creates them so, and mirrors copy partition s to partition s). The jobs fold per (partition,
key) and hand results to the driver ordered by (shard, key); the helpers here cut such a stream
into shards, and combine per-shard digests into the region's digest the way the node does
(`streams.crdt.keyspace.digest`, which is CRDT.DIGEST's rule). Pure: tested without Spark.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from streams.crdt.keyspace import digest as region_digest

T = TypeVar("T")

__all__ = [
    "ShardCountError",
    "ShardStream",
    "region_digest",
    "shard_count",
    "shard_digests",
    "shard_path",
]


class ShardCountError(ValueError):
    """Op-log topics with different partition counts: no shard count fits them all."""


def shard_count(partitions: Iterable[tuple[str, int]]) -> int:
    """S from the (topic, partition) pairs of a cluster's op logs: every topic must have
    partitions 0..S-1 for one S. No topic: 1 (an empty cluster reads as one empty shard)."""
    per: dict[str, set[int]] = {}
    for topic, p in partitions:
        per.setdefault(topic, set()).add(p)
    counts = {t: len(ps) for t, ps in per.items()}
    gaps = sorted(t for t, ps in per.items() if ps != set(range(len(ps))))
    if gaps:
        raise ShardCountError(f"op-log topic(s) {', '.join(gaps)} do not have partitions 0..n-1")
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{t}: {n}" for t, n in sorted(counts.items()))
        raise ShardCountError(
            f"the op-log topics have different partition counts ({listed}); a database's shard "
            "count is the partition count of every one"
        )
    return next(iter(counts.values()), 1)


def shard_path(out: str, shard: int, shards: int) -> str:
    """The file of `shard`: `out` itself with one shard; else `out` with `{shard}` replaced, or
    `out.shard<s>` when it names no place for the shard."""
    if "{shard}" in out:
        return out.replace("{shard}", str(shard))
    return out if shards == 1 else f"{out}.shard{shard}"


class ShardStream(Generic[T]):
    """Items ordered by shard, taken one shard at a time (`of(s)` for s = 0, 1, ...), each
    shard's items read to the end before the next shard's: one pass over one stream (Spark's
    `toLocalIterator`) feeds S outputs in turn. A shard without items gives an empty iterator."""

    def __init__(self, items: Iterable[T], shard: Callable[[T], int]) -> None:
        self._items = iter(items)
        self._shard = shard
        self._head: T | None = None
        self._has_head = False
        self._last = -1

    def _peek(self) -> int | None:
        if not self._has_head:
            try:
                self._head = next(self._items)
            except StopIteration:
                return None
            self._has_head = True
        return self._shard(self._head)  # type: ignore[arg-type]

    def of(self, shard: int) -> Iterator[T]:
        if shard < self._last:
            raise ValueError(f"shard {shard} asked for after shard {self._last}")
        self._last = shard
        while (s := self._peek()) is not None and s <= shard:
            if s < shard:
                raise ValueError(f"an item of shard {s} after shard {shard} began (out of order)")
            item = self._head
            self._has_head = False
            yield item  # type: ignore[misc]

    def rest(self) -> int | None:
        """The shard of an item left after every shard asked for was read (None: nothing)."""
        return self._peek()


def shard_digests(feeds: Iterable[tuple[int, bytes]], shards: int) -> list[str]:
    """Every shard's `State.digest()` from its keys' digest inputs (`snapshot_file.digest_feed`),
    given as (shard, feed) in (shard, key) order: sha256 over a shard's feeds is its digest."""
    stream = ShardStream(feeds, lambda item: item[0])
    out = []
    for s in range(shards):
        h = hashlib.sha256()
        for _s, feed in stream.of(s):
            h.update(feed)
        out.append(h.hexdigest())
    extra = stream.rest()
    if extra is not None:
        raise ValueError(f"a digest input of shard {extra}, beyond the {shards} shard(s)")
    return out
