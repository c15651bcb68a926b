"""The headers a mirror adds to every copy, and reading them back.

`mirror.source` names the source cluster (its alias) and `mirror.offset` the record's offset in
its source partition. They are how a restarted mirror knows where it got (the target's last copy
says it), how a mirror refuses to copy a copy, and how a copy maps back to its source record.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message

from streams.kafka.headers import Produced, header, headers_of

MIRROR_SOURCE_HEADER = "mirror.source"
MIRROR_OFFSET_HEADER = "mirror.offset"


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


def copy_headers(message: Message[Any, Any], alias: bytes) -> Produced:
    """The headers of the copy of `message`: its own, then where it comes from."""
    offset = message.offset()
    assert offset is not None
    headers: Produced = list(headers_of(message))
    headers.append((MIRROR_SOURCE_HEADER, alias))
    headers.append((MIRROR_OFFSET_HEADER, str(offset).encode()))
    return headers
