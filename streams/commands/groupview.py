"""Read-side helpers the consumer-group commands share (XGROUP, XREADGROUP, XACK, XPENDING,
XCLAIM, XAUTOCLAIM, XINFO): finding a group, naming the entries an ID stands for, walking a PEL by
ID range and HELP.

With duplicate IDs (liberal / semi-strict modes) one ID names several entries, one per origin
log; the PEL is keyed by (ms, seq, origin) so those are separate pending entries, and a command
that names an ID acts on all of them (seed 000's warning).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sortedcontainers import SortedDict, SortedSet

from streams.crdt.groups import Group, PelKey
from streams.crdt.keyspace import Keyspace
from streams.crdt.ops import EntryRef, Fields, OriginIds
from streams.crdt.state import KeyState
from streams.ids import MIN_ID, StreamID
from streams.reply import Reply, Status

_ORIGIN_MAX = 2**63
"""Above every region id: the upper bound of "all origins" in a PEL key range."""


def find_group(state: Keyspace, key: bytes, name: bytes) -> tuple[KeyState, Group] | None:
    ks = state.get(key)
    if ks is None:
        return None
    group = ks.groups.get(name)
    return None if group is None else (ks, group)


def pel_keys_between(
    pel: SortedDict | SortedSet, start: StreamID, end: StreamID | None = None
) -> Iterator[PelKey]:
    """PEL keys (group PEL or a consumer's) with start <= ID <= end, in (ID, origin) order."""
    lo = (start[0], start[1], 0)
    hi = None if end is None else (end[0], end[1], _ORIGIN_MAX)
    return iter(pel.irange(lo, hi))


def refs_with_id(ks: KeyState, group: Group, sid: StreamID) -> list[EntryRef]:
    """Every entry an ID names for a PEL command: live entries with that ID and pending ones
    (whose entry may be gone), by origin."""
    origins = set(ks.entries.origins_with(sid))
    origins.update(key[2] for key in pel_keys_between(group.pel, sid, sid))
    return [(origin, sid) for origin in sorted(origins)]


def entry_fields(ks: KeyState, ref: EntryRef) -> Fields | None:
    return ks.entries.get(ref[0], ref[1])


def dollar_cursors(ks: KeyState | None, region: int) -> tuple[StreamID, OriginIds]:
    """What `$` means for XGROUP CREATE / SETID: the end of each origin log as observed.

    Each origin's cursor starts at that log's top; this region's own origin at the key's last
    ID, so in a single region the group's last-delivered-id is the stream's last ID (Redis).
    Origins not seen yet start at 0-0: all their entries will be delivered when they arrive.
    """
    if ks is None:
        return MIN_ID, ()
    start: dict[int, StreamID] = {}
    for origin in ks.entries.logs:
        top = ks.entries.origin_top(origin)
        if top is not None:
            start[origin] = top
    start[region] = max(ks.last_id, start.get(region, MIN_ID))
    return MIN_ID, tuple(sorted((o, sid) for o, sid in start.items() if sid != MIN_ID))


def help_reply(cmd: bytes, lines: Iterable[str]) -> list[Reply]:
    """Redis's addReplyHelp: a header naming the command as typed (upper-cased), the lines, and
    the HELP footer, all as simple strings."""
    name = cmd.decode("utf-8", "replace").upper()
    out: list[Reply] = [Status(f"{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")]
    out.extend(Status(line) for line in lines)
    out.extend([Status("HELP"), Status("    Prints this help.")])
    return out
