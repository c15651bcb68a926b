"""The node's CRDT.* admin commands that act on the node itself (CRDT.DIGEST and CRDT.VECTOR read
the state: `streams.commands.admin`).

- CRDT.FLUSH: log what is held back for coalescing (XACK effects) now and wait for it to commit;
  `LocalTopology.sync()` sends it first, and it wakes the readers out of their idle fetch wait.
- CRDT.INFO: the node's account of itself (`streams.node.report`).
- CRDT.CLOCK [ms]: pin (or release) the node's clock; only with --debug-clock.
- CRDT.FAULT APPEND n: the next n appends of each shard fail; only with --debug-faults.
- CRDT.SNAPSHOT: write a snapshot of each shard now (as BGSAVE, answered once stored).
"""

from __future__ import annotations

from streams import errors
from streams.commands.base import parse_int
from streams.errors import CommandError
from streams.node.clients import Client
from streams.node.clock import NodeClock
from streams.node.report import Report
from streams.node.shard import LOADING
from streams.node.shards import ShardSet
from streams.reply import OK, Map, Reply


class Admin:
    def __init__(
        self, shards: ShardSet, clock: NodeClock, report: Report, debug_faults: bool = False
    ) -> None:
        self.shards = shards
        self.clock = clock
        self.report = report
        self.debug_faults = debug_faults

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
            snapshot_id = await shard.snapshotter.take()
            if snapshot_id is None:
                return CommandError(
                    "ERR no snapshot was taken now (one in progress, or see the log)"
                )
            taken.append(snapshot_id)
        return " ".join(taken).encode()


def _reply_value(value: object) -> Reply:
    if isinstance(value, int):
        return value
    return str(value).encode()
