"""A replayed state as plain data (JSON lines) and as text, and per-key digests for `diff`.

One JSON-lines record schema for every verb, versioned by the `v` field of each line
(`SCHEMA_VERSION`); `type` says what a line holds: `op` (a log record), `key` (a key's state),
`summary` (vector, digest, taint), `diff`, `divergence`, `skipped`, `history` (an `op` line
plus its apply index and effect on the key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from streams.crdt import ops
from streams.crdt.groups import Group
from streams.crdt.region import Region
from streams.crdt.state import KeyState, State
from streams.ids import MAX_ID, MIN_ID, StreamID, format_id_str

SCHEMA_VERSION = 1


def sid(s: StreamID) -> str:
    return format_id_str(s)


def text(b: bytes) -> str:
    """Bytes as text for humans and JSON: UTF-8 when it is, else escaped."""
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b.decode("latin-1").encode("unicode_escape").decode()


def group_view(group: Group) -> dict[str, Any]:
    """A group's region-local state: cursors, entries-read, PEL and consumers."""
    return {
        "name": text(group.name),
        "default_cursor": sid(group.default_cursor),
        "cursors": {str(o): sid(c) for o, c in sorted(group.cursors.items())},
        "last_delivered": sid(group.last_delivered()),
        "entries_read": group.entries_read,
        "ack_sent": {str(o): sid(c) for o, c in sorted(group.ack_sent.items())},
        "pending": [
            {
                "id": sid((ms, seq)),
                "origin": origin,
                "consumer": None if p.consumer is None else text(p.consumer),  # None: NACKed
                "delivery_time": p.delivery_time,
                "delivery_count": p.delivery_count,
            }
            for (ms, seq, origin), p in group.pel.items()
        ],
        "consumers": [
            {"name": text(c.name), "seen_time": c.seen_time, "pending": len(c.pending)}
            for c in sorted(group.consumers.values(), key=lambda c: c.name)
        ],
    }


def key_view(key: bytes, ks: KeyState, *, entries: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": "key",
        "key": text(key),
        "length": ks.entries.length,
        "last_id": sid(ks.last_id),
        "entries_added": ks.entries_added,
        "max_deleted_id": sid(ks.max_deleted_id),
        "digest": key_digest(ks),
        "groups": [group_view(ks.groups[name]) for name in sorted(ks.groups)],
    }
    if entries:
        view["entries"] = [
            {"id": sid(s), "origin": o, "fields": [text(f) for f in fields]}
            for s, o, fields in ks.entries.range(MIN_ID, MAX_ID)
        ]
    return view


def key_digest(ks: KeyState | None) -> str:
    """The replicated part of one key (entries with origin and fields, group names), hashed the
    way `State.digest` hashes it, so keys can be compared one by one."""
    h = hashlib.sha256()
    if ks is not None and ks.exists:
        for s, origin, fields in ks.entries.range(MIN_ID, MAX_ID):
            h.update(b"E%d-%d@%d" % (s[0], s[1], origin))
            for item in fields:
                h.update(len(item).to_bytes(8, "big") + item)
        for name in sorted(ks.groups):
            h.update(b"G" + len(name).to_bytes(8, "big") + name)
    return h.hexdigest()[:16]


def key_digests(region: Region) -> dict[bytes, str]:
    return {k: key_digest(region.state.keys[k]) for k in region.state.existing_keys()}


def local_state(region: Region) -> dict[str, Any]:
    """Every group's region-local state, for comparisons (tests, diff)."""
    return {
        text(key): {text(n): group_view(g) for n, g in sorted(ks.groups.items())}
        for key, ks in sorted(region.state.keys.items())
        if ks.groups
    }


def place(topic: str, partition: int, offset: int | None = None, shards: int = 1) -> str:
    """Where a record is: `r1.oplog@12` in a region of one shard (as before shards), else
    `r1.oplog:3@12` (partition 3, as `--offsets r1.oplog:3=13` takes it); without an offset, the
    topic partition alone."""
    where = topic if shards == 1 else f"{topic}:{partition}"
    return where if offset is None else f"{where}@{offset}"


# --- ops ---------------------------------------------------------------------------------------


def op_args(body: ops.Body) -> dict[str, Any]:
    """An op body's arguments as JSON-able data (IDs as `ms-seq`, bytes as text)."""
    out: dict[str, Any] = {}
    for name in body.__dataclass_fields__:
        if name in ("key",):
            continue
        out[name] = _plain(getattr(body, name))
    return out


def _plain(value: object) -> Any:
    if isinstance(value, bytes):
        return text(value)
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return sid(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def op_name(body: ops.Body) -> str:
    return type(body).__name__


def record_view(
    topic: str, partition: int, offset: int, ts_ms: int | None, record: ops.Op | ops.LocalOp
) -> dict[str, Any]:
    if isinstance(record, ops.Op):
        dot = f"{record.origin}:{record.seq}"
        ctx = {str(r): s for r, s in record.ctx}
        kind = "replicated"
    else:
        dot = f"local {record.region}:{record.seq}"
        ctx = {str(r): s for r, s in record.ctx}
        kind = "local"
    return {
        "v": SCHEMA_VERSION,
        "type": "op",
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "time_ms": ts_ms,
        "op_ts_ms": record.ts_ms,
        "kind": kind,
        "dot": dot,
        "ctx": ctx,
        "op": op_name(record.body),
        "key": text(record.body.key),
        "args": op_args(record.body),
    }


def record_line(view: dict[str, Any], shards: int = 1) -> str:
    ctx = ",".join(f"{r}={s}" for r, s in view["ctx"].items()) or "-"
    args = " ".join(f"{k}={_short(v)}" for k, v in view["args"].items())
    where = place(view["topic"], view["partition"], None, shards)
    return (
        f"{where}@{view['offset']:<6} {view['dot']:<10} ctx[{ctx}] "
        f"{view['op']} {view['key']} {args}"
    )


def _short(value: object) -> str:
    s = str(value) if not isinstance(value, list) else "[" + ",".join(map(str, value)) + "]"
    return s if len(s) <= 80 else s[:77] + "..."


def state_lines(states: Iterable[State], key: bytes | None = None) -> Iterator[str]:
    """The state as text: each stream's entries, groups with cursors, PEL and consumers; the
    keys of every state given (a region's shards hold disjoint keys) in one byte order."""
    found: dict[bytes, KeyState] = {}
    for state in states:
        found.update(state.keys)
    keys = [key] if key is not None else sorted(found)
    for k in keys:
        ks = found.get(k)
        if ks is None or not ks.exists:
            if key is not None:
                yield f"{text(k)}: (no such key)"
            continue
        yield (
            f"{text(k)}: {ks.entries.length} entries, last-id {sid(ks.last_id)}, "
            f"entries-added {ks.entries_added}, max-deleted-id {sid(ks.max_deleted_id)}"
        )
        for s, origin, fields in ks.entries.range(MIN_ID, MAX_ID):
            pairs = " ".join(text(f) for f in fields)
            yield f"  {sid(s)} (r{origin}) {_short(pairs)}"
        for name in sorted(ks.groups):
            g = group_view(ks.groups[name])
            yield (
                f"  group {g['name']}: last-delivered {g['last_delivered']}, "
                f"entries-read {g['entries_read']}, pending {len(g['pending'])}"
            )
            for p in g["pending"]:
                yield (
                    f"    pending {p['id']} (r{p['origin']}) -> {p['consumer']} "
                    f"delivered {p['delivery_count']}x at {p['delivery_time']}"
                )
            for c in g["consumers"]:
                yield f"    consumer {c['name']}: {c['pending']} pending, seen {c['seen_time']}"
