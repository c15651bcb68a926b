"""Reply values a command returns, independent of the wire protocol.

bytes is a bulk string, int an integer, None a null bulk, list an array, `Status` a simple string,
`Map` a RESP3 map (a flat array in RESP2), `NULL_ARRAY` the RESP2 `*-1` null, and a
`CommandError` an error reply. The RESP encoder turns these into RESP2 or RESP3 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from streams.errors import CommandError


@dataclass(frozen=True, slots=True)
class Status:
    text: str


@dataclass(frozen=True, slots=True)
class Map:
    """A RESP3 map. In RESP2 it is a flat array, or (nested=True, as XREAD replies) an array of
    two-element arrays."""

    pairs: tuple[tuple[Reply, Reply], ...]
    nested: bool = False


class _NullArray:
    """RESP2 `*-1` (and RESP3 `_`): what XREAD answers when nothing is there."""

    _instance: _NullArray | None = None

    def __new__(cls) -> _NullArray:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()
OK = Status("OK")

Reply = Union[bytes, int, None, list["Reply"], Status, Map, _NullArray, CommandError]  # noqa: UP007 (recursive alias)


def to_resp2_python(reply: Reply) -> object:
    """The reply as redis-py's raw RESP2 parser would give it (for projections and tests)."""
    if isinstance(reply, Status):
        return reply.text.encode()
    if isinstance(reply, Map):
        if reply.nested:
            return [[to_resp2_python(k), to_resp2_python(v)] for k, v in reply.pairs]
        flat: list[object] = []
        for k, v in reply.pairs:
            flat.append(to_resp2_python(k))
            flat.append(to_resp2_python(v))
        return flat
    if isinstance(reply, list):
        return [to_resp2_python(r) for r in reply]
    if reply is NULL_ARRAY:
        return None
    return reply
