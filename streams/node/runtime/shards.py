"""The shards a node serves, as one keyspace: the request pipeline's backend on a live node.

A command runs against the shards of the keys it names (`streams.commands.keyspec`): one shard's
state when its keys all live there (the common case), else every involved shard's state seen as
one (`streams.crdt.keyspace.Sharded`); a command with no key (KEYS, SCAN, DBSIZE, FLUSHALL,
CRDT.DIGEST) reads every shard of the node. Its ops are split by key and issued on their own
shards (each shard's ops in that shard's open batch), after every involved shard agreed to take
writes, so a write is refused as a whole or issued as a whole. The reply is held until the
pending batches of the involved shards are committed.

Across shards a command is isolated (it runs on the event loop without a pause, so nothing else
comes in between in this region) but not atomic in the log: each shard commits its part in its
own transaction, and other regions may apply the parts at different moments. With one shard
(the default) every command is what it always was.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Sequence

from streams import slots
from streams.commands.base import Command, Context
from streams.commands.keyspec import command_keys
from streams.commands.table import run
from streams.crdt import ops
from streams.crdt.keyspace import Sharded
from streams.kafka.sizes import batch_bytes
from streams.node.runtime import refusals
from streams.node.runtime.backend import Outcome, Ran
from streams.node.runtime.clock import NodeClock
from streams.node.runtime.refusals import Refusal
from streams.node.runtime.replica import Issued
from streams.node.runtime.shard import Shard
from streams.node.runtime.snapshotter import Pause
from streams.node.runtime.waiters import Waiters
from streams.ops.codec import EncodeError

LARGE_REQUEST_BYTES = 1024 * 1024
"""A request whose arguments add up to more may carry an op too large for the log: its ops'
bytes are counted before they are encoded (smaller ones are only measured once encoded)."""


HEADERS_ROOM = 4096
"""More than an op record's headers and batch framing ever take (a few short ASCII headers,
`streams.ops.codec.headers`): a record whose key and value leave this much room fits."""


class ShardSet:
    def __init__(
        self,
        shards: Sequence[Shard],
        total: int,
        clock: NodeClock,
        names: dict[int, str],
        waiters: Waiters,
        pause: Pause,
    ) -> None:
        """`shards`: the ones this node serves, of `total` shards in the database."""
        self.shards = list(shards)
        self.by_index = {s.index: s for s in self.shards}
        self.total = total
        self.clock = clock
        self.names = names
        self.waiters = waiters
        self.pause = pause
        self._all = frozenset(self.by_index)

    def shard_of(self, key: bytes) -> int:
        return slots.shard_of(key, self.total)

    def involved(self, cmd: Command, args: list[bytes]) -> frozenset[int]:
        """The shards of the keys a request names; every shard of the node for a command
        without keys."""
        if self.total == 1:
            return self._all
        found = frozenset(self.shard_of(k) for k in command_keys(cmd.name, args))
        return found or self._all

    # --- Backend --------------------------------------------------------------------------------

    async def paused(self) -> None:
        await self.pause.wait()

    def execute(self, cmd: Command, args: list[bytes]) -> Ran:
        involved = self.involved(cmd, args)
        shards = [self.by_index[i] for i in sorted(involved)]
        for shard in shards:
            refused = shard.read_refusal()
            if refused is not None:
                return Ran(refused, None, involved)
        ctx = self.context(shards)
        result = run(cmd, ctx, args)
        effects = result.effects
        if effects:
            large = sum(map(len, args)) > LARGE_REQUEST_BYTES
            refused = self._issue(effects, ctx.now_ms, large)
            if refused is not None:
                return Ran(refused, None, involved)
        return Ran(result.reply, result.block, involved, result.block_ms)

    def committed(self, cmd: Command, args: list[bytes]) -> Ran | None:
        """A read of one shard run on the state its log holds, when a write batch of that shard
        is slow to commit (`Shard.committed_view`): answered at once, never held. None when the
        live state may be read (and the reply held as usual), or the read spans shards."""
        if "readonly" not in cmd.flags or all(
            s.writepath.in_flight_since is None for s in self.shards
        ):
            return None
        involved = self.involved(cmd, args)
        if len(involved) != 1:
            return None
        shard = self.by_index[next(iter(involved))]
        view = shard.committed_view() if shard.read_refusal() is None else None
        if view is None:
            return None
        region = shard.replica.region
        result = run(cmd, Context(view, region.id, region.mode, self.clock.now_ms()), args)
        if result.effects:
            return None
        return Ran(result.reply, result.block, frozenset(), result.block_ms)

    def pending(self, shards: frozenset[int] | None) -> Outcome | None:
        """What a reply that read or wrote `shards` (None: any) must wait for: the newest
        pending batch of each, as one outcome; None when nothing is pending."""
        chosen = self.shards if shards is None else [self.by_index[i] for i in sorted(shards)]
        pending = [o for o in (s.pending() for s in chosen) if o is not None]
        if not pending:
            return None
        return pending[0] if len(pending) == 1 else _all_of(pending)

    async def wait(
        self, keys: Iterable[bytes], timeout: float, lost: asyncio.Future[None] | None
    ) -> None:
        await self.waiters.wait(keys, timeout, lost)

    # --- the state ------------------------------------------------------------------------------

    def context(self, shards: Sequence[Shard]) -> Context:
        """What a command reads: one shard's state, or several shards' as one."""
        now = self.clock.now_ms()
        if len(shards) == 1:
            return shards[0].replica.context(now)
        first = shards[0].replica.region
        return Context(
            Sharded({s.index: s.replica.region.state for s in shards}, self.shard_of),
            first.id,
            first.mode,
            now,
        )

    def vector(self, shards: Sequence[Shard] | None = None) -> dict[int, int]:
        """Per origin region, the ops applied summed over `shards` (all of the node's)."""
        total: dict[int, int] = {}
        for shard in self.shards if shards is None else shards:
            for origin, seq in shard.replica.region.causal.applied.items():
                total[origin] = total.get(origin, 0) + seq
        return total

    def _issue(self, effects: list[ops.Body], now_ms: int, large: bool = False) -> Refusal | None:
        """Issue a command's ops on their shards, or refuse them all (a shard refusing writes,
        an op that cannot be encoded, a record the log would not take): every shard's part is
        numbered and encoded before any is applied. `large`: the request was big enough that an
        op may not fit; its bytes are counted before encoding, so a 70 MB value is refused
        without spending the event loop's time on encoding it."""
        if len(self.shards) == 1:
            by_shard = {self.shards[0].index: effects}
        else:
            by_shard = {}
            for body in effects:
                by_shard.setdefault(self.shard_of(body.key), []).append(body)
        prepared: list[tuple[Shard, Issued]] = []
        for index, bodies in by_shard.items():
            shard = self.by_index[index]
            replicated = any(ops.is_replicated(b) for b in bodies)
            refused = shard.write_refusal() if replicated else shard.local_refusal()
            if refused is not None:
                return refused
            limit = shard.setup.log.record_limit
            if large:
                for body in bodies:
                    floor = _payload_bytes(body)
                    if floor > limit:
                        return refusals.too_large(f"at least {floor}", limit)
            try:
                issued = shard.prepare(bodies, now_ms)
            except EncodeError as exc:
                return refusals.not_encodable(str(exc))
            too_big = _oversized(issued, shard.setup.log.record_limit)
            if too_big is not None:
                return too_big
            prepared.append((shard, issued))
        for shard, issued in prepared:
            shard.issue(issued)
        return None


def _oversized(issued: Issued, limit: int) -> Refusal | None:
    """The refusal of a command one of whose records the log would not take: checked here, per
    command, so the writer never meets a record its broker refuses (which failed the whole batch
    of every client and sent the node into a reload)."""
    quick = limit - HEADERS_ROOM
    for records in (issued.records, issued.local_records):
        for sealed in records:
            if len(sealed.key) + len(sealed.value) <= quick:
                continue  # far from the limit (nearly always): not worth a byte count
            size = batch_bytes(sealed.key, sealed.value, sealed.headers)
            if size > limit:
                return refusals.too_large(str(size), limit)
    return None


def _payload_bytes(value: object) -> int:
    """The bytes an op body carries (its key, field names and values, ...): a lower bound of its
    encoded record, since the encoding writes every byte string whole."""
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, tuple | list):
        return sum(_payload_bytes(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_payload_bytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 0


def _all_of(outcomes: list[Outcome]) -> Outcome:
    """An outcome that fails as soon as one of `outcomes` fails, else succeeds once all did."""
    combined: Outcome = asyncio.get_running_loop().create_future()
    remaining = len(outcomes)

    def done(outcome: Outcome) -> None:
        nonlocal remaining
        remaining -= 1
        if combined.done():
            return
        if outcome.cancelled():
            combined.cancel()
            return
        failure = outcome.result()
        if failure is not None:
            combined.set_result(failure)
        elif remaining == 0:
            combined.set_result(None)

    for outcome in outcomes:
        outcome.add_done_callback(done)
    return combined
