"""Keyspace commands: DBSIZE, KEYS, SCAN, RENAME, RENAMENX, FLUSHDB, FLUSHALL.

SCAN walks the keys in the order of a stable per-key hash (zlib.crc32, ties broken by the key):
the cursor is the next hash value to visit. Each call covers the hash range from its cursor up to
the last hash it returns, and the next cursor starts just above: the ranges of one scan are
disjoint and cover every hash, so a key present during the whole scan is returned exactly once,
whatever keys come and go meanwhile (Redis itself may return a key twice). Keys sharing the last
hash of a batch are all returned in that batch, so a cursor never has to point inside a hash.

RENAME follows the Active-Active rule of the seeds: renaming a stream deletes its consumer group
information. The target gets the source's entries (merged view, one entry per ID: duplicates
collapse) in this region's own log, its last ID and counters, and no groups; then the source is
deleted. It is built from the replicated ops XADD / DEL / XSETID, so every region applies the same
rename: the target's old content and the source are removed observed-remove, as DEL does.

FLUSHDB / FLUSHALL are one observed-remove DEL per key: an entry added concurrently in another
region (not yet seen here) survives the flush, as it survives a DEL.
"""

from __future__ import annotations

import zlib

from streams import errors
from streams.commands.base import Command, Context, Result, command, eq, parse_int
from streams.commands.glob import Pattern
from streams.crdt import ops
from streams.crdt.keyspace import Keyspace
from streams.crdt.ops import Body
from streams.errors import CommandError
from streams.ids import MAX_ID, MIN_ID
from streams.reply import OK, Reply

SCAN_DEFAULT_COUNT = 10
SCAN_MAX_PASSES = 256
"""A full SCAN takes at most about this many calls: each call reads the whole key set once (there
is no hash-ordered index to seek in), so with a huge key set a call returns more than COUNT keys,
as Redis may, to keep a whole scan O(N * SCAN_MAX_PASSES) rather than O(N * N / COUNT)."""
CURSOR_END = 2**32
"""One past the largest crc32: a cursor at or above it has nothing left to visit."""


def key_hash(key: bytes) -> int:
    return zlib.crc32(key)


def dbsize(ctx: Context, args: list[bytes]) -> Result:
    return Result(sum(1 for _ in ctx.state.existing_keys()))


def keys(ctx: Context, args: list[bytes]) -> Result:
    pattern = Pattern(args[1])
    found: list[Reply] = [k for k in ctx.state.existing_keys() if pattern.match(k)]
    return Result(found)


def parse_cursor(raw: bytes) -> int:
    """Redis's parseScanCursorOrReply: strtoull in base 10 (a sign allowed, '-n' wraps modulo
    2**64, an empty string is 0), no leading space, nothing after the digits, no overflow."""
    if raw[:1].isspace():
        raise CommandError(errors.INVALID_CURSOR)
    sign = raw[:1]
    digits = raw[1:] if sign in (b"+", b"-") else raw
    if digits and not digits.isdigit():
        raise CommandError(errors.INVALID_CURSOR)
    if not digits:
        if sign in (b"+", b"-"):
            raise CommandError(errors.INVALID_CURSOR)  # strtoull consumed nothing: "+" stays
        return 0
    value = int(digits)
    if value >= 2**64:
        raise CommandError(errors.INVALID_CURSOR)
    return (-value) % 2**64 if sign == b"-" else value


def scan_batch(keys_present: list[bytes], cursor: int, count: int) -> tuple[int, list[bytes]]:
    """The keys one SCAN call visits from `cursor`, and the next cursor (0 when done)."""
    if cursor >= CURSOR_END:
        return 0, []
    ahead = sorted((h, k) for k in keys_present if (h := key_hash(k)) >= cursor)
    if not ahead:
        return 0, []
    take = max(count, -(-len(keys_present) // SCAN_MAX_PASSES))
    if take >= len(ahead):
        return 0, [k for _, k in ahead]
    last = ahead[take - 1][0]
    while take < len(ahead) and ahead[take][0] == last:
        take += 1
    if take >= len(ahead):
        return 0, [k for _, k in ahead]
    return last + 1, [k for _, k in ahead[:take]]


def scan(ctx: Context, args: list[bytes]) -> Result:
    cursor = parse_cursor(args[1])
    count = SCAN_DEFAULT_COUNT
    pattern: Pattern | None = None
    type_name: bytes | None = None
    i = 2
    while i < len(args):
        left = len(args) - i
        if eq(args[i], b"count") and left >= 2:
            count = parse_int(args[i + 1])
            if count < 1:
                raise CommandError(errors.SYNTAX)
            i += 2
        elif eq(args[i], b"match") and left >= 2:
            pattern = None if args[i + 1] == b"*" else Pattern(args[i + 1])
            i += 2
        elif eq(args[i], b"type") and left >= 2:
            type_name = args[i + 1].lower()
            i += 2
        else:
            raise CommandError(errors.SYNTAX)
    next_cursor, visited = scan_batch(list(ctx.state.existing_keys()), cursor, count)
    found: list[Reply] = [
        k
        for k in visited
        if (pattern is None or pattern.match(k)) and (type_name is None or type_name == b"stream")
    ]
    return Result([str(next_cursor).encode(), found])


def rename_ops(state: Keyspace, src: bytes, dst: bytes) -> list[Body]:
    """The replicated ops that rename an existing stream `src` to another name `dst`."""
    ks = state.get(src)
    assert ks is not None
    out: list[Body] = []
    if state.raw(dst) is not None:
        out.append(ops.Del(dst))
    previous = None
    for sid, _origin, fields in ks.entries.range(MIN_ID, MAX_ID):
        if sid != previous:  # merged order puts equal IDs together: keep the first
            out.append(ops.XAdd(dst, sid, fields))
            previous = sid
    out.append(ops.XSetId(dst, ks.last_id, ks.entries_added, ks.max_deleted_id))
    out.append(ops.Del(src))
    return out


def _rename(ctx: Context, args: list[bytes], nx: bool) -> Result:
    src, dst = args[1], args[2]
    if ctx.state.get(src) is None:
        raise CommandError(errors.NO_SUCH_KEY)
    if src == dst:
        return Result(0 if nx else OK)
    if nx and ctx.state.get(dst) is not None:
        return Result(0)
    return Result(1 if nx else OK, rename_ops(ctx.state, src, dst))


def rename(ctx: Context, args: list[bytes]) -> Result:
    return _rename(ctx, args, nx=False)


def renamenx(ctx: Context, args: list[bytes]) -> Result:
    return _rename(ctx, args, nx=True)


def flush_ops(state: Keyspace) -> list[Body]:
    """One observed-remove DEL per key this region holds: every key with an entry or a group,
    and every emptied stream whose last ID is still remembered (Redis would drop it too)."""
    return [ops.Del(key) for key in state.remembered_keys()]


def flush(ctx: Context, args: list[bytes]) -> Result:
    if len(args) > 2 or (len(args) == 2 and not (eq(args[1], b"async") or eq(args[1], b"sync"))):
        raise CommandError(errors.SYNTAX)
    return Result(OK, flush_ops(ctx.state))


COMMANDS: list[Command] = [
    command("dbsize", dbsize),
    command("keys", keys),
    command("scan", scan),
    command("rename", rename),
    command("renamenx", renamenx),
    command("flushdb", flush),
    command("flushall", flush),
]
