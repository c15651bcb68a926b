"""Reduce a raw Redis reply to the seeds' abbreviated notation, so it can be compared.

The seed tables do not print replies; they print what matters in them: `→ [110-1, 120-1]` for an
XREAD (the entry IDs only), `→ [group1]` for XINFO GROUPS (the group names only), `→ 0` for
EXISTS. A scenario's `expect` is written in that notation, and `project` maps a real reply onto
it, one rule per command, so the same expectation can be checked against our server and against
a real redis-server alike.

Replies come in raw RESP2 form: bytes for bulk and simple strings, int, None for a null, list for
an array, and an `Exception` instance for an error reply. str instead of bytes, tuples instead of
lists, and RESP3 maps (dicts) are accepted as well, so a client's decoding choices do not matter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["Projection", "ProjectionError", "format_projection", "matches", "project"]

Projection = list[str] | int | None
"""A projected reply: a list of IDs or names, an integer, or None for 'not projected'."""

_INTEGER_COMMANDS = frozenset({"EXISTS", "XLEN", "XACK", "XDEL", "DEL"})


class ProjectionError(ValueError):
    """The reply cannot be projected: an unexpected error reply, or a reply of the wrong shape.

    Raised rather than returning None, because None means 'nothing to compare' to the runner:
    an error where the seed shows a result must fail the scenario, not silently skip the check.
    """


def project(args: tuple[bytes, ...], reply: object, field: str | None = None) -> Projection:
    """The seed-notation view of `reply` to the command `args`, or None if not projected.

    Error replies: for XINFO GROUPS, 'no such key' projects to [] (the seed shows `→ []` for a
    region that has never seen the key); for any other projected command an error raises
    ProjectionError. Commands without a projection return None whatever the reply.
    """
    if not args:
        raise ProjectionError("empty command")
    name = _str(args[0]).upper()
    sub = _str(args[1]).upper() if len(args) > 1 else ""

    if name == "XINFO" and sub == "GROUPS" and isinstance(reply, Exception):
        if "no such key" in str(reply).lower():
            return []
    if not _is_projected(name, sub, args):
        return None
    if isinstance(reply, Exception):
        raise ProjectionError(f"{_show(args)}: error reply {reply}")

    if name == "XADD":
        return [] if reply is None else [_str(reply)]
    if name in ("XRANGE", "XREVRANGE"):
        return _entry_ids(reply)
    if name in ("XREAD", "XREADGROUP"):
        return _read_ids(reply)
    if name == "XINFO":
        return [_str(_field(item, field or "name")) for item in _array(reply)]
    if name == "XPENDING":
        return [_str(_array(item)[0]) for item in _array(reply)]
    if isinstance(reply, bool) or not isinstance(reply, int):
        raise ProjectionError(f"{_show(args)}: expected an integer reply, got {reply!r}")
    return reply


def matches(expected: Sequence[str] | int | None, projected: Projection) -> bool:
    """Whether a projected reply is what the seed shows; None expected means nothing to check.

    Lists compare in order (the seeds print IDs in stream order); integers compare exactly and
    never equal a list, so `→ 0` and `→ []` stay distinct.
    """
    if expected is None:
        return True
    if isinstance(expected, int):
        return (
            not isinstance(expected, bool)
            and isinstance(projected, int)
            and not isinstance(projected, bool)
            and projected == expected
        )
    if isinstance(expected, str) or not isinstance(projected, list):
        return False
    return list(expected) == projected


def format_projection(p: Sequence[str] | int | None) -> str:
    """The seed's look: `[a, b]`, `[]` or `0`; '(not projected)' for None."""
    if p is None:
        return "(not projected)"
    if isinstance(p, int):
        return str(p)
    return "[" + ", ".join(p) + "]"


def _is_projected(name: str, sub: str, args: tuple[bytes, ...]) -> bool:
    if name in ("XADD", "XRANGE", "XREVRANGE", "XREAD", "XREADGROUP"):
        return True
    if name == "XINFO":
        return sub in ("GROUPS", "CONSUMERS")
    if name == "XPENDING":
        # XPENDING key group [[IDLE ms] start end count [consumer]]: only the extended form
        # lists entries; the summary form (key and group only) has no seed notation.
        return len(args) - 3 > 2
    return name in _INTEGER_COMMANDS


def _entry_ids(reply: object) -> list[str]:
    """[[id, fields], ...] -> [id, ...]; fields may be null (an entry deleted while pending)."""
    if reply is None:
        return []
    return [_str(_array(entry)[0]) for entry in _array(reply)]


def _read_ids(reply: object) -> list[str]:
    """XREAD/XREADGROUP: [[key, entries], ...] (or a RESP3 map) -> IDs of all streams in order."""
    if reply is None:
        return []
    if isinstance(reply, Mapping):
        streams = [entries for entries in reply.values()]
    else:
        streams = [_array(pair)[1] for pair in _array(reply)]
    return [entry_id for entries in streams for entry_id in _entry_ids(entries)]


def _field(item: object, key: str) -> object:
    """A value of an XINFO record: a flat [k1, v1, k2, v2, ...] array or a RESP3 map."""
    if isinstance(item, Mapping):
        for k, v in item.items():
            if _str(k) == key:
                return v
        raise ProjectionError(f"no {key!r} in {item!r}")
    flat = _array(item)
    for i in range(0, len(flat) - 1, 2):
        if _str(flat[i]) == key:
            return flat[i + 1]
    raise ProjectionError(f"no {key!r} in {item!r}")


def _array(value: object) -> Sequence[object]:
    if isinstance(value, list | tuple):
        return value
    raise ProjectionError(f"expected an array, got {value!r}")


def _str(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    raise ProjectionError(f"expected a string, got {value!r}")


def _show(args: tuple[bytes, ...]) -> str:
    return " ".join(a.decode("utf-8", "replace") for a in args)
