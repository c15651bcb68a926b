"""`streams group --endpoint URL STREAM GROUP`: how a consumer group does, as one region sees it.

Prints the group's lag (entries not yet delivered), pending entries by consumer with their idle
times, the pending entry idle the longest, and the dead-letter stream's count for this group.
Consumers and pending entries are local to a region (seed 000), so the answer is about the region
behind URL; ask each region to see them all. In a sharded region URL may be any of its nodes: the
stream's node (and the dead-letter stream's) is found by following MOVED.

Exit status (`streams.exits`): 0 shown, 3 no such stream or group, 4 endpoint unreachable,
64 bad arguments (an endpoint that is not a redis:// URL).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import redis

from streams import eventloop, exits
from streams.sdk.endpoints import Endpoint, make_client, normalize, region_name
from streams.sdk.errors import SdkError

PENDING_SCAN = 10_000
"""Pending entries scanned for the longest idle time (XPENDING is paged; this bounds the cost)."""
DEAD_LETTER_SCAN = 10_000


def add_parser(sub: Any) -> None:
    """Register the `group` verb on the `streams` command's subparsers."""
    parser = sub.add_parser(
        "group",
        help="a consumer group's lag, pending entries by consumer, oldest idle, dead letters",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        epilog=exits.epilog(exits.UNRESOLVED, exits.UNREACHABLE),
    )
    parser.add_argument("--endpoint", required=True, help="RESP URL, e.g. redis://127.0.0.1:6380")
    parser.add_argument("stream", metavar="STREAM", help="the stream key")
    parser.add_argument("group", metavar="GROUP", help="the consumer group")
    parser.add_argument(
        "--dead-letter",
        metavar="STREAM",
        help="the group's dead-letter stream (default: STREAM:dead)",
    )


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _flat_map(flat: list[Any]) -> dict[str, Any]:
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def run(args: argparse.Namespace) -> int:
    try:
        url = normalize(args.endpoint)[0]
    except SdkError as exc:
        print(f"streams group: {exc}", file=sys.stderr)
        return exits.USAGE
    dead_letter = args.dead_letter or f"{args.stream}:dead"
    return eventloop.run(_run(url, args.stream, args.group, dead_letter))


async def _run(url: str, stream: str, group: str, dead_letter: str) -> int:
    """The SDK's own endpoint (raw replies, MOVED followed: in a sharded region the stream and
    its dead-letter stream may live on other nodes than the one named)."""
    ep = Endpoint(url, make_client(url, timeout_s=5.0))
    try:
        return await _show(ep, stream, group, dead_letter)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        print(f"streams group: {url} unreachable ({exc})", file=sys.stderr)
        return exits.UNREACHABLE
    finally:
        await ep.close()


async def _show(ep: Endpoint, stream: str, group: str, dead_letter: str) -> int:
    url = ep.url
    try:
        groups = [_flat_map(g) for g in await ep.cmd(stream, "XINFO", "GROUPS", stream)]
    except redis.ResponseError as exc:
        print(f"streams group: {stream}: {exc}", file=sys.stderr)
        return exits.UNRESOLVED
    info = next((g for g in groups if _text(g["name"]) == group), None)
    if info is None:
        names = ", ".join(_text(g["name"]) for g in groups) or "none"
        print(f"streams group: no group {group!r} on {stream!r} (groups: {names})", file=sys.stderr)
        return exits.UNRESOLVED
    region = await region_name(ep.client, url)
    lag = info.get("lag")
    print(f"group {group} on {stream} at {url} (region {region})")
    print(f"  lag:               {'unknown' if lag is None else _text(lag)}")
    print(f"  last delivered:    {_text(info.get('last-delivered-id'))}")
    print(f"  pending:           {_text(info.get('pending'))}")
    consumers = [_flat_map(c) for c in await ep.cmd(stream, "XINFO", "CONSUMERS", stream, group)]
    if consumers:
        print(f"  {'consumer':<20} {'pending':>8} {'idle ms':>10} {'inactive ms':>12}")
        for c in consumers:
            inactive = c.get("inactive")
            print(
                f"  {_text(c['name']):<20} {_text(c['pending']):>8} {_text(c['idle']):>10} "
                f"{'-' if inactive is None else _text(inactive):>12}"
            )
    rows = await ep.cmd(stream, "XPENDING", stream, group, "-", "+", PENDING_SCAN)
    if rows:
        oldest = max(rows, key=lambda r: int(r[2]))
        more = " (first 10000 scanned)" if len(rows) >= PENDING_SCAN else ""
        print(
            f"  oldest idle:       {int(oldest[2])} ms: {_text(oldest[0])} held by "
            f"{_text(oldest[1])}, delivered {int(oldest[3])} times{more}"
        )
    else:
        print("  oldest idle:       - (nothing pending)")
    total = int(await ep.cmd(dead_letter, "XLEN", dead_letter))
    if total <= DEAD_LETTER_SCAN:
        entries = await ep.cmd(dead_letter, "XRANGE", dead_letter, "-", "+")
        mine = sum(1 for _id, flat in entries if _flat_map(flat).get("_dl_group") == group.encode())
        print(f"  dead letters:      {mine} for this group ({total} in {dead_letter})")
    else:
        print(f"  dead letters:      {total} in {dead_letter} (too many to count by group)")
    return 0
