"""Reading the snapshots stored in a `<region>.snapshot` partition: chunks reassembled into whole
files, checked against their SHA-256 (`read_complete`). Below the node (`streams.node.kafka.
snapshots`, which stores them and picks one to boot from) so that the replay tools, which must not
load the node's Kafka adapters, can start from a stored snapshot too when the logs no longer
reach the beginning (retention, `streams.kafka.retention`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message

from streams.kafka.headers import as_dict, headers_of
from streams.kafka.reading import EndNotReached, ReadToEnd, consumer_config

log = logging.getLogger(__name__)

KEEP = 2
"""Complete snapshots kept per partition (the reader tries the newest, then the one before)."""
H_ID, H_CHUNK, H_CHUNKS, H_SHA = (
    "snapshot.id",
    "snapshot.chunk",
    "snapshot.chunks",
    "snapshot.sha256",
)


class _NoTopic(Exception):
    pass


@dataclass
class _Assembly:
    snapshot_id: str
    chunks: int
    sha: bytes
    first_offset: int
    parts: dict[int, bytes] = field(default_factory=dict)

    def complete(self) -> bool:
        return len(self.parts) == self.chunks

    def data(self) -> bytes:
        return b"".join(self.parts[i] for i in range(self.chunks))


def _headers(msg: Message[Any, Any]) -> dict[str, bytes]:
    return as_dict(headers_of(msg))


def read_complete(
    bootstrap: str,
    topic: str,
    keep: int = KEEP,
    timeout: float = 120.0,
    partition: int = 0,
    on_complete: Callable[[int], None] | None = None,
) -> list[tuple[str, bytes]]:
    """The newest `keep` complete snapshots in a partition of the topic, newest first, as
    (id, file bytes); `on_complete` is told where every complete one starts (the node's
    snapshot retention)."""
    # Few, large records: the broker finds them fast, and an empty topic answers after one wait.
    consumer = Consumer(consumer_config(bootstrap, f"streams-snapshot-reader-{topic}", 20))
    partial: dict[str, _Assembly] = {}
    done: list[_Assembly] = []

    def on_error(msg: Message[Any, Any]) -> None:
        err = msg.error()
        if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise _NoTopic()  # anything else: the client retries

    reading = ReadToEnd(
        consumer,
        {(topic, partition): 0},
        doing=f"reading the snapshots in {topic} partition {partition}",
        timeout=timeout,
        wait_s=0.2,
        on_error=on_error,
    )
    try:
        for msg in reading:
            h = _headers(msg)
            try:
                sid = h[H_ID].decode()
                index, count = int(h[H_CHUNK]), int(h[H_CHUNKS])
            except (KeyError, ValueError):
                log.warning("%s offset %s: not a snapshot chunk; ignored", topic, msg.offset())
                continue
            asm = partial.get(sid)
            if asm is None:
                asm = partial[sid] = _Assembly(sid, count, h.get(H_SHA, b""), msg.offset() or 0)
            asm.parts[index] = msg.value() or b""
            if asm.complete():
                del partial[sid]
                if on_complete is not None:
                    on_complete(asm.first_offset)
                done.append(asm)
                done = done[-keep:]
            if len(partial) > keep:  # incomplete leftovers of older attempts
                for old in list(partial)[:-keep]:
                    del partial[old]
    except _NoTopic:
        return []
    except EndNotReached as exc:  # the complete ones read so far are still usable
        log.warning("%s; using the complete snapshots read so far", exc)
    finally:
        consumer.close()
    return [(a.snapshot_id, a.data()) for a in reversed(done) if _sha_ok(a)]


def _sha_ok(asm: _Assembly) -> bool:
    ok = hashlib.sha256(asm.data()).hexdigest().encode() == asm.sha
    if not ok:
        log.error("snapshot %s: its chunks do not match their SHA-256; not used", asm.snapshot_id)
    return ok
