"""The per-key causal fold: one key's ops -> that key's state, with the node's own code.

Why per key: every op names one key and applying it touches only that key, so the keyspace folds
in parallel, one Spark group per key, and the union of the per-key states is the region's state.

Why this order: ops must be applied in an order consistent with causality. For an op with dot
(o, s) and context ctx, its full vector is V = ctx with V[o] = s. If a happened before b then
V(a) <= V(b) componentwise and V(a) != V(b), so sum(V(a)) < sum(V(b)): sorting by
(sum(V), origin, seq) is a linear extension of the causal order, computed from each op alone.
A region-local record made when the region had applied the vector C goes right after every
replicated op covered by C: ranks are 2 * sum(V) for replicated ops and 2 * sum(C) + 1 for local
records (ties of local records broken by their local seq, which grows with C).

Why `Region.receive` still works on one key's ops: its causal buffer waits for (o, s-1) and for
everything in ctx, most of which are ops of other keys that this group never sees. Before each op
the buffer is told that everything the op observed is applied (as far as this key is concerned,
it is: the key's own earlier ops came first in the order above). Duplicates (the same dot read
twice, e.g. at-least-once mirroring) are still dropped by the buffer.
"""

from __future__ import annotations

from collections.abc import Iterable

from streams.crdt.ops import LocalOp, Op
from streams.crdt.region import Region
from streams.crdt.state import KeyState, State
from streams.ids import IdMode

Rank = tuple[int, int, int, int]


def causal_rank(record: Op | LocalOp) -> Rank:
    """A sort key whose order is consistent with causality (see the module docstring)."""
    if isinstance(record, Op):
        total = record.seq + sum(s for r, s in record.ctx if r != record.origin)
        return (2 * total, 0, record.origin, record.seq)
    return (2 * sum(s for _r, s in record.ctx) + 1, 1, record.region, record.seq)


def fold_key(
    records: Iterable[Op | LocalOp], region_id: int = 0, mode: IdMode = IdMode.STRICT
) -> Region:
    """Fold one key's records (any order; replicated ops of every origin plus, optionally, the
    local records of one region, the caller's choice) into a fresh Region and return it."""
    region = Region(region_id, mode)
    fold_into(region, records)
    return region


def fold_into(region: Region, records: Iterable[Op | LocalOp]) -> int:
    """Fold records into `region` in causal order; returns how many were applied."""
    applied = region.causal.applied
    count = 0
    for record in sorted(records, key=causal_rank):
        if isinstance(record, Op):
            for r, s in record.ctx:
                if r != record.origin and applied.get(r, 0) < s:
                    applied[r] = s
            if applied.get(record.origin, 0) < record.seq - 1:
                applied[record.origin] = record.seq - 1
            count += len(region.receive(record))
        elif record.seq > region.local_seq:  # as the node: a local record read twice is skipped
            region.apply_local(record)
            count += 1
    return count


def key_state(region: Region, key: bytes) -> KeyState | None:
    return region.state.raw(key)


def state_of(pairs: Iterable[tuple[bytes, KeyState]]) -> State:
    """A State assembled from per-key states (the union of the groups' folds)."""
    state = State()
    for key, ks in pairs:
        state.keys[key] = ks
    return state


def key_digest(key: bytes, ks: KeyState) -> str:
    """The digest of a state holding only this key (State.digest's rules, per key)."""
    return state_of([(key, ks)]).digest()
