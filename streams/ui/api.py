"""The JSON the `streams ui` page draws, built from what replay already computed.

Nothing here reads a log or applies an op: a key's ops, their apply order and their effects come
from `streams.replay.history` (the fold and `KeyWatch` of `streams history`), a key's state at a
point from `streams.replay.run.replay` with `--at` (what `streams replay --at` prints), and the
first diverging op from `streams.replay.diff`. These functions only shape those results for the
page (and for scripts: `/api/...` answers the same JSON), so the picture cannot disagree with
the text verbs.

An op is named on the page as `<origin>:<shard>:<seq>` (its dot, with the shard its seq
numbers in), a local op as `local <region>:<shard>:<seq>`: the `data-op` hook of the drawing.
"""

from __future__ import annotations

from typing import Any

from streams.crdt import ops
from streams.crdt.fold import Record
from streams.crdt.state import KeyState
from streams.replay.describe import SCHEMA_VERSION, key_view, text
from streams.replay.diff import Report
from streams.replay.history import History, Step, step_view
from streams.replay.positions import at_text, vector_text

PAGE = 200
"""Ops drawn per page: a history of 10,000 ops is paged, never drawn at once."""
MAX_PAGE = 2000


def op_id(record: Record, shard: int) -> str:
    """The `data-op` of a record: `origin:shard:seq`, or `local region:shard:seq`."""
    if isinstance(record, ops.Op):
        return f"{record.origin}:{shard}:{record.seq}"
    return f"local {record.region}:{shard}:{record.seq}"


def _origin(record: Record) -> int:
    return record.origin if isinstance(record, ops.Op) else record.region


def _shard(h: History) -> int:
    return next(iter(h.result.folds))


def lanes(h: History, regions: list[str] | None = None) -> list[dict[str, Any]]:
    """One lane per region: every region the logs (or the topology file) name, in id order,
    and any origin an op comes from that neither names."""
    names = dict(h.result.names)
    for step in [*h.steps, *h.unapplied]:
        origin = _origin(step.record)
        names.setdefault(origin, f"r{origin}")
    ids = {name: rid for rid, name in names.items()}
    for name in regions or []:
        if name not in ids:
            names[-len(names) - 1] = name  # a region of the file whose logs are not here yet
    return [{"id": rid, "region": name} for rid, name in sorted(names.items(), key=_lane_order)]


def _lane_order(item: tuple[int, str]) -> tuple[int, int]:
    rid, _name = item
    return (1 if rid < 0 else 0, abs(rid))


def _seen(h: History) -> dict[str, list[str]]:
    """For each op, the ops on this key its causal context says it had seen from each other
    region: the newest one per region (it implies the older ones), as `data-op` names."""
    shard = _shard(h)
    by_origin: dict[int, list[int]] = {}
    for step in [*h.steps, *h.unapplied]:
        record = step.record
        if isinstance(record, ops.Op):
            by_origin.setdefault(record.origin, []).append(record.seq)
    for seqs in by_origin.values():
        seqs.sort()
    out: dict[str, list[str]] = {}
    for step in [*h.steps, *h.unapplied]:
        record = step.record
        own = _origin(record)
        targets = []
        for origin, seq in record.ctx:
            if origin == own:
                continue
            newest = _newest_at_most(by_origin.get(origin, []), seq)
            if newest is not None:
                targets.append(f"{origin}:{shard}:{newest}")
        out[op_id(record, shard)] = targets
    return out


def _newest_at_most(seqs: list[int], limit: int) -> int | None:
    """The largest of the sorted `seqs` not above `limit` (bisection: pages of long histories
    compute this for every op)."""
    lo, hi = 0, len(seqs)
    while lo < hi:
        mid = (lo + hi) // 2
        if seqs[mid] <= limit:
            lo = mid + 1
        else:
            hi = mid
    return seqs[lo - 1] if lo else None


def step_json(step: Step, h: History, seen: dict[str, list[str]]) -> dict[str, Any]:
    """One op as the page draws it: `streams history --json`'s line, with its `data-op` and
    origin region, the ops it had seen, and the position that shows the state just after it."""
    result = h.result
    shard = _shard(h)
    view = step_view(step, h)
    record = step.record
    origin = _origin(record)
    ident = op_id(record, shard)
    view["id"] = ident
    view["origin"] = origin
    view["region"] = result.names.get(origin, f"r{origin}")
    view["seen"] = seen.get(ident, [])
    if step.index is not None:
        view["at"] = at_text({shard: step.vector}, result.names, result.shards)
        view["vector"] = {result.names.get(o, f"r{o}"): s for o, s in sorted(step.vector.items())}
    if isinstance(record, ops.Op):
        view["observed"] = {
            result.names.get(o, f"r{o}"): s for o, s in sorted(record.observed().items()) if s
        }
    view.pop("v", None)
    return view


def history_page(
    h: History, offset: int = 0, limit: int = PAGE, regions: list[str] | None = None
) -> dict[str, Any]:
    """One page of a key's history: `limit` ops from `offset` of the apply order (applied ones
    first, then the ones read but not applied, as `streams history` lists them)."""
    limit = max(1, min(limit, MAX_PAGE))
    offset = max(0, offset)
    every = [*h.steps, *h.unapplied]
    seen = _seen(h)
    result = h.result
    page = [step_json(step, h, seen) for step in every[offset : offset + limit]]
    return {
        "v": SCHEMA_VERSION,
        "type": "history_page",
        "key": text(h.key),
        "region": result.region_name,
        "region_id": result.region_id,
        "shard": _shard(h),
        "shards": result.shards,
        "at": result.at(),
        "vector": result.vector_named(),
        "lanes": lanes(h, regions),
        "applied": len(h.steps),
        "not_applied": len(h.unapplied),
        "total": len(every),
        "offset": offset,
        "limit": limit,
        "ops": page,
        "message": None if every else f"no op in these logs touched key {text(h.key)}",
    }


def state_json(
    h: History, index: int, ks: KeyState | None, at: str, names: dict[int, str]
) -> dict[str, Any]:
    """The key at the position just after the op applied `index`-th (`ks`: what `replay --at`
    folded there), and what each region had applied then: the replayed region exactly; another
    region at least what its newest op applied here by then had observed (its causal context:
    the logs tell no more of a region's progress)."""
    region = h.result.region_name
    step = next((s for s in h.steps if s.index == index), None)
    vectors: dict[str, dict[str, Any]] = {}
    if step is not None:
        vectors[region] = {
            "vector": {names.get(o, f"r{o}"): s for o, s in sorted(step.vector.items())},
            "exact": True,
            "why": f"{region} replayed to this point",
        }
        newest: dict[int, ops.Op] = {}
        for s in h.steps:
            if s.index is not None and s.index <= index and isinstance(s.record, ops.Op):
                if s.record.origin != h.result.region_id:
                    newest[s.record.origin] = s.record
        for origin, op in sorted(newest.items()):
            name = names.get(origin, f"r{origin}")
            vectors[name] = {
                "vector": {names.get(o, f"r{o}"): n for o, n in sorted(op.observed().items()) if n},
                "exact": False,
                "why": f"at least what {name} had applied when it wrote {origin}:{op.seq} "
                f"({vector_text(dict(op.ctx), names) or 'nothing else'} in its causal context)",
            }
    view: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": "state",
        "key": text(h.key),
        "region": region,
        "index": index,
        "at": at,
        "command": f"streams replay --at {at} --key {text(h.key)}",
        "exists": ks is not None and ks.exists,
        "state": key_view(h.key, ks) if ks is not None and ks.exists else None,
        "vectors": vectors,
    }
    if step is None:
        view["message"] = f"no op of key {text(h.key)} was applied {index}-th"
    return view


def diff_json(
    key: bytes, region: str, other: str, report: Report, names: dict[int, str], shard: int
) -> dict[str, Any]:
    """What `streams diff` says of `key` between the replayed region (side a) and `other`: the
    first diverging op of a convergence bug, and the ops one side has not applied yet."""
    out: dict[str, Any] = {
        "region": other,
        "shared": vector_text(report.shared, names),
        "diverged": None,
        "missing_in": {},
    }
    for bug in report.bugs:
        if bug.key == key:
            out["diverged"] = {
                "op": None if bug.op is None else op_id(bug.op, shard),
                "index": bug.index,
                "text": "differs from the start"
                if bug.op is None
                else f"first diverging op {names.get(bug.op.origin, bug.op.origin)}:{bug.op.seq}",
            }
    for lag in report.lagging:
        if lag.key != key:
            continue
        behind = region if lag.side == "a" else other
        out["missing_in"].setdefault(behind, []).extend(
            {"op": op_id(op, shard), "held": held}
            for held, group in ((False, lag.missing), (True, lag.held))
            for op in group
        )
    return out


def keys_json(counts: dict[bytes, int], present: dict[bytes, KeyState]) -> list[dict[str, Any]]:
    """Every key an op touched, with how many records touched it and whether it exists now."""
    rows = []
    for key in sorted(counts):
        ks = present.get(key)
        exists = ks is not None and ks.exists
        rows.append(
            {
                "key": text(key),
                "ops": counts[key],
                "exists": exists,
                "length": ks.entries.length if ks is not None and exists else 0,
                "groups": len(ks.groups) if ks is not None and exists else 0,
            }
        )
    return rows
