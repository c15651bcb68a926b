"""The consumer's two periodic questions to the server, apart from its loop
(`streams.sdk.consumer`): the lag and pending figures it reports, and one page of the reclaim
sweep that servers without `XREADGROUP ... CLAIM` need."""

from __future__ import annotations

import logging

import redis.exceptions

from streams.sdk.endpoints import Endpoint
from streams.sdk.lease import text
from streams.sdk.metrics import Metrics

log = logging.getLogger("streams.sdk.consumer")


async def report(ep: Endpoint, stream: str, group: str, metrics: Metrics) -> None:
    """The group's lag (XINFO GROUPS) and pending count (XPENDING) to `metrics`."""
    lag: int | None = None
    try:
        groups = await ep.cmd(stream, "XINFO", "GROUPS", stream)
        for flat in groups or []:
            info = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}
            if info.get(b"name") == group.encode():
                value = info.get(b"lag")
                lag = int(value) if isinstance(value, int | bytes) else None
        summary = await ep.cmd(stream, "XPENDING", stream, group)
    except redis.exceptions.ResponseError as exc:
        log.debug("metrics unavailable: %s", exc)
        return
    metrics.lag(lag, int(summary[0]) if summary else 0)


async def sweep_page(
    ep: Endpoint, stream: str, group: str, consumer: str, idle_ms: int, cursor: str, count: int
) -> tuple[str, list[str]]:
    """`XAUTOCLAIM ... cursor COUNT count JUSTID`: the next cursor and the IDs claimed."""
    reply = await ep.cmd(
        stream, "XAUTOCLAIM", stream, group, consumer, idle_ms, cursor, "COUNT", count, "JUSTID"
    )
    claimed = [text(i) for i in reply[1]]
    if claimed:
        shown = ", ".join(claimed[:5])
        log.info("%s reclaimed %d idle entries: %s", consumer, len(claimed), shown)
    return text(reply[0]), claimed


async def ensure_group(ep: Endpoint, stream: str, group: str, start_id: str) -> None:
    """XGROUP CREATE ... MKSTREAM, a BUSYGROUP answer being as good."""
    try:
        await ep.cmd(stream, "XGROUP", "CREATE", stream, group, start_id, "MKSTREAM")
        log.info("created group %s on %s at %s", group, stream, start_id)
    except redis.exceptions.ResponseError as exc:
        if not str(exc).startswith("BUSYGROUP"):
            raise


async def hand_back(
    ep: Endpoint, stream: str, group: str, consumer: str, ids: list[str], nack: bool, idle_ms: int
) -> None:
    """Entries read but not handled, claimable by the others at once: XNACK SILENT (their
    delivery was not one) where the server has it, else XCLAIM to ourselves as long idle."""
    if not ids:
        return
    if nack:
        await ep.cmd(stream, "XNACK", stream, group, "SILENT", "IDS", len(ids), *ids)
    else:
        await ep.cmd(stream, "XCLAIM", stream, group, consumer, 0, *ids, "IDLE", idle_ms, "JUSTID")
    log.info("%s handed back %d unhandled entries", consumer, len(ids))
