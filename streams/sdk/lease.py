"""Leases: a consumer keeps the claims of the entries it is handling fresh, so no sweep takes them.

Another consumer's reclaim sweep (XAUTOCLAIM) takes entries idle longer than `claim_idle_ms`.
A batch whose handlers run longer than that would be re-delivered while still in hand and handled
twice (taskiq-redis#101). So while a batch's handlers run, every `claim_idle_ms / 3` the consumer
asks which of the batch's entries it still owns (XPENDING over the batch's ID range, filtered by
consumer) and claims those again with `XCLAIM ... 0 <ids> JUSTID`: idle time reset, no delivery
counted. An entry another consumer took meanwhile is not taken back (that would steal it from a
consumer that may be handling it); it is logged and left alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streams.sdk.endpoints import Endpoint

log = logging.getLogger("streams.sdk.consumer")


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def id_key(entry_id: str) -> tuple[int, int]:
    """An entry ID as a number pair, for ordering (`10-0` after `9-0`)."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def renew(
    ep: Endpoint,
    stream: str,
    group: str,
    consumer: str,
    ids: list[str],
    every_s: float,
    page: int,
) -> None:
    """Renew the claims of `ids` every `every_s` until cancelled (when their handlers have
    returned) or none is ours any more. `page` bounds the XPENDING reply: at least how many of
    this consumer's entries may lie within the batch's ID range."""
    await asyncio.sleep(every_s)  # most batches are done by then: no work before it
    first, last = min(ids, key=id_key), max(ids, key=id_key)
    held = set(ids)
    while held:
        try:
            rows = await ep.cmd(stream, "XPENDING", stream, group, first, last, page, consumer)
            mine = {text(r[0]) for r in rows} & held
            # Not in the reply but within the range it covered: another consumer has it now.
            seen_to = id_key(text(rows[-1][0])) if len(rows) >= page else None
            gone = {i for i in held - mine if seen_to is None or id_key(i) <= seen_to}
            if gone:
                log.warning(
                    "%s lost %s to another consumer while handling them",
                    consumer,
                    ", ".join(sorted(gone, key=id_key)[:5]),
                )
                held -= gone
            if mine:
                await ep.cmd(
                    stream,
                    "XCLAIM",
                    stream,
                    group,
                    consumer,
                    0,
                    *sorted(mine, key=id_key),
                    "JUSTID",
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the loop notices a dead endpoint itself
            log.warning("lease renewal of %d entries failed: %s", len(held), exc)
        await asyncio.sleep(every_s)
