"""One shard's replicated state at the node: the `Region` the node serves, fed by the fold.

Everything that changes the state goes through here, on the event loop:
- records read from the op logs (`feed`): folded by `streams.crdt.fold.Fold`, the same fold replay
  and Spark use. While the node catches up (boot, reload) the fold gates replicated ops on the
  region's local ops, so each local op is applied on exactly the state it was made on; once caught
  up (`go_live`) the gates are lifted and the same fold goes on applying the other regions' ops as
  they arrive (and, on a fenced node, its own local ops written by the writer that took over, each
  once its ctx is covered);
- the ops of the commands this node runs (`issue`): numbered and applied at once
  (`Region.issue_all`), then logged by the write path.

Blocked readers of every key an applied op touched are woken, whichever way it came.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from streams.commands.base import Context
from streams.crdt import ops
from streams.crdt.fold import Applied, Fold, Partition
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.node.materializer import Decoded
from streams.node.waiters import Waiters

Positions = dict[Partition, int]


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
            fold.feed((item.topic, item.partition), item.offset, item.record)
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

    def context(self, now_ms: int, names: dict[int, str]) -> Context:
        region = self.region
        return Context(region.state, region.id, region.mode, now_ms, region.vector, names)

    def issue(
        self, bodies: Sequence[ops.Body], now_ms: int
    ) -> tuple[list[ops.Op], list[ops.LocalOp]]:
        """Number and apply one command's ops (the caller logs them)."""
        issued = self.region.issue_all(bodies, now_ms)
        self.waiters.wake(body.key for body in bodies)
        return issued

    def committed(self, replicated: Iterable[ops.Op]) -> None:
        """Ops of this region's own made it to the log (CRDT.INFO's time of the last op)."""
        for op in replicated:
            self.last_ts[op.origin] = op.ts_ms

    def ack_effects(self, now_ms: int) -> list[ops.Op]:
        """The consecutive-XACK effects held back for coalescing, issued now."""
        replicated, _local = self.region.issue_all(self.region.ack_effects(), now_ms)
        return replicated
