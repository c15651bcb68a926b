"""What a node answers beyond Redis 7.0 in replies the differential tests compare with Debian's
redis-server 7.0: XINFO STREAM's IDMP fields (Redis 8.6) and XINFO STREAM FULL's per-group
`nacked-count` (8.8). `redis7_view` removes them from a reply's RESP bytes (RESP2 or RESP3) so
the rest is compared byte for byte as before."""

from __future__ import annotations

NEWER_FIELDS = frozenset(
    {
        b"idmp-duration",
        b"idmp-maxsize",
        b"pids-tracked",
        b"iids-tracked",
        b"iids-added",
        b"iids-duplicates",
        b"nacked-count",
    }
)
_AGGREGATES = b"*%~>|"

Node = tuple[bytes, object]
"""(b"=", raw bytes of a scalar reply) or (prefix, list of children) for an aggregate."""


def _parse(buf: bytes, pos: int) -> tuple[Node, int]:
    end = buf.index(b"\r\n", pos)
    head, kind = buf[pos:end], buf[pos : pos + 1]
    pos = end + 2
    if kind in (b"$", b"=", b"!") and head[1:] != b"-1":
        size = int(head[1:])
        return (b"=", buf[end - len(head) : pos + size + 2]), pos + size + 2
    if kind in _AGGREGATES and head[1:] != b"-1":
        count = int(head[1:]) * (2 if kind in b"%|" else 1)
        children: list[Node] = []
        for _ in range(count):
            child, pos = _parse(buf, pos)
            children.append(child)
        return (kind, children), pos
    return (b"=", head + b"\r\n"), pos


def _name(node: Node) -> bytes | None:
    kind, raw = node
    if kind != b"=" or not isinstance(raw, bytes) or not raw.startswith((b"$", b"+")):
        return None
    return raw.split(b"\r\n")[1] if raw.startswith(b"$") else raw[1:-2]


def _strip(node: Node) -> Node:
    kind, payload = node
    if kind == b"=" or not isinstance(payload, list):
        return node
    children = [_strip(c) for c in payload]
    if len(children) % 2 == 0 and any(_name(c) in NEWER_FIELDS for c in children[::2]):
        kept: list[Node] = []
        for key, value in zip(children[::2], children[1::2], strict=True):
            if _name(key) not in NEWER_FIELDS:
                kept += [key, value]
        children = kept
    return kind, children


def _encode(node: Node) -> bytes:
    kind, payload = node
    if kind == b"=":
        assert isinstance(payload, bytes)
        return payload
    assert isinstance(payload, list)
    count = len(payload) // 2 if kind in b"%|" else len(payload)
    return kind + b"%d\r\n" % count + b"".join(_encode(c) for c in payload)


def redis7_view(reply: bytes) -> bytes:
    """The reply without the fields Redis 7.0 does not have (unchanged if it has none)."""
    if not any(field in reply for field in NEWER_FIELDS):
        return reply
    node, _end = _parse(reply, 0)
    return _encode(_strip(node))


def redis7_parsed(value: object) -> object:
    """A reply as a client library parsed it (dicts, lists), without the fields Redis 7.0 does
    not have: for the tests that compare what redis-py hands its callers."""
    if isinstance(value, dict):
        return {
            k: redis7_parsed(v)
            for k, v in value.items()
            if (k.encode() if isinstance(k, str) else k) not in NEWER_FIELDS
        }
    if isinstance(value, list | tuple):
        return type(value)(redis7_parsed(v) for v in value)
    return value
