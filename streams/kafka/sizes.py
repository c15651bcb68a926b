"""The sizes of Kafka's record format that the op log lives by: the largest op record, the framing
a record batch adds around it, and the topic limit the nodes create their logs with.

Pure arithmetic (no Kafka client imported), so the shard runtime can refuse an oversized write
before it touches the state without loading the Kafka adapters (docs/kafka.md, "Sizes").
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_RECORD_BYTES = 64 * 1024 * 1024
"""The largest op record batch a node lets a write make (`batch_bytes`: key, value, headers and
framing); brokers, mirrors and readers must accept it. A node learns the limit of its own topics
(`max.message.bytes`) at start and uses the smaller of the two; a bigger op is refused to its
client before it touches the state."""

BATCH_FRAMING_BYTES = 61 + 5 + 1 + 10 + 5 + 5 + 5 + 5
"""What Kafka's record batch (format v2) adds around one record, at most: the 61-byte batch
header, then the record's length, attributes, timestamp delta, offset delta, key length, value
length and header count (varints, at most this long). A broker compares the whole batch with the
topic's `max.message.bytes`."""

HEADER_FRAMING_BYTES = 10
"""Per record header: its key length and value length (varints, at most 5 bytes each)."""

FRAMING_ALLOWANCE = 64 * 1024
"""What limits add to `MAX_RECORD_BYTES` for the framing around a record (more than enough)."""

PRODUCER_BATCH_BYTES = 1_000_000
"""librdkafka's `batch.size` default, which the node's writer keeps: it packs small records into
batches up to this size, so a topic that takes less than this may refuse a batch of small
records, failing every write in it (a node refuses such topics at start)."""

TOPIC_MAX_MESSAGE_BYTES = MAX_RECORD_BYTES + FRAMING_ALLOWANCE
"""`max.message.bytes` of the op-log and local topics the nodes create: a batch holding the
largest record, with room to spare for the framing (Kafka's default is 1,048,588 bytes)."""


def batch_bytes(
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, str | bytes | None]] = (),
) -> int:
    """An upper bound of the size of a record batch holding only this record, uncompressed:
    what a broker compares with `max.message.bytes` (a record that fits alone always fits,
    since librdkafka starts a new batch rather than overfill one)."""
    size = BATCH_FRAMING_BYTES + len(key or b"") + len(value or b"")
    for name, data in headers:
        size += HEADER_FRAMING_BYTES + len(name.encode())
        size += len(data.encode() if isinstance(data, str) else data or b"")
    return size
