"""What one op changed in one key: the effects `streams history KEY` lists, and `KeyWatch`, the
Region that records them as the fold applies ops.

Why a Region subclass: the fold's observer (`fold.Applied`) gives the apply order and where each
record was read, but it is called after `Region.receive` has applied every op the causal buffer
released, so "before" is gone by then. `KeyWatch` applies the released ops one by one and, for
ops on the watched key only, looks at the key just before and just after: the entries an XDEL /
XTRIM / DEL removed (and the ones it kept because it had not observed them), whether a group
create took effect or a tombstone beat it, what a local op did to the PEL and the consumers. Ops
on other keys cost nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streams.crdt import ops
from streams.crdt.groups import Group, pel_ref
from streams.crdt.region import Region
from streams.crdt.state import KeyState
from streams.ids import MAX_ID, MIN_ID, IdMode, StreamID
from streams.replay.describe import sid, text

EntryKey = tuple[StreamID, int]
"""(id, origin): one entry, even when another origin holds the same ID."""


# --- looking at the key before and after one op -------------------------------------------------


def _entries(ks: KeyState | None) -> dict[EntryKey, ops.Fields]:
    if ks is None:
        return {}
    return {(s, o): f for s, o, f in ks.entries.range(MIN_ID, MAX_ID)}


def _entry(e: EntryKey) -> dict[str, Any]:
    return {"id": sid(e[0]), "origin": e[1]}


def entry_text(e: dict[str, Any]) -> str:
    return f"{e['id']} (r{e['origin']})"


@dataclass
class GroupLook:
    """What a local op may change in a group: PEL owners, consumers, the delivery position."""

    pel: dict[tuple[int, int, int], tuple[bytes, int]]
    consumers: set[bytes]
    last_delivered: StreamID

    @classmethod
    def of(cls, group: Group | None) -> GroupLook | None:
        if group is None:
            return None
        return cls(
            {k: (p.consumer, p.delivery_count) for k, p in group.pel.items()},
            set(group.consumers),
            group.last_delivered(),
        )


def _pel_entry(key: tuple[int, int, int], consumer: bytes | None = None) -> dict[str, Any]:
    origin, s = pel_ref(key)
    out: dict[str, Any] = {"id": sid(s), "origin": origin}
    if consumer is not None:
        out["consumer"] = text(consumer)
    return out


def _dot(d: tuple[int, int]) -> str:
    return f"{d[0]}:{d[1]}"


def replicated_effect(
    op: ops.Op, before: KeyState | None, after: KeyState | None, snap: dict[str, Any]
) -> dict[str, Any]:
    """What `op` changed in its key (`snap` holds what was captured before it was applied)."""
    body = op.body
    effect: dict[str, Any] = {}
    if isinstance(body, ops.XAdd):
        effect["added"] = {**_entry((body.id, op.origin)), "fields": [text(f) for f in body.fields]}
        holders = after.entries.origins_with(body.id) if after else []
        others = [o for o in holders if o != op.origin]
        if others:
            effect["same_id_in"] = others  # liberal / semi-strict duplicates
    elif isinstance(body, ops.XDel):
        removed = [
            e
            for e in snap["named"]
            if after is None or e[1] not in after.entries.origins_with(e[0])
        ]
        effect["removed"] = [_entry(e) for e in removed]
        kept = [e for e in snap["named"] if e not in removed]
        effect["kept_unobserved"] = [_entry(e) for e in kept]
        gone = {e[0] for e in snap["named"]}
        effect["not_present"] = [sid(s) for s in body.ids if s not in gone]
    elif isinstance(body, ops.XTrim | ops.Del):
        now = _entries(after)
        was: dict[EntryKey, ops.Fields] = snap["entries"]
        effect["removed"] = [_entry(e) for e in sorted(was) if e not in now]
        if isinstance(body, ops.Del):
            # A DEL removes every entry it observed: what is left, it had not.
            effect["kept_unobserved"] = [_entry(e) for e in sorted(now) if e in was]
            effect["groups_destroyed"] = [text(g) for g in sorted(snap["groups"])]
        else:
            limits = dict(body.thresholds)
            effect["kept_unobserved"] = [
                _entry(e)
                for e in sorted(now)
                if e[1] in limits and e[0] <= limits[e[1]] and e in was
            ]
    elif isinstance(body, ops.XSetId):
        ks = after
        effect["last_id"] = [snap["last_id"], sid(ks.last_id) if ks else None]
        if ks is not None:
            effect["entries_added"] = ks.entries_added
            effect["max_deleted_id"] = sid(ks.max_deleted_id)
    elif isinstance(body, ops.GroupCreate):
        existed = snap["group"]
        exists = after is not None and body.group in after.groups
        covered = op.observed()
        beaten_by = [d for d in snap["tombstones"] if covered.get(d[0], 0) < d[1]]
        if beaten_by:
            effect["result"] = "beaten"
            effect["beaten_by"] = [_dot(d) for d in beaten_by]
        elif existed:
            effect["result"] = "merged"
        elif exists:
            effect["result"] = "created"
        else:
            effect["result"] = "no effect"
    elif isinstance(body, ops.GroupDestroy):
        effect["result"] = "destroyed" if snap["group"] else "no such group here"
        effect["tombstone"] = _dot((op.origin, op.seq))
    elif isinstance(body, ops.AckEffect):
        look: GroupLook | None = snap["look"]
        if look is None:
            effect["result"] = "no such group here"
        else:
            group = after.groups.get(body.group) if after else None
            now_at = group.last_delivered() if group else None
            effect["result"] = "applied"
            effect["frontier"] = {str(o): sid(f) for o, f in body.frontier}
            effect["last_delivered"] = [sid(look.last_delivered), sid(now_at) if now_at else None]
    return effect


def local_effect(
    record: ops.LocalOp, look: GroupLook | None, after_group: Group | None
) -> dict[str, Any]:
    """What a local op did to its group: delivered, acked, claimed, dropped, consumers."""
    body = record.body
    if look is None or after_group is None:
        return {"result": "no such group here (destroyed, maybe concurrently): no effect"}
    now = GroupLook.of(after_group)
    assert now is not None
    effect: dict[str, Any] = {"result": "applied"}
    if isinstance(body, ops.Deliver):
        effect["delivered"] = [
            {"id": sid(s), "origin": o, "consumer": text(body.consumer)} for o, s in body.entries
        ]
        if body.noack:
            effect["noack"] = True
    if isinstance(body, ops.TouchConsumer) and body.redelivered:
        effect["redelivered"] = [{"id": sid(s), "origin": o} for o, s in body.redelivered]
    removed = [k for k in look.pel if k not in now.pel]
    if isinstance(body, ops.Ack):
        effect["acked"] = [_pel_entry(k) for k in removed]
        acked = {(k[0], k[1]) for k in removed}
        effect["not_pending"] = [sid(s) for s in body.ids if s not in acked]
    elif removed:
        effect["dropped"] = [_pel_entry(k, look.pel[k][0]) for k in removed]
    if isinstance(body, ops.Claim):
        effect["claimed"] = [
            {**_pel_entry(k, c), "from": text(look.pel[k][0]) if k in look.pel else None}
            for k, (c, _n) in now.pel.items()
            if k not in look.pel or look.pel[k] != now.pel[k]
        ]
    created = sorted(now.consumers - look.consumers)
    deleted = sorted(look.consumers - now.consumers)
    if created:
        effect["consumers_created"] = [text(c) for c in created]
    if deleted:
        effect["consumers_deleted"] = [text(c) for c in deleted]
    if now.last_delivered != look.last_delivered:
        effect["last_delivered"] = [sid(look.last_delivered), sid(now.last_delivered)]
    return effect


class KeyWatch(Region):
    """A Region that records what each op on one key changed, keyed by the op's dot."""

    __slots__ = ("key", "effects")

    def __init__(self, region_id: int, mode: IdMode = IdMode.STRICT, *, key: bytes) -> None:
        super().__init__(region_id, mode)
        self.key = key
        self.effects: dict[tuple[str, int, int], dict[str, Any]] = {}

    def receive(self, op: ops.Op) -> list[ops.Op]:
        released = self.causal.offer(op)
        for ready in released:
            if ready.body.key != self.key:
                self.state.apply(ready)
                continue
            snap = self._before(ready)
            before = self.state.raw(self.key)
            self.state.apply(ready)
            after = self.state.get(self.key)
            self.effects[("op", ready.origin, ready.seq)] = replicated_effect(
                ready, before, after, snap
            )
        return released

    def apply_local(self, record: ops.LocalOp) -> None:
        if record.body.key != self.key:
            super().apply_local(record)
            return
        look = GroupLook.of(self.state.group(self.key, record.body.group))
        super().apply_local(record)
        after = self.state.group(self.key, record.body.group)
        self.effects[("local", record.region, record.seq)] = local_effect(record, look, after)

    def _before(self, op: ops.Op) -> dict[str, Any]:
        ks = self.state.raw(self.key)
        body = op.body
        snap: dict[str, Any] = {}
        if isinstance(body, ops.XDel):
            snap["named"] = [
                (s, o) for s in body.ids for o in (ks.entries.origins_with(s) if ks else [])
            ]
        elif isinstance(body, ops.XTrim | ops.Del):
            snap["entries"] = _entries(ks)
            snap["groups"] = set(ks.groups) if ks else set()
        elif isinstance(body, ops.XSetId):
            snap["last_id"] = sid(ks.last_id) if ks else None
        elif isinstance(body, ops.GroupCreate | ops.GroupDestroy):
            snap["group"] = ks is not None and body.group in ks.groups
            snap["tombstones"] = (
                [] if ks is None else [*ks.del_tombstones, *ks.group_tombstones.get(body.group, [])]
            )
        elif isinstance(body, ops.AckEffect):
            snap["look"] = GroupLook.of(ks.groups.get(body.group) if ks else None)
        return snap
