"""A region's keyspace over its shards: what a command reads, whether the region has one shard or
many.

A key lives in exactly one shard (its slot's), and each shard is a whole replicated state machine
(`Region`, `State`) of its own. Commands read through the `Keyspace` protocol: a `State` is one
(the common case: a command whose keys all live in one shard reads that shard's state directly);
`Sharded` is one over several shards' states (keyless commands such as KEYS, SCAN, DBSIZE,
FLUSHALL, and multi-key commands across shards).

The region's digest combines its shards' digests (`digest`): with one shard it is that shard's
digest, so a region of one shard keeps the digest it always had; with S shards it is the SHA-256
of the S shard digests in shard order, so any process that knows every shard's digest (a node
asking the other nodes of its region, `streams replay`, Spark) computes the same value.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

from streams.crdt.state import KeyState, State


class Keyspace(Protocol):
    """What commands read of the replicated state."""

    def get(self, key: bytes) -> KeyState | None: ...

    def raw(self, key: bytes) -> KeyState | None: ...

    def existing_keys(self) -> Iterator[bytes]: ...

    def remembered_keys(self) -> list[bytes]: ...

    def digest(self) -> str: ...


def digest(shard_digests: Sequence[str]) -> str:
    """The region's digest from every shard's digest, in shard order."""
    if len(shard_digests) == 1:
        return shard_digests[0]
    h = hashlib.sha256(b"streams-shards:%d" % len(shard_digests))
    for each in shard_digests:
        h.update(bytes.fromhex(each))
    return h.hexdigest()


class Sharded:
    """Several shards' states read as one keyspace. `shard_of` names the shard of a key; every key
    a command names must be in `states` (the node answers MOVED for the others first)."""

    __slots__ = ("states", "shard_of", "_digest")

    def __init__(
        self,
        states: Mapping[int, State],
        shard_of: Callable[[bytes], int],
        region_digest: Callable[[], str] | None = None,
    ) -> None:
        """`region_digest`: the whole region's digest when these states are not all of it (a node
        owning some of the shards asks the others); by default, `digest` over `states`."""
        self.states = states
        self.shard_of = shard_of
        self._digest = region_digest

    def get(self, key: bytes) -> KeyState | None:
        return self.states[self.shard_of(key)].get(key)

    def raw(self, key: bytes) -> KeyState | None:
        return self.states[self.shard_of(key)].raw(key)

    def existing_keys(self) -> Iterator[bytes]:
        for index in sorted(self.states):
            yield from self.states[index].existing_keys()

    def remembered_keys(self) -> list[bytes]:
        return list(heapq.merge(*(self.states[i].remembered_keys() for i in sorted(self.states))))

    def digest(self) -> str:
        if self._digest is not None:
            return self._digest()
        return digest([self.states[i].digest() for i in sorted(self.states)])
