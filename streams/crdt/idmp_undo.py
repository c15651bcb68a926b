"""The undo record of an IDMP op (`ops.Idmp`, `ops.IdmpDuplicate`), for the node's undo journal
(`streams.node.runtime.undo`): an IDMP XADD is a common write, so it must not cost a copy of its
whole key per batch as the rarer ops do. It keeps the key's IDMP state as it was (records, window,
counters: at most the window's records per producer) and the entries the record may remove (the
loser of two concurrent records of one IID), and puts both back.
"""

from __future__ import annotations

from streams.crdt import ops
from streams.crdt.idmp import IdmpState
from streams.crdt.ops import Fields
from streams.crdt.state import State
from streams.ids import MIN_ID, StreamID


class IdmpUndo:
    __slots__ = ("key", "saved", "entries", "max_deleted_id")

    def __init__(self, state: State, op: ops.Op, body: ops.Idmp | ops.IdmpDuplicate) -> None:
        self.key = body.key
        ks = state.keys.get(body.key)
        self.saved: IdmpState | None = None if ks is None or ks.idmp is None else ks.idmp.copy()
        self.entries: list[tuple[int, int, StreamID, Fields]] = []
        self.max_deleted_id = MIN_ID if ks is None else ks.max_deleted_id
        if ks is None or not isinstance(body, ops.Idmp):
            return
        named = [(body.origin, body.id)]
        if self.saved is not None:
            producer = self.saved.producers.get(body.pid)
            records = () if producer is None else producer.records.get(body.iid, ())
            named += [(record.origin, record.id) for record in records]
        for origin, sid in named:
            log = ks.entries.logs.get(origin)
            if log is not None:
                self.entries += [(origin, dot, s, f) for s, dot, f in log.entries(sid, sid)]

    def undo(self, state: State) -> None:
        ks = state.keys.get(self.key)
        if ks is None:
            return
        ks.idmp = self.saved
        for origin, dot, sid, fields in self.entries:
            if ks.entries.get(origin, sid) is None:
                ks.entries.add(origin, dot, sid, fields)
        ks.max_deleted_id = self.max_deleted_id

    def undo_private(self, state: State) -> None:
        """`undo` on a view's private copies: the saved state is copied again, as the view may
        change what it puts back."""
        saved = self.saved
        self.saved = None if saved is None else saved.copy()
        try:
            self.undo(state)
        finally:
            self.saved = saved
