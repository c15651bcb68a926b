"""Which stream commands of Redis 8 an endpoint has, asked once per endpoint.

The SDK uses them where the server has them and falls back to the Redis 7 way where it does not
(an older region, plain Redis 7): `Producer` deduplicates through XADD IDMP (else the `_idk`
field the consumers drop duplicates by), `GroupConsumer` reclaims idle entries through
`XREADGROUP ... CLAIM` (else an XAUTOCLAIM sweep) and hands entries back on stop with XNACK (else
XCLAIM IDLE).

How: `COMMAND INFO XCFGSET XNACK`. XCFGSET came with IDMP (Redis 8.6), after CLAIM (8.4), so a
server that knows it also reads with CLAIM; XNACK came later (8.8). The version a server reports
says nothing useful here (a streams region reports the 7.0.15 whose behaviour it matches).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import redis.exceptions


class Features(NamedTuple):
    idmp: bool
    """XADD IDMP / IDMPAUTO and XCFGSET."""
    claim: bool
    """XREADGROUP ... CLAIM min-idle-time."""
    nack: bool
    """XNACK."""


REDIS7 = Features(False, False, False)


def features_of(info: Any) -> Features:
    """The features a `COMMAND INFO XCFGSET XNACK` reply shows (nil for an unknown command)."""
    if not isinstance(info, list) or len(info) != 2:
        return REDIS7
    xcfgset, xnack = (entry is not None and entry != [] for entry in info)
    return Features(idmp=xcfgset, claim=xcfgset, nack=xnack)


class Capabilities:
    """The features of each endpoint (by URL), asked on first use."""

    def __init__(self) -> None:
        self._known: dict[str, Features] = {}

    async def of(self, ep: Any, key: str) -> Features:
        """`ep` is an `Endpoint`; `key` routes the question to the node serving the stream."""
        found = self._known.get(ep.url)
        if found is None:
            try:
                info = await ep.cmd(key, "COMMAND", "INFO", "XCFGSET", "XNACK")
            except redis.exceptions.ResponseError:
                info = None  # COMMAND refused (ACL): assume the Redis 7 commands
            found = self._known[ep.url] = features_of(info)
        return found

    def forget(self, url: str) -> None:
        """The endpoint failed: it may come back as another server."""
        self._known.pop(url, None)
