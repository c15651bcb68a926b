"""One region's replica: materialized state, causal buffer, op numbering, XACK coalescing.

Pure: the caller supplies time and moves ops between regions (the simulated sync of the tests, or
Kafka in the node). `issue_all` is the one way a command's ops are made: numbered (dot and causal
context of this moment) and applied at once; the node then logs them and holds the command's reply
until the log has them (group commit, `streams.node.runtime.writepath`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from streams.crdt import ops
from streams.crdt.causal import CausalBuffer
from streams.crdt.state import State
from streams.ids import MIN_ID, IdMode, StreamID


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled, still subclassed: replay's KeyWatch
class Region:
    __slots__ = ("id", "mode", "state", "causal", "local_seq", "_dirty_acks", "_progress")

    def __init__(self, region_id: int, mode: IdMode = IdMode.STRICT) -> None:
        self.id = region_id
        self.mode = mode
        self.state = State()
        self.causal = CausalBuffer()
        self.local_seq = 0
        self._dirty_acks: set[tuple[bytes, bytes]] = set()
        # What each other region had applied, as learned from its ops applied here.
        self._progress: dict[int, dict[int, int]] = {}

    @property
    def vector(self) -> dict[int, int]:
        """Applied seq per origin region (this region's own ops included)."""
        return dict(self.causal.applied)

    def prepare(self, body: ops.ReplicatedBody, now_ms: int) -> ops.Op:
        applied = self.causal.applied
        seq = applied.get(self.id, 0) + 1
        ctx = tuple(sorted((r, s) for r, s in applied.items() if r != self.id and s > 0))
        return ops.Op(self.id, seq, ctx, now_ms, body)

    def prepare_all(self, bodies: list[ops.ReplicatedBody], now_ms: int) -> list[ops.Op]:
        """Consecutive ops for one command, to be appended together and then committed in order.

        They share one context (what the region had applied when the command ran); each later
        one also covers the earlier ones through its own origin's seq.
        """
        first = self.prepare(bodies[0], now_ms) if bodies else None
        if first is None:
            return []
        return [first] + [
            ops.Op(self.id, first.seq + i, first.ctx, now_ms, body)
            for i, body in enumerate(bodies[1:], start=1)
        ]

    def commit(self, op: ops.Op) -> None:
        if op.origin != self.id or op.seq != self.causal.applied.get(self.id, 0) + 1:
            raise ValueError(f"op {op.origin}:{op.seq} is not this region's next op")
        self.causal.applied[self.id] = op.seq
        self.state.apply(op)

    def issue_all(
        self, bodies: Sequence[ops.Body], now_ms: int
    ) -> tuple[list[ops.Op], list[ops.LocalOp]]:
        """Issue one command's ops: `number_all`, then `apply_issued`."""
        replicated, local = self.number_all(bodies, now_ms)
        self.apply_issued(replicated, local)
        return replicated, local

    def number_all(
        self, bodies: Sequence[ops.Body], now_ms: int
    ) -> tuple[list[ops.Op], list[ops.LocalOp]]:
        """Number one command's ops without applying them: its replicated ops consecutively
        (`prepare_all`), then its local ops, whose ctx covers the replicated ones. A caller that
        must check the ops first (the node encodes them for the log) applies them afterwards
        with `apply_issued`, before anything else is numbered."""
        replicated = self.prepare_all([b for b in bodies if ops.is_replicated(b)], now_ms)
        local_bodies = [b for b in bodies if ops.is_local(b)]
        if not local_bodies:
            return replicated, []
        applied = dict(self.causal.applied)
        if replicated:
            applied[self.id] = replicated[-1].seq
        ctx = tuple(sorted((r, s) for r, s in applied.items() if s > 0))
        local = [
            ops.LocalOp(self.id, self.local_seq + i, now_ms, body, ctx)
            for i, body in enumerate(local_bodies, start=1)
        ]
        return replicated, local

    def apply_issued(self, replicated: Sequence[ops.Op], local: Sequence[ops.LocalOp]) -> None:
        """Apply what `number_all` numbered, in order."""
        for op in replicated:
            self.commit(op)
        for record in local:
            self.apply_local(record)

    def issue(self, body: ops.ReplicatedBody, now_ms: int) -> ops.Op:
        op = self.prepare(body, now_ms)
        self.commit(op)
        return op

    def issue_local(self, body: ops.LocalBody, now_ms: int) -> ops.LocalOp:
        _replicated, (record,) = self.issue_all([body], now_ms)
        return record

    def apply_local(self, record: ops.LocalOp) -> None:
        """Apply one of this region's local ops (live, or replayed from `<region>.local`)."""
        self.local_seq = max(self.local_seq, record.seq)
        self.state.apply_local(record.body)
        body = record.body
        if isinstance(body, ops.Ack) or (isinstance(body, ops.Deliver) and body.noack):
            self._dirty_acks.add((body.key, body.group))

    def receive(self, op: ops.Op) -> list[ops.Op]:
        """Offer an op from any origin (own ops replayed too); apply what became deliverable."""
        released = self.causal.offer(op)
        for ready in released:
            self.state.apply(ready)
            self._learn(ready)
            body = ready.body
            if type(body) is ops.AckEffect and ready.origin != self.id:
                # Our cursors moved: announce our own frontier in turn, so that the regions
                # deciding ACKED deletes learn what is (not) pending here.
                self._dirty_acks.add((body.key, body.group))
        return released

    def receive_unit(self, unit: list[ops.Op]) -> list[ops.Op]:
        """Offer another region's transaction (consecutive ops of one origin) as one unit
        (`CausalBuffer.offer_unit`); apply what became deliverable."""
        released = self.causal.offer_unit(unit)
        for ready in released:
            self.state.apply(ready)
            self._learn(ready)
        return released

    def _learn(self, op: ops.Op) -> None:
        """An op carries its origin's applied vector when it was issued (ctx, plus its own seq):
        a lower bound of how far that region has applied every region."""
        if op.origin == self.id:
            return
        known = self._progress.get(op.origin)
        if known is None:
            known = self._progress[op.origin] = {}
        if op.seq > known.get(op.origin, 0):
            known[op.origin] = op.seq
        for region, seq in op.ctx:
            if seq > known.get(region, 0):
                known[region] = seq

    def progress(self) -> dict[int, dict[int, int]]:
        """Per region, what it is known to have applied per origin (this region: exactly)."""
        known = {r: dict(v) for r, v in self._progress.items()}
        known[self.id] = dict(self.causal.applied)
        return known

    def stable_vector(self, regions: list[int], former: Sequence[int] = ()) -> dict[int, int]:
        """Per origin, the highest seq every region of `regions` is known to have applied:
        ops at or below it are causally stable (nothing still to come can be concurrent).
        `former`: regions that left the topology: no longer waited for, but their ops (and
        tombstones) are origins like any other."""
        known = self.progress()
        origins = sorted({*regions, *former})
        return {origin: min(known.get(r, {}).get(origin, 0) for r in regions) for origin in origins}

    def ack_effects(self) -> list[ops.AckEffect]:
        """The consecutive-XACK effects held back since the last call
        (docs/architecture.md, "Consecutive XACK").

        For each group acknowledged since (or whose cursors another region's effect raised),
        the frontier per origin is the highest delivered entry below which everything delivered
        is acknowledged; an effect is due when it moved past what this region last announced
        (`Group.region_acks`, learned from its own applied effects, so a replay agrees).
        """
        due: list[ops.AckEffect] = []
        for key, name in sorted(self._dirty_acks):
            ks = self.state.raw(key)
            group = None if ks is None else ks.groups.get(name)
            if ks is None or group is None:
                continue
            min_pending = group.min_pending_per_origin()
            frontier: list[tuple[int, StreamID]] = []
            origins = set(group.cursors) | set(ks.entries.origins())
            for origin in sorted(origins):
                cursor = group.cursor(origin)
                bound = min_pending.get(origin)
                if bound is None:
                    reached = cursor
                else:
                    below = ks.entries.last_at_or_below(origin, min(bound, cursor), strict=True)
                    reached = below if below is not None else MIN_ID
                if reached > group.announced(self.id, origin):
                    frontier.append((origin, reached))
            if frontier:
                due.append(ops.AckEffect(key, name, tuple(frontier)))
        self._dirty_acks.clear()
        return due

    def flush_acks(self, now_ms: int) -> list[ops.Op]:
        """Issue the held-back XACK effects as replicated ops."""
        return [self.issue(effect, now_ms) for effect in self.ack_effects()]

    def collect_tombstones(self, regions: list[int], former: Sequence[int] = ()) -> int:
        """Drop the DEL / XGROUP DESTROY tombstones every region of the topology (`regions`,
        this one included) has applied; returns how many went. Safe to call at any time: a
        region not heard from since it applied a tombstone keeps it alive. `former`: regions
        removed from the topology (no longer waited for; their own tombstones collected too)."""
        if self.id not in regions:
            raise ValueError(f"region {self.id} is not in the topology {regions}")
        return self.state.collect_tombstones(self.stable_vector(regions, former))
