"""Causal delivery with duplicate drop (docs/architecture.md, "Replicated state").

An op `(o, s, ctx)` is applied only after `(o, s-1)` and everything its ctx names; until then it
waits here. An op at or below what has been applied from its origin is a duplicate and is dropped,
which is what makes at-least-once mirroring safe.

Units (`offer_unit`): the ops of one Kafka transaction of another region, which a mirror may
deliver in pieces (MirrorMaker 2 copies records one by one, or re-cuts transactions: KAFKA-14021).
The fold assembles them (`streams.crdt.fold`) and offers them here as one unit: a unit is released
whole, once its first op is next and every op of it is ready, so no reader ever sees part of a
MULTI/EXEC or of a group-commit batch.
"""

from __future__ import annotations

from collections.abc import Iterator

from streams.crdt.ops import Op, Vector


class CausalBuffer:
    """Holds ops that arrived early; releases them in a causal order."""

    __slots__ = ("applied", "_waiting", "_units")

    def __init__(self, applied: dict[int, int] | None = None) -> None:
        self.applied: dict[int, int] = dict(applied or {})
        self._waiting: dict[int, dict[int, Op]] = {}
        self._units: dict[int, dict[int, int]] = {}
        """Per origin, first seq -> last seq of each unit waiting (`offer_unit`)."""

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    def is_duplicate(self, op: Op) -> bool:
        return op.seq <= self.applied.get(op.origin, 0) or op.seq in self._waiting.get(
            op.origin, {}
        )

    def covers(self, ctx: Vector) -> bool:
        """Whether everything `ctx` names has been applied."""
        applied = self.applied
        return all(applied.get(region, 0) >= seq for region, seq in ctx)

    def offer(self, op: Op) -> list[Op]:
        """Take one op; return every op that became deliverable, in delivery order.

        The caller must apply the returned ops in order; `applied` is advanced as they are
        released.
        """
        if not self._waiting:  # the common case: in order, nothing held back
            at = self.applied.get(op.origin, 0)
            if op.seq <= at:
                return []
            if op.seq == at + 1 and self._ready(op):
                self.applied[op.origin] = op.seq
                return [op]
        if self.is_duplicate(op):
            return []
        self._waiting.setdefault(op.origin, {})[op.seq] = op
        return self._release()

    def offer_unit(self, unit: list[Op]) -> list[Op]:
        """Take the consecutive ops of one origin's transaction (seq order, none applied yet);
        return every op that became deliverable. The unit is released whole or not at all."""
        if len(unit) == 1:
            return self.offer(unit[0])
        origin, first, last = unit[0].origin, unit[0].seq, unit[-1].seq
        queue = self._waiting.setdefault(origin, {})
        for op in unit:
            queue[op.seq] = op
        self._units.setdefault(origin, {})[first] = last
        return self._release()

    def _release(self) -> list[Op]:
        released: list[Op] = []
        progress = True
        while progress:
            progress = False
            for origin in sorted(self._waiting):
                queue = self._waiting[origin]
                units = self._units.get(origin)
                nxt = queue.get(self.applied.get(origin, 0) + 1)
                while nxt is not None:
                    last = units.get(nxt.seq) if units else None
                    if last is None:
                        if not self._ready(nxt):
                            break
                        del queue[nxt.seq]
                        self.applied[origin] = nxt.seq
                        released.append(nxt)
                    else:
                        members = [queue[s] for s in range(nxt.seq, last + 1)]
                        if not all(self._ready(m) for m in members):
                            break
                        assert units is not None
                        del units[nxt.seq]
                        for m in members:
                            del queue[m.seq]
                        self.applied[origin] = last
                        released.extend(members)
                    progress = True
                    nxt = queue.get(self.applied[origin] + 1)
                if not queue:
                    del self._waiting[origin]
                    self._units.pop(origin, None)
        return released

    def _ready(self, op: Op) -> bool:
        return all(
            self.applied.get(region, 0) >= seq for region, seq in op.ctx if region != op.origin
        )

    def held(self) -> Iterator[Op]:
        """Every op waiting here (read-only: the node's metrics tell how far behind it is)."""
        for queue in self._waiting.values():
            yield from queue.values()

    def missing(self) -> dict[int, int]:
        """For each origin with held ops: the seq that is awaited next (for diagnostics)."""
        return {o: self.applied.get(o, 0) + 1 for o in self._waiting}
