"""The operations of the replicated state machine, as frozen dataclasses.

Every value an op needs (the concrete entry ID, the time, the per-origin trim thresholds) is
resolved at the edge, by the command that issued it, and carried in the op: applying an op never
reads a clock or generates anything, so the same op folds to the same state in the live node, in
replay and in Spark.

Every op class writes its own `__init__`, with `object.__setattr__` as the frozen dataclass's
generated one does: compiled (mypyc), that is a native constructor instead of the dataclass
module's Python `__init__` (`XAdd` ~0.23 us against ~0.6 us, `Deliver` ~1.6 us before; ops are
made per command and decoded per record in replay, Spark and the node); `dataclass` keeps an
`__init__` the class defines and still gives the fields, equality, hashing, repr and the frozen
`__setattr__`. Each one is checked against its fields by tests/unit/test_op_constructors.py.

Two kinds:
- replicated bodies travel in `<region>.oplog` inside an `Op` envelope with a dot and a causal
  context, and are applied in every region;
- local bodies travel in `<region>.local` inside a `LocalOp` and are applied only in the region
  that wrote them (consumers, PEL, cursors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard, get_args

from streams.ids import StreamID

Fields = tuple[bytes, ...]
"""An entry's field/value pairs flattened: (f1, v1, f2, v2, ...). No per-entry dicts."""

OriginIds = tuple[tuple[int, StreamID], ...]
"""Per-origin IDs as sorted (origin, id) pairs: hashable and order-stable."""

Vector = tuple[tuple[int, int], ...]
"""A version vector as sorted (region, seq) pairs; absent regions are 0."""


# --- replicated bodies ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class XAdd:
    key: bytes
    id: StreamID
    fields: Fields

    def __init__(self, key: bytes, id: StreamID, fields: Fields) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "fields", fields)


@dataclass(frozen=True, slots=True)
class Del:
    """Observed-remove of the key's entries; kills every group of the key (delete wins)."""

    key: bytes

    def __init__(self, key: bytes) -> None:
        object.__setattr__(self, "key", key)


@dataclass(frozen=True, slots=True)
class XDel:
    """Removes the observed entries carrying these IDs, in every origin log."""

    key: bytes
    ids: tuple[StreamID, ...]

    def __init__(self, key: bytes, ids: tuple[StreamID, ...]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "ids", ids)


@dataclass(frozen=True, slots=True)
class XTrim:
    """Removes observed entries of origin o with ID <= thresholds[o]."""

    key: bytes
    thresholds: OriginIds

    def __init__(self, key: bytes, thresholds: OriginIds) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "thresholds", thresholds)


@dataclass(frozen=True, slots=True)
class XSetId:
    key: bytes
    last_id: StreamID
    entries_added: int | None
    max_deleted_id: StreamID | None

    def __init__(
        self,
        key: bytes,
        last_id: StreamID,
        entries_added: int | None,
        max_deleted_id: StreamID | None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "last_id", last_id)
        object.__setattr__(self, "entries_added", entries_added)
        object.__setattr__(self, "max_deleted_id", max_deleted_id)


@dataclass(frozen=True, slots=True)
class GroupCreate:
    """Creates a group; its delivery cursors start at `start` (per origin, else `default`)."""

    key: bytes
    group: bytes
    default: StreamID
    start: OriginIds
    entries_read: int | None

    def __init__(
        self,
        key: bytes,
        group: bytes,
        default: StreamID,
        start: OriginIds,
        entries_read: int | None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "entries_read", entries_read)


@dataclass(frozen=True, slots=True)
class GroupDestroy:
    key: bytes
    group: bytes

    def __init__(self, key: bytes, group: bytes) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)


@dataclass(frozen=True, slots=True)
class AckEffect:
    """The consecutive-XACK effect: every entry up to `frontier` (per origin) is acknowledged."""

    key: bytes
    group: bytes
    frontier: OriginIds

    def __init__(self, key: bytes, group: bytes, frontier: OriginIds) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "frontier", frontier)


@dataclass(frozen=True, slots=True)
class DropRefs:
    """DELREF (XDELEX, XACKDEL, XADD / XTRIM ... DELREF): every group of every region forgets its
    pending references to the entries of origin o with ID <= thresholds[o] and to every entry
    carrying one of `ids`. Issued right after the XDel / XTrim it goes with, so it names exactly
    the entries that op removed (an origin's IDs grow with its seqs)."""

    key: bytes
    thresholds: OriginIds
    ids: tuple[StreamID, ...]

    def __init__(self, key: bytes, thresholds: OriginIds, ids: tuple[StreamID, ...]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "thresholds", thresholds)
        object.__setattr__(self, "ids", ids)


@dataclass(frozen=True, slots=True)
class Idmp:
    """XADD IDMP / IDMPAUTO (and XIDMPRECORD): producer `pid`'s idempotent ID `iid` names the
    entry (origin, id). Two concurrent records of one (pid, iid) keep the entry lowest in
    (ID, origin) order and remove the other (`streams.crdt.idmp`)."""

    key: bytes
    pid: bytes
    iid: bytes
    origin: int
    id: StreamID

    def __init__(self, key: bytes, pid: bytes, iid: bytes, origin: int, id: StreamID) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "pid", pid)
        object.__setattr__(self, "iid", iid)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "id", id)


@dataclass(frozen=True, slots=True)
class IdmpDuplicate:
    """An XADD IDMP that found its (pid, iid) and added nothing: XINFO STREAM's iids-duplicates."""

    key: bytes

    def __init__(self, key: bytes) -> None:
        object.__setattr__(self, "key", key)


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """XCFGSET: the stream's IDMP window (last writer wins by (time, origin)); `clear`: a value
    changed, so the IID history the issuer observed is forgotten."""

    key: bytes
    duration_s: int
    maxsize: int
    clear: bool

    def __init__(self, key: bytes, duration_s: int, maxsize: int, clear: bool) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "duration_s", duration_s)
        object.__setattr__(self, "maxsize", maxsize)
        object.__setattr__(self, "clear", clear)


ReplicatedBody = (
    XAdd
    | Del
    | XDel
    | XTrim
    | XSetId
    | GroupCreate
    | GroupDestroy
    | AckEffect
    | DropRefs
    | Idmp
    | IdmpDuplicate
    | StreamConfig
)
"""Every replicated body type: the one list (`REPLICATED_TYPES`, the codec, the schema check and
`State`'s apply table follow it)."""


@dataclass(frozen=True, slots=True)
class Op:
    """A replicated op: dot (origin, seq), causal context, origin wall-clock time, body."""

    origin: int
    seq: int
    ctx: Vector
    ts_ms: int
    body: ReplicatedBody

    def __init__(
        self, origin: int, seq: int, ctx: Vector, ts_ms: int, body: ReplicatedBody
    ) -> None:
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "ctx", ctx)
        object.__setattr__(self, "ts_ms", ts_ms)
        object.__setattr__(self, "body", body)

    def ctx_of(self, region: int) -> int:
        for r, s in self.ctx:
            if r == region:
                return s
        return 0

    def observed(self) -> dict[int, int]:
        """Per origin, the highest seq its issuer had applied when it issued this op: its ctx,
        and its own origin's earlier ops. Observed-remove and delete-wins act on exactly that."""
        covered = dict(self.ctx)
        covered[self.origin] = self.seq - 1
        return covered


# --- local bodies --------------------------------------------------------------------------

EntryRef = tuple[int, StreamID]
"""An entry named by (origin, id): with duplicate IDs, the origin tells entries apart."""


@dataclass(frozen=True, slots=True)
class Deliver:
    """XREADGROUP `>`: entries handed to a consumer, cursors advanced, PEL filled (unless noack)."""

    key: bytes
    group: bytes
    consumer: bytes
    now_ms: int
    entries: tuple[EntryRef, ...]
    noack: bool
    entries_read: int | None

    def __init__(
        self,
        key: bytes,
        group: bytes,
        consumer: bytes,
        now_ms: int,
        entries: tuple[EntryRef, ...],
        noack: bool,
        entries_read: int | None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "consumer", consumer)
        object.__setattr__(self, "now_ms", now_ms)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "noack", noack)
        object.__setattr__(self, "entries_read", entries_read)


@dataclass(frozen=True, slots=True)
class TouchConsumer:
    """Creates the consumer if missing and records that it was seen (history reads, CREATECONSUMER).

    `redelivered`: the PEL entries a history read (XREADGROUP with an explicit ID) handed out
    again; like Redis, each gets delivery time `now_ms` and one more delivery.
    """

    key: bytes
    group: bytes
    consumer: bytes
    now_ms: int
    redelivered: tuple[EntryRef, ...] = ()

    def __init__(
        self,
        key: bytes,
        group: bytes,
        consumer: bytes,
        now_ms: int,
        redelivered: tuple[EntryRef, ...] = (),
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "consumer", consumer)
        object.__setattr__(self, "now_ms", now_ms)
        object.__setattr__(self, "redelivered", redelivered)


@dataclass(frozen=True, slots=True)
class Ack:
    key: bytes
    group: bytes
    ids: tuple[StreamID, ...]

    def __init__(self, key: bytes, group: bytes, ids: tuple[StreamID, ...]) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "ids", ids)


@dataclass(frozen=True, slots=True)
class Claim:
    """XCLAIM / XAUTOCLAIM: ownership moves to `consumer`; `dropped` leave the PEL (their entries
    were deleted). `entries` may name one entry twice (XCLAIM given an ID twice): each time
    counts, as in Redis."""

    key: bytes
    group: bytes
    consumer: bytes
    now_ms: int
    entries: tuple[EntryRef, ...]
    delivery_time_ms: int
    retry_count: int | None
    increment: bool
    dropped: tuple[EntryRef, ...]
    last_id: StreamID | None

    def __init__(
        self,
        key: bytes,
        group: bytes,
        consumer: bytes,
        now_ms: int,
        entries: tuple[EntryRef, ...],
        delivery_time_ms: int,
        retry_count: int | None,
        increment: bool,
        dropped: tuple[EntryRef, ...],
        last_id: StreamID | None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "consumer", consumer)
        object.__setattr__(self, "now_ms", now_ms)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "delivery_time_ms", delivery_time_ms)
        object.__setattr__(self, "retry_count", retry_count)
        object.__setattr__(self, "increment", increment)
        object.__setattr__(self, "dropped", dropped)
        object.__setattr__(self, "last_id", last_id)


@dataclass(frozen=True, slots=True)
class SetId:
    key: bytes
    group: bytes
    default: StreamID
    start: OriginIds
    entries_read: int | None

    def __init__(
        self,
        key: bytes,
        group: bytes,
        default: StreamID,
        start: OriginIds,
        entries_read: int | None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "entries_read", entries_read)


@dataclass(frozen=True, slots=True)
class DelConsumer:
    key: bytes
    group: bytes
    consumer: bytes

    def __init__(self, key: bytes, group: bytes, consumer: bytes) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "consumer", consumer)


@dataclass(frozen=True, slots=True)
class Nack:
    """XNACK: the entries go back to the group unowned (NACKed: delivery time 0, claimable at
    once, claimed first in the order they were NACKed). An entry not pending is added unowned
    (FORCE; the command names only entries that exist). `mode` is a `NackMode`; `retry_count`,
    if given, is the delivery count instead of the mode's."""

    key: bytes
    group: bytes
    entries: tuple[EntryRef, ...]
    mode: int
    retry_count: int | None

    def __init__(
        self,
        key: bytes,
        group: bytes,
        entries: tuple[EntryRef, ...],
        mode: int,
        retry_count: int | None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "retry_count", retry_count)


LocalBody = Deliver | TouchConsumer | Ack | Claim | SetId | DelConsumer | Nack
"""Every local body type: the one list, as `ReplicatedBody`."""


@dataclass(frozen=True, slots=True)
class LocalOp:
    """A local op. `ctx` is the region's applied vector when it was made, so a restarting node
    replays it only after the replicated ops it was made on top of."""

    region: int
    seq: int
    ts_ms: int
    body: LocalBody
    ctx: Vector = ()

    def __init__(
        self, region: int, seq: int, ts_ms: int, body: LocalBody, ctx: Vector = ()
    ) -> None:
        object.__setattr__(self, "region", region)
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "ts_ms", ts_ms)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "ctx", ctx)


Body = ReplicatedBody | LocalBody

REPLICATED_TYPES: tuple[type, ...] = get_args(ReplicatedBody)
LOCAL_TYPES: tuple[type, ...] = get_args(LocalBody)


def is_replicated(body: Body) -> TypeGuard[ReplicatedBody]:
    return isinstance(body, REPLICATED_TYPES)


def is_local(body: Body) -> TypeGuard[LocalBody]:
    return isinstance(body, LOCAL_TYPES)
