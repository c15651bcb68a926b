"""XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO HELP: Redis 7.0 shapes,
with Redis 8's additions to XINFO STREAM (the IDMP fields, 8.6; a group's nacked-count in FULL,
8.8).

Key/value replies are `Map`s, as Redis 7.0 answers them with addReplyMapLen: maps in RESP3, flat
arrays in RESP2. Everything shown is what this region holds: groups are replicated, but their
consumers, PEL, cursors and entries-read are local, so another region shows the same group names
with no consumers and no pending (seed 000, "Group replication").

Where the model differs from one Redis stream:
- last-delivered-id is the group's highest per-origin cursor; entries-read / lag follow
  `streams.crdt.lag`;
- radix-tree-keys / radix-tree-nodes count the entry blocks, which are Redis's listpack nodes,
  and the nodes of the radix tree Redis would hold for them (`EntryLogs.radix_tree`): Redis's
  numbers in a single region; with several origins, every origin log's blocks and tree;
- recorded-first-entry-id is the first live entry in merged order (0-0 when empty).
"""

from __future__ import annotations

from itertools import islice

from streams import errors
from streams.commands.base import (
    Command,
    Context,
    Result,
    command,
    container,
    entry_reply,
    eq,
    parse_int,
)
from streams.commands.groupview import help_reply, pel_keys_between
from streams.crdt.groups import Group, pel_ref
from streams.crdt.idmp import defaults as idmp_defaults
from streams.crdt.lag import first_id, group_lag
from streams.crdt.state import KeyState
from streams.errors import CommandError
from streams.ids import MAX_ID, MIN_ID, format_id
from streams.reply import Map, Reply

_HELP = (
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
)


def _key(ctx: Context, key: bytes) -> KeyState:
    ks = ctx.state.get(key)
    if ks is None:
        raise CommandError(errors.NO_SUCH_KEY)
    return ks


def _entries_read(group: Group) -> Reply:
    return group.entries_read


# --- XINFO GROUPS / CONSUMERS ------------------------------------------------------------------


def xinfo_groups(ctx: Context, args: list[bytes]) -> Result:
    ks = _key(ctx, args[2])
    return Result([_group_map(ks, name, ks.groups[name]) for name in sorted(ks.groups)])


def _group_map(ks: KeyState, name: bytes, group: Group) -> Map:
    return Map(
        (
            (b"name", name),
            (b"consumers", len(group.consumers)),
            (b"pending", len(group.pel)),
            (b"last-delivered-id", format_id(group.last_delivered())),
            (b"entries-read", _entries_read(group)),
            (b"lag", group_lag(ks, group)),
        )
    )


def xinfo_consumers(ctx: Context, args: list[bytes]) -> Result:
    ks = _key(ctx, args[2])
    group = ks.groups.get(args[3])
    if group is None:
        raise errors.xgroup_nogroup(args[2], args[3])
    rows: list[Reply] = []
    for name in sorted(group.consumers):
        consumer = group.consumers[name]
        rows.append(
            Map(
                (
                    (b"name", name),
                    (b"pending", len(consumer.pending)),
                    (b"idle", max(0, ctx.now_ms - consumer.seen_time)),
                )
            )
        )
    return Result(rows)


# --- XINFO STREAM ------------------------------------------------------------------------------


def xinfo_stream(ctx: Context, args: list[bytes]) -> Result:
    """Redis 7.0 accepts exactly `FULL` or `FULL COUNT n` after the key (n < 0 means 10, 0 all),
    and looks the key up before parsing them."""
    ks = _key(ctx, args[2])
    if len(args) == 3:
        return Result(_stream_map(ks, ctx.now_ms))
    if not eq(args[3], b"full"):
        raise errors.subcommand_syntax(args[0], args[1])
    count = 10
    if len(args) > 4:
        if len(args) != 6 or not eq(args[4], b"count"):
            raise errors.subcommand_syntax(args[0], args[1])
        count = parse_int(args[5])
        if count < 0:
            count = 10
    return Result(_full_map(ks, count, ctx.now_ms))


def _header(ks: KeyState, now_ms: int) -> list[tuple[Reply, Reply]]:
    tree_keys, tree_nodes = ks.entries.radix_tree()
    return [
        (b"length", ks.entries.length),
        (b"radix-tree-keys", tree_keys),
        (b"radix-tree-nodes", tree_nodes),
        (b"last-generated-id", format_id(ks.last_id)),
        (b"max-deleted-entry-id", format_id(ks.max_deleted_id)),
        (b"entries-added", ks.entries_added),
        (b"recorded-first-entry-id", format_id(first_id(ks))),
        *_idmp_fields(ks, now_ms),
    ]


def _idmp_fields(ks: KeyState, now_ms: int) -> list[tuple[Reply, Reply]]:
    """Redis 8.6's IDMP fields: the window in effect (the node's defaults if the stream never had
    one), producers and IIDs in it now, and the lifetime counters (`streams.crdt.idmp`)."""
    idmp = ks.idmp
    duration_s, maxsize = idmp_defaults() if idmp is None else idmp.window()
    pids, iids = (0, 0) if idmp is None else idmp.tracked(now_ms)
    return [
        (b"idmp-duration", duration_s),
        (b"idmp-maxsize", maxsize),
        (b"pids-tracked", pids),
        (b"iids-tracked", iids),
        (b"iids-added", 0 if idmp is None else idmp.added),
        (b"iids-duplicates", 0 if idmp is None else idmp.duplicates),
    ]


def _stream_map(ks: KeyState, now_ms: int) -> Map:
    first = ks.entries.first()
    last = ks.entries.last()
    pairs = _header(ks, now_ms) + [
        (b"groups", len(ks.groups)),
        (b"first-entry", None if first is None else entry_reply(first[0], first[2])),
        (b"last-entry", None if last is None else entry_reply(last[0], last[2])),
    ]
    return Map(tuple(pairs))


def _limited(count: int) -> int | None:
    """FULL's COUNT: 0 means everything."""
    return None if count == 0 else count


def _full_map(ks: KeyState, count: int, now_ms: int) -> Map:
    entries = islice(ks.entries.range(MIN_ID, MAX_ID), _limited(count))
    pairs = _header(ks, now_ms) + [
        (b"entries", [entry_reply(sid, fields) for sid, _origin, fields in entries]),
        (b"groups", [_full_group(ks, name, ks.groups[name], count) for name in sorted(ks.groups)]),
    ]
    return Map(tuple(pairs))


def _full_group(ks: KeyState, name: bytes, group: Group, count: int) -> Map:
    pending: list[Reply] = []
    for key in islice(group.pel.keys(), _limited(count)):
        entry = group.pel[key]
        owner = b"" if entry.consumer is None else entry.consumer  # NACKed: no owner
        pending.append(
            [format_id(pel_ref(key)[1]), owner, entry.delivery_time, entry.delivery_count]
        )
    consumers: list[Reply] = []
    for cname in sorted(group.consumers):
        consumer = group.consumers[cname]
        own: list[Reply] = []
        for key in islice(pel_keys_between(consumer.pending, MIN_ID), _limited(count)):
            entry = group.pel[key]
            own.append([format_id(pel_ref(key)[1]), entry.delivery_time, entry.delivery_count])
        consumers.append(
            Map(
                (
                    (b"name", cname),
                    (b"seen-time", consumer.seen_time),
                    (b"pel-count", len(consumer.pending)),
                    (b"pending", own),
                )
            )
        )
    return Map(
        (
            (b"name", name),
            (b"last-delivered-id", format_id(group.last_delivered())),
            (b"entries-read", _entries_read(group)),
            (b"lag", group_lag(ks, group)),
            (b"pel-count", len(group.pel)),
            (b"nacked-count", group.nacked()),
            (b"pending", pending),
            (b"consumers", consumers),
        )
    )


def xinfo_help(ctx: Context, args: list[bytes]) -> Result:
    return Result(help_reply(args[0], _HELP))


COMMANDS: list[Command] = [
    container(
        "xinfo",
        [
            command("xinfo|stream", xinfo_stream),
            command("xinfo|groups", xinfo_groups),
            command("xinfo|consumers", xinfo_consumers),
            command("xinfo|help", xinfo_help),
        ],
    ),
]
