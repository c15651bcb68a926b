"""The fold: decoded op-log records in, one region's state out. The one way records become
state: the node folds its logs through it at boot and after a reload and then keeps feeding it
the other regions' ops live; `streams replay`, `diff`, `history` and Spark fold through it too.

Pure (no Kafka): the readers feed it `(partition, offset, record)` in log order per partition.

Why not just `Region.receive` every record: a region's local ops (consumers, PEL, cursors) were
made on top of a precise set of replicated ops, which each local op carries as its `ctx` (the
region's applied vector when it was made). A replay that applied more replicated ops before a
local op than the live region had could put the local op on a different group (a group destroyed
and created again in between). So the fold *gates* replicated ops: while a local op L waits, an
op (o, s) with s > L.ctx[o] is held back; L is applied the moment the applied vector reaches its
ctx, which is then exactly L.ctx. Feed the region's `.local` records first (the readers do) so
the gates are known before the replicated ops arrive. `finish()` lifts the gates at the end of
the input (a local op whose ctx lies beyond a cut can never be applied; the ops behind it can).

Positions: `safe_positions()` is, per partition, the offset of the first record fed but not
applied (held by the causal buffer, a gate or a cut), else the next offset: a snapshot taken at
those positions plus a replay of the tail from them loses nothing and applies nothing twice.
A record may hold several ops (`streams.ops.pack`): the readers feed each under the record's
offset, and the record counts as applied once all of them are (the ones applied before are
duplicates when the tail is replayed, which the fold drops).

Transactions of other regions, whole: a writer's transaction may take several records of its
partition (its ops over `streams.ops.pack.PACK_BYTES`), and a mirror copies records one by one
(MirrorMaker 2 may also re-cut them into its own transactions, KAFKA-14021), so another region
may read the first records of a transaction before the rest exist on its cluster. Each pack says
where its transaction ends (`txn_last`, the seq of its last op); a reader feeds `txn_last` with
the ops of a record whose transaction goes on past it. The fold assembles such a transaction of
another origin until its last op arrived and offers it to the causal buffer as one unit
(`CausalBuffer.offer_unit`), which releases it whole: a MULTI/EXEC in r1 is seen in r2 entirely
or not at all. The region's own logs are read as written (Kafka's read_committed makes a
transaction visible whole at home).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from sortedcontainers import SortedDict

from streams.crdt import ops
from streams.crdt.region import Region
from streams.ids import IdMode

Partition = tuple[str, int]
Record = ops.Op | ops.LocalOp


class Applied(NamedTuple):
    """One record the fold applied, with where it was read (the first copy, if duplicated).
    A NamedTuple, not a frozen dataclass: one is made per record replayed, and a frozen
    dataclass's generated constructor (Python code even in the compiled core) set each field
    through object.__setattr__: 8 % of a node's full replay."""

    part: Partition
    offset: int
    record: Record
    order: int
    """0, 1, 2 ...: the order in which the fold applied records (`index` is tuple's)."""


Observer = Callable[[Applied], None]


class _Assembly:
    """The ops read so far of another origin's transaction that continues in later records."""

    __slots__ = ("end", "ops", "places")

    def __init__(self, end: int) -> None:
        self.end = end
        self.ops: dict[int, ops.Op] = {}
        self.places: dict[int, list[tuple[Partition, int]]] = {}


class Fold:
    """Folds one region's op-log records into a `Region`, gating on local ops' contexts."""

    def __init__(
        self,
        region: Region,
        *,
        positions: Mapping[Partition, int] | None = None,
        cut: Mapping[int, int] | None = None,
        observer: Observer | None = None,
    ) -> None:
        """`region`: a fresh Region or one read from a snapshot; `positions`: where its records
        were read up to (snapshot positions); `cut`: apply no op past these per-origin seqs
        (`--at`), and no local op whose ctx passes them."""
        self.region = region
        self.cut = dict(cut) if cut is not None else None
        self.observer = observer
        self.read: dict[Partition, int] = dict(positions or {})
        self.applied_count = 0
        self.beyond_cut = 0
        self._where: dict[tuple[int, int], list[tuple[Partition, int]]] = {}
        self._where_local: dict[int, list[tuple[Partition, int]]] = {}
        self._unapplied: dict[Partition, dict[int, int]] = {}
        """Per partition, offset -> ops fed from that record and not applied yet (a pack holds
        several ops under one offset)."""
        self._local: SortedDict = SortedDict()  # seq -> LocalOp
        self._gate: dict[int, int] | None = None  # the head local op's ctx, as a dict
        self._gated: dict[int, dict[int, ops.Op]] = {}
        self._open = False
        self._txns: dict[int, _Assembly] = {}
        """Per origin, its transaction being assembled (see the module docstring)."""
        self.torn = 0
        """Transactions whose end never arrived before a later op of their origin (a log that
        holds part of an aborted transaction: applied as read, counted here)."""

    @classmethod
    def fresh(cls, region_id: int, mode: IdMode = IdMode.STRICT, **kw: object) -> Fold:
        return cls(Region(region_id, mode), **kw)  # type: ignore[arg-type]

    # --- input --------------------------------------------------------------------------------

    def feed(self, part: Partition, offset: int, record: Record, txn_last: int = 0) -> None:
        """`txn_last`: the seq of the last op of the record's transaction, when it continues in
        later records of the partition (else 0)."""
        self.read[part] = max(self.read.get(part, 0), offset + 1)
        if isinstance(record, ops.Op):
            if record.origin != self.region.id and (txn_last or record.origin in self._txns):
                self._assemble(part, offset, record, txn_last)
            else:
                self._feed_op(part, offset, record)
        else:
            self._feed_local(part, offset, record)

    def skip(self, part: Partition, offset: int) -> None:
        """A record that was not fed (corrupt, skipped on request): only moves the position."""
        self.read[part] = max(self.read.get(part, 0), offset + 1)

    def finish(self) -> None:
        """End of input: lift the gates and apply what they held."""
        self._open = True
        self._release_gated()
        self._settle()

    # --- what the fold holds ------------------------------------------------------------------

    def safe_positions(self) -> dict[Partition, int]:
        out = dict(self.read)
        for part, offsets in self._unapplied.items():
            if offsets:
                out[part] = min(offsets)
        return out

    @property
    def assembling(self) -> int:
        """Ops of other regions' transactions read in part, waiting for the rest."""
        return sum(len(a.ops) for a in self._txns.values())

    @property
    def gated(self) -> int:
        return sum(len(g) for g in self._gated.values())

    @property
    def waiting_local(self) -> int:
        return len(self._local)

    def held(self) -> list[ops.Op]:
        """Replicated ops read but held back by a gate (diagnostics)."""
        return [op for o in sorted(self._gated) for _s, op in sorted(self._gated[o].items())]

    # --- internals ----------------------------------------------------------------------------

    def _track(self, part: Partition, offset: int) -> None:
        counts = self._unapplied.get(part)
        if counts is None:
            counts = self._unapplied[part] = {}
        counts[offset] = counts.get(offset, 0) + 1

    def _untrack(self, places: list[tuple[Partition, int]]) -> tuple[Partition, int]:
        for part, offset in places:
            counts = self._unapplied[part]
            left = counts[offset] - 1
            if left:
                counts[offset] = left
            else:
                del counts[offset]
        return places[0]

    def _beyond(self, origin: int, seq: int) -> bool:
        return self.cut is not None and seq > self.cut.get(origin, 0)

    def _feed_op(self, part: Partition, offset: int, op: ops.Op) -> None:
        dot = (op.origin, op.seq)
        if op.seq <= self.region.causal.applied.get(op.origin, 0):
            return  # a duplicate of an applied op (at-least-once mirroring)
        self._track(part, offset)
        places = self._where.get(dot)
        if places is not None:
            places.append((part, offset))  # a second copy of an op already waiting
            return
        self._where[dot] = [(part, offset)]
        if self._beyond(op.origin, op.seq):
            self.beyond_cut += 1
            return
        if self._allowed(op):
            self._offer(op)
            self._settle()
        else:
            self._gated.setdefault(op.origin, {})[op.seq] = op

    def _assemble(self, part: Partition, offset: int, op: ops.Op, txn_last: int) -> None:
        origin = op.origin
        if op.seq <= self.region.causal.applied.get(origin, 0):
            return  # a duplicate of an applied op
        asm = self._txns.get(origin)
        if asm is not None and op.seq > asm.end:  # its end never came (see `torn`)
            self.torn += 1
            self._feed_unit(self._txns.pop(origin))
            asm = None
        if asm is None:
            if txn_last <= op.seq:
                self._feed_op(part, offset, op)
                return
            asm = self._txns[origin] = _Assembly(txn_last)
        self._track(part, offset)
        places = asm.places.get(op.seq)
        if places is not None:
            places.append((part, offset))  # a second copy of an op being assembled
            return
        asm.ops[op.seq] = op
        asm.places[op.seq] = [(part, offset)]
        if op.seq >= asm.end:
            self._feed_unit(self._txns.pop(origin))

    def _feed_unit(self, asm: _Assembly) -> None:
        """Offer an assembled transaction as one unit (ops already tracked as unapplied)."""
        unit: list[ops.Op] = []
        for seq in sorted(asm.ops):
            op = asm.ops[seq]
            dot = (op.origin, seq)
            places = asm.places[seq]
            if seq <= self.region.causal.applied.get(op.origin, 0):
                self._untrack(places)  # applied meanwhile (an earlier copy)
                continue
            waiting = self._where.get(dot)
            if waiting is not None:  # a copy of it already waits in the causal buffer
                waiting.extend(places)
                continue
            self._where[dot] = places
            if self._beyond(op.origin, seq):
                self.beyond_cut += 1
                continue
            unit.append(op)
        if not unit:
            return
        consecutive = all(b.seq == a.seq + 1 for a, b in zip(unit, unit[1:], strict=False))
        if not consecutive or not self._allowed(unit[0]):
            for op in unit:  # gated (a replay of the own local ops holds them) or a mixed log
                if self._allowed(op):
                    self._offer(op)
                else:
                    self._gated.setdefault(op.origin, {})[op.seq] = op
            self._settle()
            return
        for ready in self.region.receive_unit(unit):
            part, offset = self._untrack(self._where.pop((ready.origin, ready.seq)))
            self._notify(part, offset, ready)
        self._settle()

    def _feed_local(self, part: Partition, offset: int, record: ops.LocalOp) -> None:
        if record.region != self.region.id or record.seq <= self.region.local_seq:
            return
        self._track(part, offset)
        places = self._where_local.get(record.seq)
        if places is not None:
            places.append((part, offset))
            return
        self._where_local[record.seq] = [(part, offset)]
        if self.cut is not None and any(self._beyond(r, s) for r, s in record.ctx):
            self.beyond_cut += 1
            return
        self._local[record.seq] = record
        self._gate = None
        self._settle()

    def _head(self) -> ops.LocalOp | None:
        if not self._local:
            return None
        head: ops.LocalOp = self._local.peekitem(0)[1]
        return head

    def _allowed(self, op: ops.Op) -> bool:
        if self._open or not self._local:
            return True
        if self._gate is None:
            self._gate = dict(self._local.peekitem(0)[1].ctx)
        return op.seq <= self._gate.get(op.origin, 0)

    def _offer(self, op: ops.Op) -> None:
        for ready in self.region.receive(op):
            part, offset = self._untrack(self._where.pop((ready.origin, ready.seq)))
            self._notify(part, offset, ready)

    def _notify(self, part: Partition, offset: int, record: Record) -> None:
        index = self.applied_count
        self.applied_count += 1
        if self.observer is not None:
            self.observer(Applied(part, offset, record, index))

    def _settle(self) -> None:
        while True:
            head = self._head()
            if head is None or not self.region.causal.covers(head.ctx):
                return
            del self._local[head.seq]
            self._gate = None
            self.region.apply_local(head)
            part, offset = self._untrack(self._where_local.pop(head.seq))
            self._notify(part, offset, head)
            self._release_gated()

    def _release_gated(self) -> None:
        progress = True
        while progress:
            progress = False
            for origin in sorted(self._gated):
                queue = self._gated[origin]
                for seq in sorted(queue):
                    op = queue[seq]
                    if not self._allowed(op):
                        break
                    del queue[seq]
                    self._offer(op)
                    progress = True
                if not queue:
                    del self._gated[origin]
