"""The node's CRDT.* admin commands.

- CRDT.DIGEST: hex digest of the region's replicated state (`streams.crdt.keyspace.digest` over
  every shard's; equal in all regions after sync). CRDT.VECTOR: applied ops per origin region,
  summed over the shards (a map in RESP3, a flat `name seq ...` array in RESP2). Both speak for
  the whole region: a node that owns some of the region's shards asks the others
  (`streams.node.pipeline.peers`) for theirs with CRDT.SHARDS.
- CRDT.SHARDS: per shard this node owns, its index, digest and applied vector.

- CRDT.FLUSH: log what is held back for coalescing (XACK effects) now and wait for it to commit;
  `LocalTopology.sync()` sends it first, and it wakes the readers out of their idle fetch wait.
- CRDT.INFO: the node's account of itself (`streams.node.pipeline.report`).
- CRDT.CLOCK [ms]: pin (or release) the node's clock; only with --debug-clock.
- CRDT.FAULT APPEND n: the next n appends of each shard fail; only with --debug-faults.
- CRDT.SNAPSHOT: write a snapshot of each shard now (as BGSAVE, answered once stored).
"""

from __future__ import annotations

from streams import errors
from streams.commands.base import parse_int
from streams.crdt import keyspace
from streams.errors import CommandError
from streams.node.pipeline.clients import Client
from streams.node.pipeline.peers import Peers
from streams.node.pipeline.report import Report
from streams.node.runtime.clock import NodeClock
from streams.node.runtime.refusals import LOADING
from streams.node.runtime.shards import ShardSet
from streams.reply import OK, Map, Reply


class Admin:
    def __init__(
        self,
        shards: ShardSet,
        clock: NodeClock,
        report: Report,
        debug_faults: bool = False,
        peers: Peers | None = None,
    ) -> None:
        self.shards = shards
        self.clock = clock
        self.report = report
        self.debug_faults = debug_faults
        self.peers = peers
        """The region's other nodes, when its shards are spread over several."""

    async def digest(self, client: Client, args: list[bytes]) -> Reply:
        try:
            figures = await self._region_shards()
        except CommandError as exc:
            return exc
        missing = [i for i in range(self.shards.total) if i not in figures]
        if missing:
            return CommandError(f"ERR no node of the region answered for shards {missing}")
        return keyspace.digest([figures[i][0] for i in range(self.shards.total)]).encode()

    async def vector(self, client: Client, args: list[bytes]) -> Reply:
        try:
            figures = await self._region_shards()
        except CommandError as exc:
            return exc
        total: dict[int, int] = {}
        for _digest, vector in figures.values():
            for origin, seq in vector.items():
                total[origin] = total.get(origin, 0) + seq
        return vector_reply(total, self.shards.names, self.report.region_id)

    async def shard_figures(self, client: Client, args: list[bytes]) -> Reply:
        """CRDT.SHARDS: [[index, digest, [region, seq, ...]], ...] for this node's shards."""
        names = self.shards.names
        return [
            [
                index,
                digest.encode(),
                [x for o, s in sorted(vector.items()) for x in (names.get(o, f"r{o}").encode(), s)],
            ]
            for index, (digest, vector) in sorted(self._own_shards().items())
        ]

    def _own_shards(self) -> dict[int, tuple[str, dict[int, int]]]:
        return {
            s.index: (s.replica.region.state.digest(), dict(s.replica.region.causal.applied))
            for s in self.shards.shards
        }

    async def _region_shards(self) -> dict[int, tuple[str, dict[int, int]]]:
        """Digest and applied vector of every shard of the region: this node's, and the other
        nodes' when there are any."""
        figures = self._own_shards()
        if self.peers is None:
            return figures
        ids = {name.encode(): r for r, name in self.shards.names.items()}
        for reply in await self.peers.call_all(b"CRDT.SHARDS"):
            figures.update(_shard_figures(reply, ids))
        return figures

    async def flush(self, client: Client, args: list[bytes]) -> Reply:
        count = 0
        for shard in self.shards.shards:
            if shard.loader.reader is not None:
                shard.loader.reader.wake()  # replicated ops come next: leave the idle wait
            count += shard.flush_ack_effects()
        for shard in self.shards.shards:
            failure = await shard.writepath.settled()
            if failure is not None:
                return failure
        return count if count else OK

    async def info(self, client: Client, args: list[bytes]) -> Reply:
        fields = self.report.crdt_info()
        return Map(tuple((k.encode(), _reply_value(v)) for k, v in fields.items()))

    async def clock_(self, client: Client, args: list[bytes]) -> Reply:
        """A test hook, like Redis's DEBUG commands: it lets a seed table's `*` IDs be the exact
        ones the seed prints."""
        if not self.clock.pinnable:
            return CommandError("ERR CRDT.CLOCK is disabled: start the node with --debug-clock")
        if len(args) > 2:
            return errors.wrong_arity("crdt.clock")
        if len(args) == 1:
            self.clock.pin(None)
            return OK
        try:
            self.clock.pin(parse_int(args[1]))
        except CommandError as exc:
            return exc
        return OK

    async def fault(self, client: Client, args: list[bytes]) -> Reply:
        """Makes appends fail (their transactions are aborted), to prove the failure path of
        group commit."""
        if not self.debug_faults:
            return CommandError("ERR CRDT.FAULT is disabled: start the node with --debug-faults")
        if args[1].lower() != b"append":
            return CommandError("ERR CRDT.FAULT knows only APPEND <count>")
        try:
            count = parse_int(args[2])
        except CommandError as exc:
            return exc
        for shard in self.shards.shards:
            shard.writer.fail_next = max(0, count)
        return OK

    async def snapshot(self, client: Client, args: list[bytes]) -> Reply:
        if any(s.loading is not None for s in self.shards.shards):
            return LOADING
        taken: list[str] = []
        for shard in self.shards.shards:
            # The state booted from a snapshot is stored again only once its digest checked
            # (`streams.node.runtime.digest_check`: seconds after a start at most).
            await shard.loader.checked.wait()
            snapshot_id = await shard.snapshotter.take()
            if snapshot_id is None:
                return CommandError(
                    "ERR no snapshot was taken now (one in progress, or see the log)"
                )
            taken.append(snapshot_id)
        return " ".join(taken).encode()


def vector_reply(vector: dict[int, int], names: dict[int, str], region_id: int) -> Map:
    """CRDT.VECTOR's reply: every region of the topology (and any origin seen) with its seq."""
    return Map(
        tuple(
            (names.get(r, f"r{r}").encode(), vector.get(r, 0))
            for r in sorted(set(vector) | set(names) | {region_id})
        )
    )


def _shard_figures(reply: object, ids: dict[bytes, int]) -> dict[int, tuple[str, dict[int, int]]]:
    """A peer's CRDT.SHARDS reply, checked."""
    out: dict[int, tuple[str, dict[int, int]]] = {}
    try:
        assert isinstance(reply, list)
        for index, digest, flat in reply:
            assert isinstance(index, int) and isinstance(digest, bytes) and isinstance(flat, list)
            vector = {ids[flat[i]]: int(flat[i + 1]) for i in range(0, len(flat), 2)}
            out[index] = (digest.decode(), vector)
    except (AssertionError, KeyError, ValueError, TypeError, IndexError) as exc:
        raise CommandError(f"ERR a node of the region answered CRDT.SHARDS with {reply!r}") from exc
    return out


def _reply_value(value: object) -> Reply:
    if isinstance(value, int):
        return value
    return str(value).encode()
