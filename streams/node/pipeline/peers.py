"""The other node processes of this region, asked over RESP for their shards' figures.

A region whose shards are spread over several processes still answers CRDT.DIGEST and CRDT.VECTOR
for the whole region on every node: the node asks each other node of its region for CRDT.SHARDS
(per shard: digest and applied vector) and combines them with its own. The calls are
asynchronous (two nodes asking each other at once must not wait on each other's event loop), one
short connection each, bounded by a timeout, authenticated with the node's own credentials when
the region requires a password.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import hiredis

from streams.errors import CommandError

PEER_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Peer:
    index: int
    host: str
    port: int
    tls: bool = False
    """The peer serves only TLS: dial it with the node's client context."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def _frame(args: Sequence[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class Peers:
    def __init__(
        self,
        region: str,
        peers: Sequence[Peer],
        credentials: tuple[bytes, bytes] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`credentials`: (user, password) sent with AUTH first, when the region requires one;
        `tls`: the client context for peers that serve only TLS."""
        self.tls = tls
        self.region = region
        self.peers = list(peers)
        self.credentials = credentials

    async def call_all(self, *args: bytes) -> list[object]:
        """Every peer's reply to one command (as hiredis reads it), in peer order; CommandError
        naming a peer that could not answer."""
        return list(await asyncio.gather(*(self.call(peer, *args) for peer in self.peers)))

    async def call(self, peer: Peer, *args: bytes) -> object:
        try:
            return await asyncio.wait_for(self._call(peer, list(args)), PEER_TIMEOUT_S)
        except (OSError, TimeoutError, hiredis.ProtocolError) as exc:
            raise CommandError(
                f"ERR node {peer.index} of region {self.region} at {peer.address} did not answer "
                f"{args[0].decode('utf-8', 'replace').upper()}: {exc or type(exc).__name__}"
            ) from exc

    async def _call(self, peer: Peer, args: list[bytes]) -> object:
        context = self.tls if peer.tls else None
        reader, writer = await asyncio.open_connection(peer.host, peer.port, ssl=context)
        try:
            requests = [args]
            if self.credentials is not None:
                requests.insert(0, [b"AUTH", *self.credentials])
            writer.write(b"".join(_frame(r) for r in requests))
            await writer.drain()
            parser = hiredis.Reader()
            replies: list[object] = []
            while len(replies) < len(requests):
                data = await reader.read(65536)
                if not data:
                    raise OSError("connection closed")
                parser.feed(data)
                while (reply := parser.gets()) is not False:
                    replies.append(reply)
            for reply in replies:
                if isinstance(reply, hiredis.ReplyError):
                    raise CommandError(
                        f"ERR node {peer.index} of region {self.region} at {peer.address} "
                        f"answered {args[0].decode('utf-8', 'replace').upper()} with: {reply}"
                    )
            return replies[-1]
        finally:
            writer.close()
