"""Errors and explicit handler outcomes of the SDK.

A handler reports an outcome by returning (ack) or raising: `Retry` asks for a later retry after a
chosen delay, `DeadLetter` sends the entry to the dead-letter stream now, any other exception is a
failure retried after the consumer's default delay until `max_deliveries`. Keeping outcomes as
exceptions keeps the handler signature `handler(entry_id, fields)` that the issue fixes.

`is_transient` is the one place that decides which server/transport errors mean "try again,
perhaps on another region": a lost connection, a timeout, and a region node that refuses writes
for a moment because its Kafka op-log append failed (it answers `ERR ... op log ...` until it has
re-read its log).
"""

from __future__ import annotations

import redis.exceptions


class SdkError(RuntimeError):
    """A misuse of the SDK or a condition it cannot recover from (the message says which)."""


class NoHealthyEndpoint(SdkError):
    """Every endpoint failed within the retry budget: no region could serve the request."""


class Retry(Exception):  # noqa: N818 - an outcome, not an error
    """Raised by a handler: leave the entry pending and retry it after `after_ms`."""

    def __init__(self, after_ms: int = 1000, reason: str = "retry requested") -> None:
        super().__init__(reason)
        if after_ms < 0:
            raise ValueError("Retry(after_ms) must be >= 0")
        self.after_ms = after_ms


class DeadLetter(Exception):  # noqa: N818 - an outcome, not an error
    """Raised by a handler: copy the entry to the dead-letter stream now and ack it."""


_TRANSIENT_TEXT = ("op log", "oplog", "writes refused", "fenced", "loading", "tryagain")


def is_transient(exc: BaseException) -> bool:
    """True when the same request may succeed later or on another region's node."""
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        return True
    if isinstance(exc, OSError | TimeoutError):
        return True
    if isinstance(exc, redis.exceptions.ResponseError):
        text = str(exc).lower()
        if text.startswith(("loading", "tryagain", "busy ")):
            return True
        return any(word in text for word in _TRANSIENT_TEXT)
    return False
