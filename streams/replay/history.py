"""`streams history KEY`: every op that touched one key, in the order the region applied them,
each with its position and what it changed.

A key lives in one shard, and a shard never depends on another, so history replays only the
key's shard (`streams.slots.shard_of`), watching the key with `KeyWatch`
(`streams.replay.keywatch`: what each op changed). Ops read but never applied (waiting for a
causal dependency at the end of the logs, or past the requested position) are listed after the
applied ones, with what they wait for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streams.crdt import ops
from streams.crdt.fold import Applied, Partition, Record
from streams.crdt.region import Region
from streams.ids import IdMode
from streams.replay.describe import SCHEMA_VERSION, place, record_view, text
from streams.replay.keywatch import KeyWatch, entry_text
from streams.replay.replayed import Replayed
from streams.replay.run import Request, replay

# --- the listing --------------------------------------------------------------------------------


def _ident(record: Record) -> tuple[str, int, int]:
    if isinstance(record, ops.Op):
        return ("op", record.origin, record.seq)
    return ("local", record.region, record.seq)


@dataclass
class Step:
    """One op on the key: where it was read, its apply index (None: not applied), its effect."""

    part: Partition
    offset: int
    record: Record
    index: int | None
    effect: dict[str, Any]
    vector: dict[int, int] = field(default_factory=dict)
    """The shard's applied vector just after this op (empty: not applied): the position
    `--at` takes back to show the state then (`streams ui` does, on a click)."""


@dataclass
class History:
    key: bytes
    result: Replayed
    steps: list[Step] = field(default_factory=list)
    unapplied: list[Step] = field(default_factory=list)


def history(req: Request, key: bytes) -> History:
    """Replay `req`'s region from the start, watching `key`."""
    applied: list[tuple[Applied, dict[int, int]]] = []
    read: dict[tuple[str, int, int], tuple[Partition, int, Record]] = {}
    running: dict[int, int] = {}  # every op applied so far, on any key: the vector after each

    def observe(x: Applied) -> None:
        record = x.record
        if isinstance(record, ops.Op):
            running[record.origin] = max(running.get(record.origin, 0), record.seq)
        if record.body.key == key:
            applied.append((x, dict(running)))

    def listen(part: Partition, offset: int, record: Record) -> None:
        if record.body.key == key:
            read.setdefault(_ident(record), (part, offset, record))

    watch: list[KeyWatch] = []

    def make(region_id: int, mode: IdMode) -> Region:
        region = KeyWatch(region_id, mode, key=key)
        watch.append(region)
        return region

    req.observer, req.listen, req.make_region, req.key = observe, listen, make, key
    result = replay(req)
    effects = watch[0].effects
    out = History(key, result)
    done: set[tuple[str, int, int]] = set()
    for x, vector in applied:
        ident = _ident(x.record)
        done.add(ident)
        effect = effects.get(ident, {})
        out.steps.append(Step(x.part, x.offset, x.record, x.order, effect, vector))
    region = result.region
    for ident, (part, offset, record) in read.items():
        if ident in done:
            continue
        if isinstance(record, ops.LocalOp) and record.region != region.id:
            continue  # another region's local log: never folded here
        out.unapplied.append(Step(part, offset, record, None, _why_not(record, result)))
    return out


def _why_not(record: Record, result: Replayed) -> dict[str, Any]:
    """Why a record that was read is not applied: past the cut, or what it still waits for."""
    applied = result.region.vector
    cut = result.fold.cut
    names = result.names

    def name(d: tuple[int, int]) -> str:
        return f"{names.get(d[0], f'r{d[0]}')}:{d[1]}"

    if isinstance(record, ops.Op):
        if cut is not None and record.seq > cut.get(record.origin, 0):
            return {"result": "not applied: past the requested position"}
        needs = [(record.origin, applied.get(record.origin, 0) + 1)]
        if needs[0][1] == record.seq:
            needs = []
        needs += [(r, s) for r, s in record.ctx if applied.get(r, 0) < s]
    else:
        if cut is not None and any(s > cut.get(r, 0) for r, s in record.ctx):
            return {"result": "not applied: made after the requested position"}
        needs = [(r, s) for r, s in record.ctx if applied.get(r, 0) < s]
    return {
        "result": "not applied: waiting for a causal dependency",
        "waits_for": [name(d) for d in needs],
    }


def step_view(step: Step, h: History) -> dict[str, Any]:
    view = record_view(step.part[0], step.part[1], step.offset, None, step.record)
    del view["time_ms"]
    view["type"] = "history"
    view["applied"] = step.index is not None
    view["index"] = step.index
    view["effect"] = step.effect
    view["change"] = change_text(step.record, step.effect)
    return view


def _list(items: list[dict[str, Any]], limit: int = 8) -> str:
    shown = ", ".join(entry_text(e) if "origin" in e else str(e) for e in items[:limit])
    return shown + (f" ... (+{len(items) - limit})" if len(items) > limit else "")


def change_text(record: Record, effect: dict[str, Any]) -> str:
    """One line: what the op changed, for humans."""
    body = record.body
    result = str(effect.get("result", ""))
    if result.startswith("not applied"):
        waits = effect.get("waits_for")
        return result + (f" ({', '.join(waits)})" if waits else "")
    parts: list[str] = []
    if isinstance(body, ops.XAdd):
        added = effect["added"]
        parts.append(f"added {entry_text(added)} {' '.join(added['fields'])}")
        if effect.get("same_id_in"):
            parts.append(f"same ID also held by {', '.join(f'r{o}' for o in effect['same_id_in'])}")
    elif isinstance(body, ops.XDel | ops.XTrim | ops.Del):
        removed = effect["removed"]
        parts.append(
            f"removed {len(removed)} entr{'y' if len(removed) == 1 else 'ies'}"
            + (f": {_list(removed)}" if removed else "")
        )
        kept = effect.get("kept_unobserved") or []
        if kept:
            parts.append(f"kept {len(kept)} it had not observed (concurrent): {_list(kept)}")
        if effect.get("not_present"):
            parts.append(f"not present: {', '.join(effect['not_present'])}")
        if effect.get("groups_destroyed"):
            parts.append(f"destroyed group(s) {', '.join(effect['groups_destroyed'])}")
    elif isinstance(body, ops.XSetId):
        was, now = effect["last_id"]
        parts.append(f"last-id {was} -> {now}")
    elif isinstance(body, ops.GroupCreate):
        group = text(body.group)
        if result == "beaten":
            parts.append(
                f"group {group} NOT created: beaten by tombstone(s) "
                f"{', '.join(effect['beaten_by'])} its context had not observed "
                "(delete wins)"
            )
        elif result == "merged":
            parts.append(f"group {group} already existed: merged (concurrent creates)")
        else:
            parts.append(f"group {group} {result}")
    elif isinstance(body, ops.GroupDestroy):
        parts.append(f"group {text(body.group)} {result}; tombstone {effect['tombstone']}")
    elif isinstance(body, ops.AckEffect):
        if result == "applied":
            was, now = effect["last_delivered"]
            frontier = ",".join(f"r{o}<={s}" for o, s in effect["frontier"].items())
            parts.append(
                f"acked up to {frontier} in group {text(body.group)}"
                + (f"; last-delivered {was} -> {now}" if was != now else "")
            )
        else:
            parts.append(f"group {text(body.group)}: {result}")
    else:
        parts += _local_text(body, effect)
    return "; ".join(parts) or "(no change)"


def _local_text(body: ops.Body, effect: dict[str, Any]) -> list[str]:
    if effect.get("result") != "applied":
        return [str(effect.get("result"))]
    parts: list[str] = []
    if effect.get("delivered"):
        d = effect["delivered"]
        parts.append(
            f"delivered {_list(d)} to {d[0]['consumer']}"
            + (" (NOACK)" if effect.get("noack") else "")
        )
    if effect.get("redelivered"):
        parts.append(f"delivered again {_list(effect['redelivered'])}")
    if "acked" in effect:
        parts.append(f"acked {_list(effect['acked'])}" if effect["acked"] else "acked nothing")
        if effect.get("not_pending"):
            parts.append(f"not pending: {', '.join(effect['not_pending'])}")
    if effect.get("claimed"):
        parts.append(
            "claimed "
            + ", ".join(
                f"{entry_text(c)} -> {c['consumer']}"
                + (f" (from {c['from']})" if c["from"] else "")
                for c in effect["claimed"][:8]
            )
        )
    if effect.get("dropped"):
        parts.append(f"dropped from the PEL {_list(effect['dropped'])}")
    if effect.get("consumers_created"):
        parts.append(f"consumer(s) created {', '.join(effect['consumers_created'])}")
    if effect.get("consumers_deleted"):
        parts.append(f"consumer(s) deleted {', '.join(effect['consumers_deleted'])}")
    if effect.get("last_delivered"):
        was, now = effect["last_delivered"]
        parts.append(f"last-delivered {was} -> {now}")
    if isinstance(body, ops.TouchConsumer) and not parts:
        parts.append("consumer seen")
    return parts


def step_line(view: dict[str, Any], names: dict[int, str], shards: int = 1) -> str:
    ctx = ",".join(f"{names.get(int(r), 'r' + r)}={s}" for r, s in view["ctx"].items()) or "-"
    where = place(view["topic"], view["partition"], view["offset"], shards)
    index = f"#{view['index']}" if view["index"] is not None else "-"
    group = view["args"].get("group")
    op = view["op"] + (f" {group}" if group is not None else "")
    return (
        f"{index:>6} {where:<14} {view['dot']:<11} ctx[{ctx}] {_when(view['op_ts_ms'])} "
        f"{op}: {view['change']}"
    )


def _when(ms: int) -> str:
    """Origin time as ISO 8601 UTC with milliseconds (what `--time` takes)."""
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def summary_view(h: History) -> dict[str, Any]:
    result = h.result
    return {
        "v": SCHEMA_VERSION,
        "type": "summary",
        "key": text(h.key),
        "region": result.region_name,
        "region_id": result.region.id,
        "vector": result.vector_named(),
        **({"shard": result.shard, "shards": result.shards} if result.shards > 1 else {}),
        "applied": len(h.steps),
        "not_applied": len(h.unapplied),
        "digest": result.region.state.digest(),
        "tainted": result.tainted,
        "skipped": len(result.skipped),
        "skipped_by_kind": result.skipped_by_kind(),
        "cluster_id": result.cluster_id,
        "records": result.records,
        "seconds": round(result.seconds, 3),
    }
