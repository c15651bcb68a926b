"""`streams import SOURCE TARGET [--match PATTERN] [--replace]`: a running Redis 7's streams into
a region, with their entry IDs, consumer groups, consumers and pending entries.

Why it copies with ordinary commands (XADD with the entry's ID, XGROUP CREATE ... ENTRIESREAD,
XCLAIM ... FORCE TIME RETRYCOUNT) rather than a dump: every write then goes through the node's
own checks and op log, so the import replicates to every region like any client's writes.

- Entries: XRANGE on the source in pages, XADD `key id field value ...` on the target, pipelined.
  Then XSETID with the source's last-generated-id, entries-added and max-deleted-entry-id, so a
  stream whose newest entries were deleted keeps its last ID, and entries-read / lag mean the same.
- Groups: XGROUP CREATE at the source's last-delivered-id with its entries-read (a replicated op,
  so every region shows the group as the source has it); consumers with XGROUP CREATECONSUMER;
  each pending entry with XCLAIM FORCE, keeping its consumer, delivery count (RETRYCOUNT) and
  delivery time (TIME). Consumers and pending entries are local to a region (seed 000): they
  belong to the importing region, and other regions show the group with no consumers. A pending
  entry whose stream entry was deleted in the source cannot be claimed and is counted as not
  carried.
- Resuming: a target key whose entries are the source's first N (same first and last entry,
  as many entries up to its last ID) is an earlier import of that stream, interrupted or whole,
  and is continued after its last ID; the groups are set to the source's again (idempotent), so
  a second run doubles nothing. Any other existing key is refused unless `--replace`, which
  deletes it in the target first.
- ID modes: a strict region refuses full IDs (`ms-seq`) in XADD, so the import refuses a strict
  target before writing anything; run the region semi-strict (it accepts full IDs, while `*`
  still makes region-owned IDs, so imported and new IDs cannot collide).
- A target region sharded over several node processes answers MOVED for keys of other nodes:
  each key's node is found by following MOVED from the node named.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
import redis.exceptions

from streams import exits, progress

PAGE = 1000
"""Entries read from the source per XRANGE and written per pipeline: one node batch each."""
MAX_REDIRECTS = 5


class ImportFailed(Exception):
    """An error the user can act on, with the exit status it ends the command with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Counts:
    """What one run did, for the closing summary."""

    streams: int = 0
    entries: int = 0
    entries_there: int = 0
    resumed: int = 0
    replaced: int = 0
    groups: int = 0
    consumers: int = 0
    pending: int = 0
    pending_not_carried: int = 0
    other_keys: int = 0
    empty_streams: int = 0
    ttl_dropped: int = 0
    idmp_windows: int = 0


def add_parser(sub: Any) -> None:
    """Register the `import` verb on the `streams` command's subparsers."""
    parser = sub.add_parser(
        "import",
        help="copy streams, consumer groups and pending entries from a Redis 7 into a region",
        description=(
            "Copy every stream of SOURCE (a running Redis 7) whose key matches PATTERN into "
            "the region of TARGET (one of its nodes; a sharded region's keys are found by "
            "following MOVED), keeping entry IDs, the stream's last ID and entries-added, each "
            "consumer group's last-delivered-id and entries-read, its consumers, and its "
            "pending entries (owner, delivery count, delivery time) as pending in the target "
            "region. Re-running continues an interrupted import after each stream's last entry "
            "and doubles nothing. A key that exists in the target and is not an earlier import "
            "of the same stream is refused unless --replace. The target region must not be in "
            "strict ID mode (it refuses full entry IDs): run it semi-strict. Non-stream keys are "
            "skipped and counted; TTLs are not carried. See docs/import.md."
        ),
        epilog=exits.epilog(exits.DIFFERS, exits.UNREACHABLE, exits.FAILED),
    )
    parser.add_argument("source", metavar="SOURCE", help="redis://HOST:PORT of the Redis 7")
    parser.add_argument("target", metavar="TARGET", help="redis://HOST:PORT of a region's node")
    parser.add_argument(
        "--match", default="*", metavar="PATTERN", help="only keys matching this glob (SCAN MATCH)"
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="delete a target key that holds other data than the source's stream, then import",
    )
    progress.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """The verb: one line on stderr and an exit status for every error, never a traceback."""
    started = time.monotonic()
    counts = Counts()
    try:
        source = _client(args.source, "SOURCE")
        target = Target(_client(args.target, "TARGET"), args.target)
        with progress.Progress("import", progress.wanted(args), unit="entries") as shown:
            _import(source, target, args.match, args.replace, counts, shown)
    except ImportFailed as exc:
        print(f"streams import: {exc}", file=sys.stderr)
        _summary(counts, time.monotonic() - started, sys.stderr)
        return exc.code
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        print(f"streams import: a server stopped answering ({exc})", file=sys.stderr)
        _summary(counts, time.monotonic() - started, sys.stderr)
        return exits.UNREACHABLE
    except redis.ResponseError as exc:
        print(f"streams import: the target refused a write: {exc}", file=sys.stderr)
        _summary(counts, time.monotonic() - started, sys.stderr)
        return exits.FAILED
    _summary(counts, time.monotonic() - started, sys.stdout)
    return exits.OK


def _client(url: str, what: str) -> redis.Redis:
    """A raw-reply RESP2 client (replies parsed here, whatever redis-py's version does), with a
    PING so that an unreachable server fails here with its address named."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ImportFailed(
            f"{what} {url!r} is not a URL such as redis://127.0.0.1:6379", exits.USAGE
        )
    try:
        client = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=5)
    except ValueError as exc:
        raise ImportFailed(f"{what} {url!r}: {exc}", exits.USAGE) from None
    client.response_callbacks.clear()
    try:
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ImportFailed(f"{what} {url} unreachable ({exc})", exits.UNREACHABLE) from None
    except redis.AuthenticationError as exc:
        raise ImportFailed(f"{what} {url}: {exc}", exits.UNREACHABLE) from None
    return client


class Target:
    """The region: the node named and the nodes MOVED replies named, one per key's slot."""

    def __init__(self, seed: redis.Redis, url: str) -> None:
        self.seed = seed
        self.url = url
        self.nodes: dict[str, redis.Redis] = {}

    def for_key(self, key: bytes) -> redis.Redis:
        """The client of the node serving `key`: ask the seed (a keyed command answers MOVED on
        a node that does not serve its slot) and follow."""
        client = self.seed
        for _ in range(MAX_REDIRECTS):
            try:
                _call(client, "EXISTS", key)
                return client
            except redis.exceptions.MovedError as moved:
                client = self._node(moved.host or _host(client), int(moved.port))
        raise ImportFailed(f"{self.url}: too many MOVED redirects for key {key!r}", exits.FAILED)

    def _node(self, host: str, port: int) -> redis.Redis:
        address = f"{host}:{port}"
        if address not in self.nodes:
            kwargs = {**self.seed.connection_pool.connection_kwargs, "host": host, "port": port}
            # the seed's connection class too: a rediss:// target's nodes are dialled over TLS
            seed_class = self.seed.connection_pool.connection_class
            client = redis.Redis(
                connection_pool=redis.ConnectionPool(connection_class=seed_class, **kwargs)
            )
            client.response_callbacks.clear()
            self.nodes[address] = client
        return self.nodes[address]


def _call(client: Any, *args: Any) -> Any:
    """One command, raw reply (a client or a pipeline; redis-py leaves it untyped)."""
    return client.execute_command(*args)


def _host(client: redis.Redis) -> str:
    return str(client.connection_pool.connection_kwargs.get("host", "127.0.0.1"))


def _flat(reply: Any) -> dict[bytes, Any]:
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


def _id(raw: bytes) -> tuple[int, int]:
    ms, _, seq = raw.partition(b"-")
    return int(ms), int(seq or 0)


def _check_id_mode(target: Target) -> None:
    """Refuse a strict region up front: its XADD refuses every full ID, so not one entry would
    keep its ID. A plain Redis (no CRDT.INFO) is taken as it is."""
    try:
        info = _flat(_call(target.seed, "CRDT.INFO"))
    except redis.ResponseError:
        return
    mode = info.get(b"id_mode", b"").decode()
    if mode == "strict":
        region = info.get(b"region", b"?").decode()
        raise ImportFailed(
            f"region {region} at {target.url} runs in strict ID mode, which refuses full entry "
            "IDs (ms-seq), so no entry could keep its ID; nothing was written. Run the region "
            'semi-strict (id_mode = "semi-strict" in its topology file, or streams up '
            "--id-mode semi-strict): full IDs are then accepted and '*' still makes "
            "region-owned IDs",
            exits.FAILED,
        )


def _source_keys(source: redis.Redis, pattern: str, counts: Counts) -> list[bytes]:
    """The stream keys matching `pattern` (sorted, so a re-run goes in the same order); other
    types are counted."""
    keys: list[bytes] = []
    cursor = b"0"
    while True:
        cursor, batch = _call(source, "SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        if batch:
            with source.pipeline(transaction=False) as pipe:
                for key in batch:
                    _call(pipe, "TYPE", key)
                types = pipe.execute()
            for key, kind in zip(batch, types, strict=True):
                if kind == b"stream":
                    keys.append(key)
                elif kind != b"none":  # expired or deleted meanwhile
                    counts.other_keys += 1
        if cursor in (b"0", 0):
            return sorted(set(keys))


def _import(
    source: redis.Redis,
    target: Target,
    pattern: str,
    replace: bool,
    counts: Counts,
    shown: progress.Progress,
) -> None:
    _check_id_mode(target)
    keys = _source_keys(source, pattern, counts)
    with source.pipeline(transaction=False) as pipe:
        for key in keys:
            _call(pipe, "XLEN", key)
        total = sum(pipe.execute())
    shown.stage("entries", total=total)
    for key in keys:
        _stream(source, target.for_key(key), key, replace, counts, shown)


def _entries(client: redis.Redis, key: bytes, start: bytes, end: bytes = b"+") -> Iterator[Any]:
    """Every entry of `key` from `start` to `end`, in XRANGE pages."""
    while True:
        page = _call(client, "XRANGE", key, start, end, "COUNT", PAGE)
        yield from page
        if len(page) < PAGE:
            return
        start = b"(" + page[-1][0]


def _key_exists(client: redis.Redis, key: bytes) -> bool:
    return bool(_call(client, "EXISTS", key))


def _stream(
    source: redis.Redis,
    node: redis.Redis,
    key: bytes,
    replace: bool,
    counts: Counts,
    shown: progress.Progress,
) -> None:
    info = _flat(_call(source, "XINFO", "STREAM", key))
    if _call(source, "PTTL", key) >= 0:
        counts.ttl_dropped += 1
    start = b"-"
    if _key_exists(node, key):
        there = _earlier_import(source, node, key)
        if there is None:
            if not replace:
                raise ImportFailed(
                    f"key {key.decode(errors='replace')!r} exists in the target and is not an "
                    "earlier import of the source's stream (its entries are not the source's "
                    "first ones); nothing of it was written. Delete it, leave it out with "
                    "--match, or pass --replace to delete it in the target and import it",
                    exits.DIFFERS,
                )
            _call(node, "DEL", key)
            counts.replaced += 1
        else:
            last, length = there
            counts.resumed += 1
            counts.entries_there += length
            shown.tick(length)
            if last is not None:
                start = b"(" + last
    if not info[b"length"] and not info[b"groups"]:
        counts.empty_streams += 1  # a region's key exists only with an entry or a group
        return
    batch: list[Any] = []
    for entry in _entries(source, key, start):
        batch.append(entry)
        if len(batch) == PAGE:
            _write(node, key, batch, counts, shown)
            batch = []
    _write(node, key, batch, counts, shown)
    counts.streams += 1
    _groups(source, node, key, info, counts)
    _idmp_window(node, key, info, counts)


def _idmp_window(node: redis.Redis, key: bytes, info: dict[bytes, Any], counts: Counts) -> None:
    """A Redis 8.6 source's IDMP window (XINFO STREAM idmp-duration / idmp-maxsize), set with
    XCFGSET so it replicates with the stream. Its IIDs cannot be carried: no command reads them
    (only DUMP and the AOF hold them), so a retry of an XADD first sent to the source adds anew."""
    duration, maxsize = info.get(b"idmp-duration"), info.get(b"idmp-maxsize")
    if duration is None or maxsize is None:
        return  # a Redis 7 source has no IDMP
    _call(node, "XCFGSET", key, "IDMP-DURATION", duration, "IDMP-MAXSIZE", maxsize)
    counts.idmp_windows += 1


def _earlier_import(
    source: redis.Redis, node: redis.Redis, key: bytes
) -> tuple[bytes | None, int] | None:
    """`(last ID, length)` when the target's stream is the source's first entries (an import
    of it, interrupted or whole), else None."""
    try:
        there = _call(node, "XRANGE", key, "-", "+", "COUNT", 1)
    except redis.ResponseError:  # another type (a plain Redis as target)
        return None
    if not there:  # only groups: an import of a stream without entries
        return (None, 0) if not _call(source, "XLEN", key) else None
    if _call(source, "XRANGE", key, "-", "+", "COUNT", 1) != there:
        return None
    last = _call(node, "XREVRANGE", key, "+", "-", "COUNT", 1)
    if _call(source, "XRANGE", key, last[0][0], last[0][0]) != last:
        return None
    length = int(_call(node, "XLEN", key))
    if sum(1 for _ in _entries(source, key, b"-", last[0][0])) != length:
        return None
    return last[0][0], length


def _write(
    node: redis.Redis, key: bytes, batch: list[Any], counts: Counts, shown: progress.Progress
) -> None:
    if not batch:
        return
    with node.pipeline(transaction=False) as pipe:
        for sid, fields in batch:
            _call(pipe, "XADD", key, sid, *fields)
        pipe.execute()
    counts.entries += len(batch)
    shown.tick(len(batch))


def _groups(
    source: redis.Redis, node: redis.Redis, key: bytes, info: dict[bytes, Any], counts: Counts
) -> None:
    """The stream's last ID and counters, then each group set to the source's: created (or
    re-created when it differs) at its last-delivered-id with its entries-read, its consumers,
    and its pending entries claimed for their consumers with their counts and times."""
    mkstream = [] if info[b"length"] else ["MKSTREAM"]
    theirs = {g[b"name"]: g for g in map(_flat, _node_groups(node, key))}
    for group in map(_flat, _call(source, "XINFO", "GROUPS", key)):
        name = group[b"name"]
        create = [group[b"last-delivered-id"]]
        if group[b"entries-read"] is not None:
            create += ["ENTRIESREAD", group[b"entries-read"]]
        mine = theirs.get(name)
        same = mine is not None and all(
            mine[f] == group[f] for f in (b"last-delivered-id", b"entries-read")
        )
        if mine is not None and not same:
            _call(node, "XGROUP", "DESTROY", key, name)
        if not same:
            _call(node, "XGROUP", "CREATE", key, name, *create, *mkstream)
        counts.groups += 1
        _consumers(source, node, key, name, counts)
    _call(
        node,
        "XSETID",
        key,
        info[b"last-generated-id"],
        "ENTRIESADDED",
        info[b"entries-added"],
        "MAXDELETEDID",
        info[b"max-deleted-entry-id"],
    )


def _node_groups(node: redis.Redis, key: bytes) -> list[Any]:
    try:
        return list(_call(node, "XINFO", "GROUPS", key))
    except redis.ResponseError:  # no such key yet
        return []


def _consumers(
    source: redis.Redis, node: redis.Redis, key: bytes, group: bytes, counts: Counts
) -> None:
    wanted = [_flat(c)[b"name"] for c in _call(source, "XINFO", "CONSUMERS", key, group)]
    there = {_flat(c)[b"name"] for c in _call(node, "XINFO", "CONSUMERS", key, group)}
    with node.pipeline(transaction=False) as pipe:
        for name in wanted:
            _call(pipe, "XGROUP", "CREATECONSUMER", key, group, name)
        for name in there - set(wanted):
            _call(pipe, "XGROUP", "DELCONSUMER", key, group, name)
        pipe.execute()
    counts.consumers += len(wanted)
    now_ms = _now_ms(source)
    pending: set[bytes] = set()
    for rows in _pending(source, key, group):
        with node.pipeline(transaction=False) as pipe:
            for sid, consumer, idle, deliveries in rows:
                delivered = max(0, now_ms - int(idle))
                claim = [key, group, consumer, 0, sid, "FORCE", "TIME", delivered]
                _call(pipe, "XCLAIM", *claim, "RETRYCOUNT", deliveries, "JUSTID")
                pending.add(sid)
            claimed = pipe.execute()
        carried = sum(1 for reply in claimed if reply)
        counts.pending += carried
        counts.pending_not_carried += len(rows) - carried
    extra = [sid for rows in _pending(node, key, group) for sid, *_ in rows if sid not in pending]
    if extra:
        _call(node, "XACK", key, group, *extra)


def _pending(client: redis.Redis, key: bytes, group: bytes) -> Iterator[list[Any]]:
    """The group's pending entries, in XPENDING pages of [id, consumer, idle, deliveries]."""
    start = b"-"
    while True:
        rows = _call(client, "XPENDING", key, group, start, "+", PAGE)
        if rows:
            yield rows
        if len(rows) < PAGE:
            return
        start = b"(" + rows[-1][0]


def _now_ms(client: redis.Redis) -> int:
    seconds, micros = _call(client, "TIME")
    return int(seconds) * 1000 + int(micros) // 1000


def _summary(counts: Counts, elapsed: float, out: Any) -> None:
    rate = counts.entries / elapsed if elapsed > 0 else 0.0
    lines = [
        f"imported {counts.streams} stream(s): {counts.entries:,} entries written"
        f" ({counts.entries_there:,} already there from an earlier run), {counts.groups} "
        f"group(s), {counts.consumers} consumer(s), {counts.pending:,} pending entries;"
        f" {elapsed:.1f} s, {rate:,.0f} entries/s",
    ]
    if counts.resumed or counts.replaced:
        lines.append(
            f"continued {counts.resumed} stream(s) imported before; replaced {counts.replaced}"
        )
    if counts.other_keys:
        lines.append(f"skipped {counts.other_keys} key(s) of other types (not streams)")
    if counts.empty_streams:
        lines.append(
            f"skipped {counts.empty_streams} empty stream(s) without groups (a region keeps a "
            "key only while it has an entry or a group)"
        )
    if counts.pending_not_carried:
        lines.append(
            f"{counts.pending_not_carried} pending entries not carried: their stream entries "
            "were deleted in the source"
        )
    if counts.ttl_dropped:
        lines.append(f"{counts.ttl_dropped} stream(s) had a TTL in the source, not carried")
    if counts.idmp_windows:
        lines.append(
            f"{counts.idmp_windows} stream(s) kept their IDMP window (XCFGSET); their IDMP "
            "history cannot be read from the source and was not carried"
        )
    for line in lines:
        print(line, file=out)
