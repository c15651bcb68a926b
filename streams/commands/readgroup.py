"""XREADGROUP: new entries with `>`, the consumer's own history with an explicit ID.

`>` hands out the entries above each origin's delivery cursor (`EntryLogs.after_cursors`), so an
entry that arrives late from another region with an ID below the group's last-delivered-id is
still delivered: unlike XREAD, XREADGROUP never skips (seeds 000 / 004). An explicit ID re-reads
the consumer's PEL from that ID on, counting one more delivery per entry still in the stream and
answering `[id, nil]` for entries deleted since.

`CLAIM min-idle-time` (Redis 8.4) makes a `>` read first claim the group's pending entries idle
at least that long (NACKed ones first, in NACK order, then the longest idle), then read new
entries, within one COUNT; each claimed entry answers `[id, fields, idle, deliveries]` (the
deliveries before this one), each new one `[id, fields, 0, 0]`. The claim is an ordinary `Claim`
local op (ownership, delivery time, one more delivery), as XCLAIM's: it stays in this region.
A blocking CLAIM read that finds nothing runs again when the oldest pending entry reaches the
min-idle-time (`BlockRequest.retry_ms`), as Redis serves it when entries become claimable.

The handler reads the state and returns local ops (Claim / Deliver / TouchConsumer), in
argument order. Like Redis 7.0 it creates the consumer (and refreshes its seen time) only
for the keys it serves: a `>` read that finds nothing new, or that blocks, leaves no trace (a
blocked read creates the consumer when it is served after waking).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import islice

from streams import errors
from streams.commands.base import BlockRequest, Command, Context, Result, command, entry_reply
from streams.commands.groupview import pel_keys_between
from streams.commands.readargs import ReadArgs, parse_read_args
from streams.crdt import ops
from streams.crdt.entries import MergedEntry
from streams.crdt.groups import Group, PelKey, PendingEntry, pel_ref
from streams.crdt.lag import entries_read_after
from streams.crdt.ops import EntryRef
from streams.crdt.state import KeyState, apply_local_to
from streams.errors import CommandError
from streams.ids import MAX_ID, MIN_ID, StreamID, format_id, incr, parse_id
from streams.reply import NULL_ARRAY, Map, Reply

Target = tuple[bytes, KeyState, Group, StreamID | None]
"""(key, key state, group, history start or None for `>`)."""


def _targets(ctx: Context, parsed: ReadArgs) -> list[Target]:
    """Check every key in order as Redis does: its group first, then its ID."""
    assert parsed.group is not None
    out: list[Target] = []
    for key, raw in zip(parsed.keys, parsed.ids, strict=True):
        ks = ctx.state.get(key)
        group = None if ks is None else ks.groups.get(parsed.group)
        if ks is None or group is None:
            raise errors.nogroup_readgroup(key, parsed.group)
        if raw == b"$":
            raise CommandError(errors.XREADGROUP_DOLLAR)
        after: StreamID | None = None
        if raw != b">":
            sid = parse_id(raw, 0)
            # Redis marks `>` with the maximum ID, so naming that ID explicitly means `>` too.
            after = None if sid == MAX_ID else sid
        out.append((key, ks, group, after))
    return out


def _new_entries(ks: KeyState, group: Group) -> Iterator[MergedEntry]:
    """Entries above each origin's cursor, in merged (ID, origin) order: `>` never skips."""
    return ks.entries.after_cursors(group.cursors, group.default_cursor)


def _limit(found: Iterable[MergedEntry], count: int | None) -> list[MergedEntry]:
    return list(found if count is None else islice(found, count))


def _history(
    ks: KeyState, group: Group, consumer: bytes, after: StreamID, count: int | None
) -> tuple[list[Reply], list[EntryRef]]:
    """The consumer's PEL above `after`: the reply rows and the entries delivered again."""
    owner = group.consumers.get(consumer)
    if owner is None:
        return [], []
    start = incr(after) or MIN_ID
    keys: Iterator[tuple[int, int, int]] = pel_keys_between(owner.pending, start)
    rows: list[Reply] = []
    again: list[EntryRef] = []
    for key in keys if count is None else islice(keys, count):
        origin, sid = pel_ref(key)
        fields = ks.entries.get(origin, sid)
        if fields is None:
            rows.append([format_id(sid), NULL_ARRAY])
        else:
            rows.append(entry_reply(sid, fields))
            again.append((origin, sid))
    return rows, again


def _claimable(group: Group, min_idle: int, now_ms: int) -> list[tuple[PelKey, PendingEntry]]:
    """The group's pending entries idle at least `min_idle`, in the order CLAIM takes them:
    NACKed first in NACK order, then by delivery time (oldest first), then by ID."""
    nacked: list[tuple[int, PelKey, PendingEntry]] = []
    owned: list[tuple[int, PelKey, PendingEntry]] = []
    for key, entry in group.pel.items():
        if entry.consumer is None:
            nacked.append((entry.nack_order, key, entry))
        elif now_ms - entry.delivery_time >= min_idle:
            owned.append((entry.delivery_time, key, entry))
    nacked.sort(key=lambda t: (t[0], t[1]))
    owned.sort(key=lambda t: (t[0], t[1]))
    return [(key, entry) for _order, key, entry in nacked + owned]


def _claim(
    ks: KeyState, group: Group, min_idle: int, now_ms: int, count: int | None
) -> tuple[list[Reply], list[EntryRef]]:
    """CLAIM's rows and the entries it takes (those whose entry is gone are left alone)."""
    rows: list[Reply] = []
    taken: list[EntryRef] = []
    for key, entry in _claimable(group, min_idle, now_ms):
        if count is not None and len(taken) >= count:
            break
        origin, sid = pel_ref(key)
        fields = ks.entries.get(origin, sid)
        if fields is None:
            continue
        rows.append(
            [format_id(sid), list(fields), now_ms - entry.delivery_time, entry.delivery_count]
        )
        taken.append((origin, sid))
    return rows, taken


def _claim_wait(ks: KeyState, group: Group, min_idle: int, now_ms: int) -> int | None:
    """Milliseconds until the first owned pending entry (still in the stream) is idle enough."""
    waits = [
        entry.delivery_time + min_idle - now_ms
        for key, entry in group.pel.items()
        if entry.consumer is not None and ks.entries.get(key[2], (key[0], key[1])) is not None
    ]
    return max(1, min(waits)) if waits else None


# XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [CLAIM min-idle-time]
#            [NOACK] STREAMS key [key ...] id [id ...]
def xreadgroup(ctx: Context, args: list[bytes]) -> Result:
    parsed = parse_read_args(args, group=True)
    assert parsed.group is not None and parsed.consumer is not None
    name, consumer = parsed.group, parsed.consumer
    targets = _targets(ctx, parsed)
    repeated = {key for key, n in Counter(parsed.keys).items() if n > 1}
    scratch: dict[bytes, Group] = {}
    served: list[tuple[Reply, Reply]] = []
    out: list[ops.Body] = []
    for key, ks, real, after in targets:
        group = real
        if key in repeated:
            if key not in scratch:
                scratch[key] = real.copy()
            group = scratch[key]
        made: list[ops.LocalBody] = []
        if after is None:
            claimed: list[Reply] = []
            budget = parsed.count
            if parsed.claim_ms is not None:
                claimed, taken = _claim(ks, group, parsed.claim_ms, ctx.now_ms, budget)
                if taken:
                    made.append(_claim_op(key, name, consumer, ctx.now_ms, taken))
                budget = None if budget is None else budget - len(taken)
            found = _limit(_new_entries(ks, group), budget) if budget != 0 else []
            if found:
                read = entries_read_after(ks, group, (sid for sid, _o, _f in found))
                refs = tuple((origin, sid) for sid, origin, _f in found)
                made.append(ops.Deliver(key, name, consumer, ctx.now_ms, refs, parsed.noack, read))
            if not made:
                continue
            if parsed.claim_ms is None:
                served.append((key, [entry_reply(sid, f) for sid, _o, f in found]))
            else:
                fresh: list[Reply] = [[format_id(sid), list(f), 0, 0] for sid, _o, f in found]
                served.append((key, claimed + fresh))
        else:
            rows, again = _history(ks, group, consumer, after, parsed.count)
            made.append(ops.TouchConsumer(key, name, consumer, ctx.now_ms, tuple(again)))
            served.append((key, rows))
        out.extend(made)
        if key in repeated:
            for op in made:
                apply_local_to(ks, group, op)
    if served:
        return Result(Map(tuple(served), nested=True), out, block_ms=parsed.block_ms)
    if parsed.block_ms is None:
        return Result(NULL_ARRAY, out)
    retry = None
    if parsed.claim_ms is not None:
        waits = [_claim_wait(ks, g, parsed.claim_ms, ctx.now_ms) for _k, ks, g, _a in targets]
        retry = min((w for w in waits if w is not None), default=None)
    block = BlockRequest(parsed.keys, parsed.block_ms, tuple(args), WOKEN, retry)
    return Result(NULL_ARRAY, out, block)


def _claim_op(
    key: bytes, group: bytes, consumer: bytes, now_ms: int, taken: list[EntryRef]
) -> ops.Claim:
    """CLAIM's claim: to `consumer`, delivered now, one more delivery (XCLAIM's op)."""
    return ops.Claim(key, group, consumer, now_ms, tuple(taken), now_ms, None, True, (), None)


def woken_xreadgroup(ctx: Context, args: list[bytes]) -> Result:
    """A blocked XREADGROUP run again after one of its keys changed: as Redis 7.0 serves a
    client blocked on a stream, a key that is gone (DEL, FLUSHALL, RENAME, ... also from another
    region) answers UNBLOCKED and a group that is gone answers NOGROUP, naming the block, where
    a first run would answer the usual NOGROUP of XREADGROUP."""
    parsed = parse_read_args(args, group=True)
    assert parsed.group is not None
    for key in parsed.keys:
        ks = ctx.state.get(key)
        if ks is None:
            return Result(CommandError(errors.UNBLOCKED_KEY_DELETED))
        if parsed.group not in ks.groups:
            return Result(CommandError(errors.NOGROUP_BLOCKED))
    return xreadgroup(ctx, args)


COMMANDS: list[Command] = [
    command("xreadgroup", xreadgroup),
]
WOKEN = command("xreadgroup", woken_xreadgroup)
"""XREADGROUP's re-run row (`BlockRequest.rerun`): the same catalogue entry, the handler above."""
