"""Dead letters: an entry handled `max_deliveries` times without success leaves its group for a
dead-letter stream, with its story (where it came from, the last error, the attempts) in fields
of its own, so an operator can inspect and replay it (`streams group` shows the count).

The move is XADD to the dead-letter stream, then XACK in the group: in one MULTI/EXEC when both
streams hash to one slot (`{orders}:dead` for `orders`), else one after the other, because a
sharded region refuses a transaction across slots (CROSSSLOT) and the two streams may live on
two nodes. A failure between the two leaves the entry pending, so it is dead-lettered again later:
a duplicate dead letter, never a lost entry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis.asyncio as aredis

from streams.sdk.endpoints import Endpoint, EndpointSet, slot_of

log = logging.getLogger("streams.sdk.consumer")

DEAD_LETTER_FIELDS = (
    "_dl_id",
    "_dl_stream",
    "_dl_group",
    "_dl_consumer",
    "_dl_error",
    "_dl_attempts",
    "_dl_region",
)
"""Fields added to the original entry's fields in the dead-letter stream."""


def parse_fields(flat: list[bytes] | None) -> dict[bytes, bytes]:
    if not flat:
        return {}
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


@dataclass
class DeadLetters:
    """Where one consumer's dead letters go (`stream`: None drops them, logged)."""

    endpoints: EndpointSet
    source: str
    group: str
    consumer: str
    stream: str | None

    async def move(
        self,
        ep: Endpoint,
        entry_id: str,
        fields: dict[bytes, bytes] | None,
        attempts: int,
        error: str,
    ) -> None:
        """Dead-letter (or drop) one entry and ack it in its group."""
        if fields is None:
            found = await ep.cmd(self.source, "XRANGE", self.source, entry_id, entry_id)
            if not found:  # deleted meanwhile: nothing to keep
                await self._ack(ep, entry_id)
                return
            fields = parse_fields(found[0][1])
        if self.stream is None:
            log.error(
                "dropping %s after %d deliveries (no dead_letter stream): %s",
                entry_id,
                attempts,
                error,
            )
            await self._ack(ep, entry_id)
            return
        region = await self.endpoints.region_of(ep, self.source)
        meta = (entry_id, self.source, self.group, self.consumer, error, str(attempts), region)
        flat: list[bytes | str] = []
        for name, value in fields.items():
            flat += [name, value]
        for meta_name, text in zip(DEAD_LETTER_FIELDS, meta, strict=True):
            flat += [meta_name, text]
        await self._add_and_ack(ep, self.stream, flat, entry_id)
        log.warning(
            "dead-lettered %s after %d deliveries to %s: %s", entry_id, attempts, self.stream, error
        )

    async def _ack(self, ep: Endpoint, entry_id: str) -> None:
        await ep.cmd(self.source, "XACK", self.source, self.group, entry_id)

    async def _add_and_ack(
        self, ep: Endpoint, dead_letter: str, flat: list[bytes | str], entry_id: str
    ) -> None:
        add = ("XADD", dead_letter, "*", *flat)
        ack = ("XACK", self.source, self.group, entry_id)
        if slot_of(dead_letter) != slot_of(self.source):
            await ep.cmd(dead_letter, *add)
            await ep.cmd(self.source, *ack)
            return

        async def both(client: aredis.Redis) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.execute_command(*add)
            pipe.execute_command(*ack)
            await pipe.execute()

        await ep.call(self.source, both)
