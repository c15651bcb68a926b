"""Argument parsing shared by XREAD and XREADGROUP, following Redis 7's xreadCommand."""

from __future__ import annotations

from dataclasses import dataclass

from streams import errors
from streams.commands.base import eq, parse_int
from streams.errors import CommandError


@dataclass(frozen=True)
class ReadArgs:
    count: int
    block_ms: int | None
    group: bytes | None
    consumer: bytes | None
    noack: bool
    keys: list[bytes]
    ids: list[bytes]


def parse_timeout(raw: bytes) -> int:
    try:
        value = parse_int(raw, errors.TIMEOUT_NOT_INTEGER)
    except CommandError:
        raise
    if value < 0:
        raise CommandError(errors.TIMEOUT_NEGATIVE)
    return value


def parse_read_args(args: list[bytes], *, group: bool) -> ReadArgs:
    count = 0
    block: int | None = None
    group_name: bytes | None = None
    consumer: bytes | None = None
    noack = False
    streams_at = 0
    i = 1
    while i < len(args):
        more = len(args) - 1 - i
        opt = args[i]
        if eq(opt, b"block") and more:
            i += 1
            block = parse_timeout(args[i])
        elif eq(opt, b"count") and more:
            i += 1
            count = max(0, parse_int(args[i]))
        elif eq(opt, b"streams") and more:
            streams_at = i + 1
            if (len(args) - streams_at) % 2:
                raise CommandError(
                    errors.UNBALANCED_XREADGROUP if group else errors.UNBALANCED_XREAD
                )
            break
        elif eq(opt, b"group") and more >= 2:
            if not group:
                raise CommandError(errors.GROUP_ONLY_XREADGROUP)
            group_name, consumer = args[i + 1], args[i + 2]
            i += 2
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
    keys = args[streams_at : streams_at + half]
    ids = args[streams_at + half :]
    return ReadArgs(count, block, group_name, consumer, noack, keys, ids)
