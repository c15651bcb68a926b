"""One shard's replicated state at the node: the `Region` the node serves, fed by the fold.

Everything that changes the state goes through here, on the event loop:
- records read from the op logs (`feed`): folded by `streams.crdt.fold.Fold`, the same fold replay
  and Spark use. While the node catches up (boot, reload) the fold gates replicated ops on the
  region's local ops, so each local op is applied on exactly the state it was made on; once caught
  up (`go_live`) the gates are lifted and the same fold goes on applying the other regions' ops as
  they arrive (and, on a fenced node, its own local ops written by the writer that took over, each
  once its ctx is covered);
- the ops of the commands this node runs (`prepare` then `apply`): numbered and encoded for the
  log (`Region.number_all`, `streams.ops.codec.seal`: an op that cannot be encoded refuses its
  command before anything is applied), applied at once (`Region.apply_issued`), then logged by
  the write path.

Blocked readers of every key an applied op touched are woken, whichever way it came.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from streams.commands.base import Context
from streams.crdt import ops
from streams.crdt.fold import Applied, Fold, Partition
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.node.runtime.oplog import Decoded
from streams.node.runtime.undo import Journal, undo_all
from streams.node.runtime.waiters import Waiters
from streams.ops.codec import Sealed, seal

Positions = dict[Partition, int]


class Issued(NamedTuple):
    """One command's ops, numbered, and as the writer appends them."""

    replicated: list[ops.Op]
    local: list[ops.LocalOp]
    records: list[Sealed]
    local_records: list[Sealed]


class Replica:
    def __init__(self, region_id: int, mode: IdMode, waiters: Waiters) -> None:
        self.region_id = region_id
        self.mode = mode
        self.waiters = waiters
        self.region = Region(region_id, mode)
        self.fold = Fold(self.region, observer=self._applied)
        self.live = False
        self.last_ts: dict[int, int] = {}
        """Per origin region, the origin time of the last op applied live (CRDT.INFO lag)."""
        self._touched: set[bytes] = set()
        self.regions: tuple[int, ...] = ()
        """The topology's regions, for the commands that decide about every region's PELs."""

    def reset(self, region: Region | None = None, positions: Mapping[Partition, int] = {}) -> None:
        """Start over from `region` (a snapshot's) or an empty state: a boot or a reload."""
        self.region = region if region is not None else Region(self.region_id, self.mode)
        self.fold = Fold(self.region, positions=positions, observer=self._applied)
        self.live = False
        self.last_ts = {}

    def go_live(self) -> None:
        """The logs were read to their end: lift the fold's gates; ops are applied as they come."""
        self.fold.finish()
        self.live = True
        self._wake()

    # --- records from the logs -----------------------------------------------------------------

    def feed(self, records: Iterable[Decoded]) -> None:
        fold = self.fold
        for item in records:
            fold.feed((item.topic, item.partition), item.offset, item.record, item.txn_last)
        self._wake()

    def _applied(self, applied: Applied) -> None:
        record = applied.record
        self._touched.add(record.body.key)
        if self.live and isinstance(record, ops.Op):
            self.last_ts[record.origin] = record.ts_ms

    def _wake(self) -> None:
        if self._touched:
            self.waiters.wake(self._touched)
            self._touched = set()

    def positions(self) -> Positions:
        """Per partition read, the offset up to which the state holds every record."""
        return self.fold.safe_positions()

    def settled(self) -> bool:
        """Nothing read is waiting to be applied (a snapshot may be taken)."""
        fold = self.fold
        return self.region.causal.waiting == 0 and fold.gated == 0 and fold.waiting_local == 0

    # --- this node's commands ------------------------------------------------------------------

    def context(self, now_ms: int) -> Context:
        region = self.region
        return Context(region.state, region.id, region.mode, now_ms, self.regions)

    def prepare(self, bodies: Sequence[ops.Body], now_ms: int) -> Issued:
        """Number one command's ops and encode them for the log, applying nothing; raises
        EncodeError. `apply` must follow before anything else is numbered."""
        replicated, local = self.region.number_all(bodies, now_ms)
        return Issued(replicated, local, [seal(op) for op in replicated], [seal(r) for r in local])

    def apply(self, issued: Issued, journal: Journal) -> None:
        """Apply what `prepare` numbered (the caller logs it), noting in `journal` how to undo
        it should its batch fail (`streams.node.runtime.undo`)."""
        region = self.region
        state = region.state
        for op in issued.replicated:
            journal.before(state, op)
            region.commit(op)
        for record in issued.local:
            journal.before_local(state, record)
            region.apply_local(record)
        self.waiters.wake(op.body.key for op in issued.replicated)
        self.waiters.wake(record.body.key for record in issued.local)

    def committed(self, replicated: Iterable[ops.Op]) -> None:
        """Ops of this region's own made it to the log (CRDT.INFO's time of the last op)."""
        for op in replicated:
            self.last_ts[op.origin] = op.ts_ms

    def ack_effects(self, now_ms: int, open_journal: Callable[[], Journal]) -> Issued:
        """The consecutive-XACK effects held back for coalescing, issued now (noted in the
        journal `open_journal` gives, only when there are some)."""
        issued = self.prepare(self.region.ack_effects(), now_ms)
        if not issued.replicated:
            return issued
        journal = open_journal()
        state = self.region.state
        for op in issued.replicated:
            journal.before(state, op)
            self.region.commit(op)
        return issued

    def undo(self, journals: list[Journal]) -> None:
        """The batches of `journals` (oldest first) failed: put the state back as the log holds
        it, and wake the blocked readers of what changed (they look again)."""
        self.waiters.wake(undo_all(self.region, journals))
