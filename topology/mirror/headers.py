"""The headers a mirror adds to every copy, and reading them back.

`mirror.source` names the source cluster (its alias) and `mirror.offset` the record's offset in
its source partition. They are how a restarted mirror knows where it got (the target's last copy
says it), how a mirror refuses to copy a copy, and how a copy maps back to its source record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import Message

MIRROR_SOURCE_HEADER = "mirror.source"
MIRROR_OFFSET_HEADER = "mirror.offset"

Headers = list[tuple[str, str | bytes | None]]


def headers_of(message: Message[Any, Any]) -> Headers:
    """A record's headers as a list, in order (librdkafka may give a dict or None)."""
    headers = message.headers()
    if headers is None:
        return []
    if isinstance(headers, dict):
        return list(headers.items())
    return list(headers)


def header(headers: Sequence[tuple[str, str | bytes | None]], name: str) -> bytes | None:
    """The last value of header `name` (the mirror appends its headers last)."""
    found: bytes | None = None
    for key, value in headers:
        if key == name:
            found = value.encode() if isinstance(value, str) else value
    return found


def is_copy(message: Message[Any, Any]) -> bool:
    """The record was written by a mirror (it carries `mirror.source`)."""
    return header(headers_of(message), MIRROR_SOURCE_HEADER) is not None


def copied_from(message: Message[Any, Any]) -> tuple[bytes | None, int | None]:
    """A copy's source alias and source offset, each None when missing or invalid."""
    headers = headers_of(message)
    source, offset = header(headers, MIRROR_SOURCE_HEADER), header(headers, MIRROR_OFFSET_HEADER)
    if offset is None or not offset.isdigit():
        return source, None
    return source, int(offset)


def copy_headers(message: Message[Any, Any], alias: bytes) -> Headers:
    """The headers of the copy of `message`: its own, then where it comes from."""
    offset = message.offset()
    assert offset is not None
    headers = headers_of(message)
    headers.append((MIRROR_SOURCE_HEADER, alias))
    headers.append((MIRROR_OFFSET_HEADER, str(offset).encode()))
    return headers
