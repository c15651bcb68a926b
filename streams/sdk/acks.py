"""The acks a consumer owes: entries whose handler returned, acked together as one XACK.

A batch's acks wait here until the consumer's next read carries them (`XACK stream group id...`
pipelined before the `XREADGROUP`: one round trip, one group commit of the node) or until
something must see the PEL without them (`streams.sdk.consumer`). They belong to the PEL of one
endpoint (a region's PEL is its own, seed 000): acks meant for one endpoint are never sent to
another; after a failover the new region re-delivers those entries and the consumer's dedupe
memory acks them there without calling the handler.

Sending an ack twice is harmless (XACK of an entry no longer pending does nothing), so acks whose
fate is unknown (the read carrying them was cancelled, or failed) are put back and sent again.
"""

from __future__ import annotations

from streams.sdk.endpoints import Endpoint
from streams.sdk.metrics import Metrics

Ack = tuple[str, float | None]
"""An entry ID, and its handler's duration (None: a duplicate acked without calling it)."""


class AckBuffer:
    """Acks not sent yet, for the PEL of one endpoint of `stream`'s `group`."""

    def __init__(self, stream: str, group: str, metrics: Metrics) -> None:
        self.stream = stream
        self.group = group
        self.metrics = metrics
        self._acks: list[Ack] = []
        self._ep: Endpoint | None = None

    def __len__(self) -> int:
        return len(self._acks)

    def add(self, ep: Endpoint, entry_id: str, seconds: float | None) -> None:
        if self._ep is not ep:
            self._acks.clear()  # another endpoint's: its PEL is not this one's
            self._ep = ep
        self._acks.append((entry_id, seconds))

    def take(self, ep: Endpoint) -> list[Ack]:
        """The acks owed to `ep`'s PEL, removed from the buffer (others are dropped)."""
        acks = self._acks if self._ep is ep else []
        self._acks = []
        return acks

    def put_back(self, ep: Endpoint, acks: list[Ack]) -> None:
        """Acks taken whose XACK may not have run: owed again, ahead of newer ones."""
        if acks and self._ep is ep:
            self._acks[:0] = acks

    def drop(self) -> None:
        """Forget every ack (the consumer left the endpoint they were owed to)."""
        self._acks.clear()

    def command(self, acks: list[Ack]) -> tuple[str, ...]:
        return ("XACK", self.stream, self.group, *(entry_id for entry_id, _ in acks))

    def sent(self, acks: list[Ack]) -> None:
        """The node answered the XACK: the entries are handled and acked (`metrics.processed`)."""
        for entry_id, seconds in acks:
            if seconds is not None:
                self.metrics.processed(entry_id, seconds)

    async def flush(self, ep: Endpoint) -> None:
        """Send what `ep` is owed now, as one XACK."""
        acks = self.take(ep)
        if not acks:
            return
        try:
            await ep.cmd(self.stream, *self.command(acks))
        except BaseException:
            self.put_back(ep, acks)  # a failover drops them; a retry sends them again
            raise
        self.sent(acks)
