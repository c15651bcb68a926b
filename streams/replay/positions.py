"""Replay positions as operators write them, and the errors that mean "cannot be resolved".

A region of S shards is S replicated state machines, each numbering its own ops (DESIGN.md
section 13), so a per-origin seq means something only within one shard:

- `--at r1=120,r2=98`: per-origin op seq, as CRDT.VECTOR prints it with one shard (a region named
  by its name or its numeric id); origins not named are cut at 0. With several shards this plain
  form applies to the one shard replayed (`--shard N`, or the key's shard for `history`) and is
  refused otherwise: summed over shards, a seq names no op.
- `--at '0:r1=120,r2=98;1:r1=80'`: the per-shard form, one `SHARD:VECTOR` per shard, `;` between
  them (quote it in a shell), as CRDT.SHARDS reports a live node's shards and REPLAY.POSITION /
  `diff` print a position; shards not named are cut at 0 like origins not named.
- `--offsets [cluster=ID,]TOPIC[:PARTITION]=OFFSET,...`: the next offset to read per topic
  partition (records before it count; partition 0 when omitted); partitions not named are read
  to their end. Offsets are a cluster's own (a mirrored log's copy sits at other offsets on
  another cluster), so `cluster=ID` says which cluster they were read from and a replay of
  another cluster refuses them (`streams.kafka.clusters`); without it they are taken as the
  cluster's being read, as before.
- `--time ISO8601`: each partition up to its last record with a Kafka timestamp at or before then.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime

Cut = dict[int, int]
"""origin id -> the last seq applied (one shard's position)."""

_SHARD_PART = re.compile(r"^\s*(\d+)\s*:(.*)$", re.DOTALL)


class PositionError(ValueError):
    """A position that cannot be parsed or resolved (exit code 3)."""


def parse_pairs(text: str, what: str, allow_empty: bool = False) -> list[tuple[str, int]]:
    pairs: list[tuple[str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise PositionError(f"{what}: {item!r} is not NAME=NUMBER")
        try:
            number = int(value)
        except ValueError:
            raise PositionError(f"{what}: {value!r} in {item!r} is not a number") from None
        if number < 0:
            raise PositionError(f"{what}: {item!r} is negative")
        pairs.append((name, number))
    if not pairs and not allow_empty:
        raise PositionError(f"{what}: empty position")
    return pairs


def resolve_at(text: str, ids: Mapping[str, int], allow_empty: bool = False) -> Cut:
    """`r1=120,r2=98` -> {origin id: seq}; `ids` maps region names to ids (from the logs)."""
    cut: Cut = {}
    named: dict[int, str] = {}
    for name, seq in parse_pairs(text, "--at", allow_empty):
        if name in ids:
            origin = ids[name]
        elif name.isdigit():
            origin = int(name)
        else:
            known = ", ".join(sorted(ids)) or "none"
            raise PositionError(f"--at: unknown region {name!r} (regions in these logs: {known})")
        if origin in cut:
            # `r1=4,r1=5` is a typo, not a position: taking the last silently hides it.
            raise PositionError(
                f"--at: region {name} named twice ({named[origin]}={cut[origin]} and "
                f"{name}={seq}): give each region once"
            )
        cut[origin] = seq
        named[origin] = name
    return cut


def is_per_shard(text: str) -> bool:
    """Whether `--at` is in the per-shard form (`0:r1=120;1:r2=3`)."""
    return any(_SHARD_PART.match(part) for part in text.split(";") if part.strip())


def resolve_cuts(
    text: str, ids: Mapping[str, int], shards: int, replayed: Collection[int]
) -> dict[int, Cut]:
    """`--at` in either form -> the cut of each replayed shard."""
    if not is_per_shard(text):
        if len(replayed) != 1:
            raise PositionError(
                f"--at {text}: this region has {shards} shards, each numbering its own ops, so "
                "a per-origin seq names an op of one shard only: add --shard N, or give each "
                "shard's position: --at '0:r1=120,r2=98;1:r1=80'"
            )
        return {next(iter(replayed)): resolve_at(text, ids)}
    named: dict[int, Cut] = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        found = _SHARD_PART.match(part)
        if found is None:
            raise PositionError(f"--at: {part.strip()!r} is not SHARD:r1=120,... (per-shard form)")
        shard = int(found.group(1))
        if shard >= shards:
            raise PositionError(
                f"--at: shard {shard}, but the region has {shards} (0..{shards - 1})"
            )
        if shard in named:
            raise PositionError(f"--at: shard {shard} named twice")
        named[shard] = resolve_at(found.group(2), ids, allow_empty=True)
    return {s: named.get(s, {}) for s in replayed}


def at_text(vectors: Mapping[int, Mapping[int, int]], names: Mapping[int, str], shards: int) -> str:
    """A position as `--at` takes it back: the plain form for a region of one shard, else the
    per-shard form (shards whose vector is empty left out: not named means 0)."""
    if shards == 1:
        return vector_text(vectors.get(0, {}), names)
    return ";".join(
        f"{shard}:{vector_text(vector, names)}"
        for shard, vector in sorted(vectors.items())
        if vector
    )


def vector_text(vector: Mapping[int, int], names: Mapping[int, str] | None = None) -> str:
    """`r1=120,r2=98`: one vector, its origins by name (`r<id>` for an unnamed one)."""
    names = names or {}
    return ",".join(f"{names.get(r, f'r{r}')}={s}" for r, s in sorted(vector.items()))


CLUSTER_ITEM = "cluster"
"""`--offsets cluster=ID,r1.oplog=40`: the Kafka cluster the offsets were read from (no op-log
topic is named `cluster`: every log's name ends in `.oplog` or `.local`)."""


def parse_offsets_on(text: str) -> tuple[str | None, dict[tuple[str, int], int]]:
    """`cluster=ID,r1.oplog=40,...` -> (the cluster id, or None when not given; the offsets)."""
    cluster: str | None = None
    rest: list[str] = []
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        if sep and name.strip() == CLUSTER_ITEM:
            if cluster is not None:
                raise PositionError(f"--offsets: {CLUSTER_ITEM}= named twice")
            if not value.strip():
                raise PositionError(f"--offsets: {CLUSTER_ITEM}= without a cluster id")
            cluster = value.strip()
        else:
            rest.append(item)
    return cluster, parse_offsets(",".join(rest))


def offsets_text(positions: Mapping[tuple[str, int], int], cluster_id: str | None) -> str:
    """Positions as `--offsets` takes them back, with the cluster they were read from."""
    head = [f"{CLUSTER_ITEM}={cluster_id}"] if cluster_id else []
    return ",".join(head + [f"{t}:{p}={o}" for (t, p), o in sorted(positions.items())])


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    """`r1.oplog=120,r1.oplog:3=7` -> {(topic, partition): next offset}. Kafka topic names hold
    no `:`, so a `:NUMBER` suffix is always a partition."""
    out: dict[tuple[str, int], int] = {}
    for name, offset in parse_pairs(text, "--offsets"):
        topic, sep, partition = name.rpartition(":")
        if not sep:
            topic, partition = name, "0"
        if not topic or not partition.isdigit():
            raise PositionError(f"--offsets: {name!r} is not TOPIC or TOPIC:PARTITION")
        part = (topic, int(partition))
        if part in out:
            raise PositionError(
                f"--offsets: {topic}:{part[1]} named twice ({out[part]} and {offset}): give each "
                "topic partition once"
            )
        out[part] = offset
    return out


def parse_time(text: str) -> int:
    """ISO 8601 (a naive time is UTC) -> epoch milliseconds."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise PositionError(f"--time: {text!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)
