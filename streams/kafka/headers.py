"""Kafka record headers as every reader of ours sees them: one normal form, made in one place.

librdkafka hands a reader a record's headers as a list of (name, value) pairs, a dict in some
versions, or None, and a value may come back as `str` where it was produced from one. Readers (the
materializer's record gate, snapshots, the mirror, replay and the Spark source) all want the same
thing: the pairs in order, values as bytes (None kept: a header may carry no value), and the last
value of a name (a mirror appends its headers last). Kept free of the Kafka client's types so the
pure parts can take headers too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

Header = tuple[str, bytes | None]
Headers = list[Header]
Produced = list[tuple[str, str | bytes | None]]
"""What a producer is handed (`produce(headers=...)`)."""
RawHeaders = Iterable[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None
"""What librdkafka may hand a reader."""


class HasHeaders(Protocol):
    def headers(self) -> object: ...


def normal(raw: RawHeaders) -> Headers:
    """The pairs in order, values as bytes (or None)."""
    if raw is None:
        return []
    pairs = raw.items() if isinstance(raw, Mapping) else raw
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]


def headers_of(message: HasHeaders) -> Headers:
    """A read record's headers in normal form."""
    raw = message.headers()
    return normal(raw)  # type: ignore[arg-type]


def header(headers: RawHeaders, name: str) -> bytes | None:
    """The last value of header `name` (None when absent or without a value)."""
    found: bytes | None = None
    for key, value in normal(headers):
        if key == name:
            found = value
    return found


def as_dict(headers: RawHeaders) -> dict[str, bytes]:
    """Name -> last value, for headers that carry one (e.g. a snapshot chunk's)."""
    return {name: value for name, value in normal(headers) if value is not None}
