"""Deletes that regard the consumer groups' references (Redis 8.2): KEEPREF, DELREF, ACKED.

Shared by XDELEX and XACKDEL (`IDS numids id ...`) and by XADD / XTRIM's trimming. What each
policy does here (docs/architecture.md, "Redis 8 across regions"):

- KEEPREF (the default, as XDEL and XTRIM always did): the entries go; every PEL keeps its
  references, which a later XCLAIM / XAUTOCLAIM drops (Redis's behaviour).
- DELREF: the entries go and a replicated `DropRefs` follows the delete, so every group of every
  region forgets its references to them: a reference in another region's PEL could only ever
  deliver an entry that no longer exists anywhere.
- ACKED: an entry goes only if, for every group, this region's group delivered it and does not
  hold it pending (Redis's test), and every other region of the topology has announced a
  consecutive-XACK frontier past it for that group (`Group.announced`). PELs are local, so the
  frontier a region replicates is the only knowledge the others have of its PEL; an entry pending
  in another region's group is below that region's frontier and is never taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from streams import errors
from streams.commands.base import Context, parse_int
from streams.commands.trimming import RefPolicy, Strategy, TrimArgs, ref_policy
from streams.crdt import ops
from streams.crdt.entries import EntryLogs, MergedEntry
from streams.crdt.groups import PelKey, pel_key
from streams.crdt.ops import Body, EntryRef
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import MAX_ID, MIN_ID, StreamID, parse_id
from streams.numbers import string2ll

Acked = frozenset[tuple[bytes, PelKey]]
"""(group, PEL key) pairs this very command acknowledged (XACKDEL), to count as not pending."""


class IdsArgs:
    """`[KEEPREF | DELREF | ACKED] IDS numids id [id ...]` as XDELEX and XACKDEL parse it."""

    __slots__ = ("policy", "ids")

    def __init__(self, policy: RefPolicy, ids: list[StreamID]) -> None:
        self.policy = policy
        self.ids = ids


def parse_ids_args(args: list[bytes], start: int) -> IdsArgs:
    """The options from `start`: at most one policy word, `IDS numids` and exactly numids IDs
    (fewer: the numids error; anything left over is a syntax error, as in Redis)."""
    policy: RefPolicy | None = None
    ids: list[StreamID] | None = None
    i = start
    while i < len(args):
        opt = args[i]
        word = ref_policy(opt)
        if word is not None and policy is None:
            policy = word
            i += 1
            continue
        if ids is None and opt.lower() == b"ids" and i + 1 < len(args):
            numids = string2ll(args[i + 1])
            if numids is None or numids < 1:
                raise CommandError(errors.NUMIDS_NOT_POSITIVE)
            first = i + 2
            if numids > len(args) - first:
                raise CommandError(errors.NUMIDS_MISMATCH)
            ids = [parse_id(raw, 0) for raw in args[first : first + numids]]
            i = first + numids
            continue
        raise CommandError(errors.SYNTAX)
    if ids is None:
        raise CommandError(errors.SYNTAX)
    return IdsArgs(policy or RefPolicy.KEEPREF, ids)


def deletable(ctx: Context, ks: KeyState, ref: EntryRef, acked: Acked = frozenset()) -> bool:
    """ACKED: every group delivered the entry here and holds it pending nowhere, here or in the
    other regions (as far as their announced frontiers tell)."""
    origin, sid = ref
    key = pel_key(ref)
    for name, group in ks.groups.items():
        if sid > group.cursor(origin):
            return False
        if key in group.pel and (name, key) not in acked:
            return False
        for region in ctx.regions:
            if region != ctx.region and group.announced(region, origin) < sid:
                return False
    return True


def id_deletable(ctx: Context, ks: KeyState, sid: StreamID, acked: Acked = frozenset()) -> bool:
    """ACKED for an ID: every entry carrying it (one per origin) may go."""
    return all(deletable(ctx, ks, (o, sid), acked) for o in ks.entries.origins_with(sid))


def delete_ops(key: bytes, ids: list[StreamID], policy: RefPolicy) -> list[Body]:
    """The ops that delete entries by ID (already chosen: ACKED filtered them)."""
    if not ids:
        return []
    present = tuple(dict.fromkeys(ids))
    out: list[Body] = [ops.XDel(key, present)]
    if policy is RefPolicy.DELREF:
        out.append(ops.DropRefs(key, (), present))
    return out


# --- trims -------------------------------------------------------------------------------------


def acked_trim(
    ctx: Context, ks: KeyState | None, trim: TrimArgs, extra: MergedEntry | None = None
) -> list[StreamID]:
    """The IDs an ACKED trim removes: the entries the exact trim would remove, oldest first,
    skipping those `deletable` refuses (they do not count towards MAXLEN); `~` trims the same
    way, within its LIMIT. `extra` is an XADD's new entry, not applied yet."""
    logs = ks.entries if ks is not None else EntryLogs()
    length = logs.length + (1 if extra is not None else 0)
    cap = trim.limit if trim.approx and trim.limit else None
    chosen: list[StreamID] = []
    for sid, origin, _fields in _oldest_first(logs, extra):
        if cap is not None and len(chosen) >= cap:
            break
        if trim.strategy is Strategy.MAXLEN and length - len(chosen) <= trim.maxlen:
            break
        if trim.strategy is Strategy.MINID and sid >= trim.minid:
            break
        if ks is None or not ks.groups or deletable(ctx, ks, (origin, sid)):
            chosen.append(sid)
    return chosen


def _oldest_first(logs: EntryLogs, extra: MergedEntry | None) -> Iterator[MergedEntry]:
    yield from logs.range(MIN_ID, MAX_ID)
    if extra is not None:
        yield extra


def drop_refs_after_trim(key: bytes, thresholds: ops.OriginIds) -> list[Body]:
    """DELREF's follower of a threshold trim."""
    return [ops.DropRefs(key, thresholds, ())] if thresholds else []


def count_param(raw: bytes) -> int:
    """An integer argument with Redis's generic error (COUNT-like values of these commands)."""
    return parse_int(raw)


def existing(ks: KeyState | None, ids: Iterable[StreamID]) -> list[StreamID]:
    """The IDs that name at least one live entry."""
    return [] if ks is None else [sid for sid in ids if ks.entries.has(sid)]
