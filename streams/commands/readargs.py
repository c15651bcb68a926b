"""The option parser XREAD and XREADGROUP share, a port of the loop at the top of Redis 7.0's
`xreadCommand`, so both commands fail on the same inputs with the same texts and in the same
order.

Only the options are parsed here. The IDs stay raw bytes: what `$`, `>` and explicit IDs mean
differs between the two commands, and Redis checks each ID only after checking that key's group,
so the commands interpret them key by key.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams import errors
from streams.commands.base import eq, parse_int
from streams.errors import CommandError
from streams.numbers import string2ll


@dataclass(frozen=True)
class ReadArgs:
    """`count` is None for "no limit" (no COUNT, or COUNT <= 0 as Redis treats it);
    `block_ms` is None without BLOCK and 0 for "block forever"; `claim_ms` is XREADGROUP's
    CLAIM min-idle-time (None without CLAIM; the last CLAIM given counts)."""

    count: int | None
    block_ms: int | None
    group: bytes | None
    consumer: bytes | None
    noack: bool
    keys: tuple[bytes, ...]
    ids: tuple[bytes, ...]
    claim_ms: int | None = None


def parse_read_args(args: list[bytes], *, group: bool) -> ReadArgs:
    """Parse `XREAD|XREADGROUP [GROUP g c] [COUNT n] [BLOCK ms] [CLAIM min-idle-time] [NOACK]
    STREAMS k.. id..` (options in any order).

    `group` says which command this is (Redis looks at the command name): GROUP and NOACK are
    refused by XREAD, and XREADGROUP requires GROUP.
    """
    count: int | None = None
    block_ms: int | None = None
    group_name: bytes | None = None
    consumer: bytes | None = None
    noack = False
    claim_ms: int | None = None
    streams_at = 0
    i = 1
    while i < len(args):
        more = len(args) - i - 1
        opt = args[i]
        if eq(opt, b"block") and more:
            i += 1
            block_ms = parse_int(args[i], errors.TIMEOUT_NOT_INTEGER)
            if block_ms < 0:
                raise CommandError(errors.TIMEOUT_NEGATIVE)
        elif eq(opt, b"count") and more:
            i += 1
            n = parse_int(args[i])
            count = n if n > 0 else None
        elif eq(opt, b"streams") and more:
            streams_at = i + 1
            if (len(args) - streams_at) % 2:
                raise CommandError(errors.UNBALANCED_STREAMS)
            break
        elif eq(opt, b"group") and more >= 2:
            if not group:
                raise CommandError(errors.GROUP_ONLY_XREADGROUP)
            group_name, consumer = args[i + 1], args[i + 2]
            i += 2
        elif eq(opt, b"claim") and more:
            if not group:
                raise CommandError(errors.CLAIM_ONLY_XREADGROUP)
            i += 1
            claim_ms = string2ll(args[i])
            if claim_ms is None:
                raise CommandError(errors.CLAIM_NOT_INTEGER)
            if claim_ms < 0:
                raise CommandError(errors.CLAIM_NEGATIVE)
        elif eq(opt, b"noack"):
            if not group:
                raise CommandError(errors.NOACK_ONLY_XREADGROUP)
            noack = True
        else:
            raise CommandError(errors.SYNTAX)
        i += 1
    if not streams_at:
        raise CommandError(errors.SYNTAX)
    if group and group_name is None:
        raise CommandError(errors.MISSING_GROUP)
    half = (len(args) - streams_at) // 2
    return ReadArgs(
        count=count,
        block_ms=block_ms,
        group=group_name,
        consumer=consumer,
        noack=noack,
        keys=tuple(args[streams_at : streams_at + half]),
        ids=tuple(args[streams_at + half :]),
        claim_ms=claim_ms,
    )
