"""One admission step for every reader of the op logs: a Kafka record in, the ops it may
contribute out (with `continues`), or a typed refusal.

Why one step: the node's materializer, `streams replay / diff / history / log` and the Spark
source read the same logs, and a record one of them refuses must be refused by all of them.
Before, only the materializer passed records through the record gate (`streams.kafka.gate`), so
an unsigned record in a signed region, an op in another region's log or a second record under a
dot changed what a replay, a diff or a Spark snapshot answered, silently.

What a reader gets from `Admission.admit`:

- `Admitted(items, continues)`: the ops the gate let through, each with its own record bytes (a
  pack's items, or the single record's value), and `continues`, the seq of the last op of the
  record's transaction when it goes on in later records (`streams.ops.pack.decode_record`: the
  folds take it as `txn_last` and apply such a transaction whole, or not at all).
- `Admitted([], 0, skipped=(Skip(FORGED, ...),))`: a record of a region that signs its records,
  without a valid signature. It cannot be real, so every reader skips it, counts it and goes on;
  nothing real is lost, and a result built without it is not tainted.
- `UndecodableRecord` or `UntrustedRecord` raised (`Refusal.CORRUPT` / `Refusal.UNTRUSTED`): the
  reader stops, naming the place (the node, Spark), or skips it where the operator asked for
  that (`streams replay --on-corrupt skip`: `Skip.of(refused)`, the result then tainted).

The node's `--skip-record TOPIC:PARTITION:OFFSET` is handled here too (`named`): an undecodable
or untrusted record named is skipped; a named record that decodes and passes is withheld until a
rival under its dot arrives (the gate's `withhold` / `resolves`). No logging here: each reader
reports skipped records in its own output (the node's log and CRDT.INFO, replay's JSON and audit
file, the Spark rows of kind `skipped`).

What a reader checks depends on what it knows (`Trust`): with a topology file, the regions and
their signing keys (every check); with only a bootstrap, the origin of each op log as its first
record names it (`learned`): an op in another region's log and two records under one dot with
other bytes are still refused, an unsigned record cannot be told from a signed one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from streams.crdt import ops
from streams.kafka.gate import (
    ReadHeaders,
    RecordGate,
    RecordRefused,
    Refusal,
    UndecodableRecord,
    UntrustedRecord,
    topic_region,
)
from streams.kafka.topics import is_oplog_topic
from streams.ops.codec import DecodeError
from streams.ops.pack import decode_record

Record = ops.Op | ops.LocalOp
Item = tuple[bytes, Record]
"""One op with its own record bytes (what the gate digests and the Spark rows carry)."""
Place = tuple[str, int, int]
"""(topic, partition, offset) of one record."""


@dataclass(frozen=True)
class Skip:
    """A record a reader skipped, and why (`kind` is what readers decide on)."""

    kind: Refusal
    topic: str
    partition: int
    offset: int
    reason: str

    @classmethod
    def of(cls, refused: RecordRefused) -> Skip:
        return cls(refused.kind, refused.topic, refused.partition, refused.offset, refused.reason)

    @property
    def taints(self) -> bool:
        """Whether a state built without this record may lack a real op: a forged record
        cannot be real (no taint); an undecodable or untrusted one might have been."""
        return self.kind in (Refusal.CORRUPT, Refusal.UNTRUSTED)

    def text(self) -> str:
        where = f"the record at topic {self.topic} partition {self.partition} offset {self.offset}"
        if self.kind is Refusal.NAMED:
            return f"skipping {where} as --skip-record asked: {self.reason}"
        return f"skipped {where} ({self.kind.value}): {self.reason}"


@dataclass(frozen=True)
class Admitted:
    """What one Kafka record contributes: ops, the transaction's end, records skipped."""

    items: list[Item]
    continues: int = 0
    skipped: tuple[Skip, ...] = ()
    """This record (forged, or named by --skip-record), or an earlier record it replaces (a
    withheld record whose rival under the same dot this is)."""
    withheld: bool = False
    """The record decodes and passes, but --skip-record named it: held back until a rival."""

    @property
    def records(self) -> list[Record]:
        return [record for _item, record in self.items]


class RegionLike(Protocol):
    """What `Trust.of` needs of a topology file's region (`streams.config.RegionConfig`)."""

    @property
    def name(self) -> str: ...

    @property
    def id(self) -> int: ...

    @property
    def signing_key(self) -> str: ...


@dataclass(frozen=True)
class Trust:
    """What a reader checks records against: the regions (id -> name) and their signing keys,
    from a topology file, or the regions `learned` from the logs on the cluster."""

    regions: Mapping[int, str]
    keys: Mapping[int, bytes] = field(default_factory=dict)
    learned: bool = False

    @classmethod
    def of(cls, regions: Iterable[RegionLike]) -> Trust:
        """From a topology file's regions: every check, signatures included."""
        regions = list(regions)
        return cls(
            {r.id: r.name for r in regions},
            {r.id: bytes.fromhex(r.signing_key) for r in regions if r.signing_key},
        )

    @classmethod
    def from_logs(cls, first: Iterable[tuple[str, bytes | None]]) -> Trust:
        """From the first record of each op-log partition (topic, value): `origin_names`."""
        return cls(origin_names(first), learned=True)

    def gate(self, own_region: int = 0) -> RecordGate:
        return RecordGate(self.regions, own_region, self.keys, learned=self.learned)

    def describe(self) -> str:
        """For --help and summaries: what this reader could check."""
        if self.learned:
            return "origin vs topic and dot conflicts (no topology file: signatures unchecked)"
        signed = sorted(self.regions.get(i, str(i)) for i in self.keys)
        return "origin, topic, dot conflicts" + (
            f", signatures of {', '.join(signed)}" if signed else " (no region signs)"
        )


def origin_names(first: Iterable[tuple[str, bytes | None]]) -> dict[int, str]:
    """Region id -> name, from the first record of op-log partitions (topic, value): the region
    an op log belongs to (`r1.oplog`, MirrorMaker 2's `A.r1.oplog`) writes its ops. A record
    that does not decode is passed over (the read proper reports it); the first topic naming an
    origin wins (a forged first record then makes the genuine ones be refused: loudly)."""
    names: dict[int, str] = {}
    for topic, value in first:
        if not is_oplog_topic(topic):
            continue
        try:
            items, _continues = decode_record(value)
        except DecodeError:
            continue
        record = items[0][1]
        if isinstance(record, ops.Op):
            names.setdefault(record.origin, topic_region(topic))
    return names


class Admission:
    """One reader's admission step: its gate (None: decode only, the node's unit tests) and its
    counts. Not thread-safe: one per reading thread (the gate remembers recent dots)."""

    def __init__(self, gate: RecordGate | None, named: frozenset[Place] = frozenset()) -> None:
        self.gate = gate
        self.named = named
        """Records named by the node's --skip-record."""
        self.counts: dict[Refusal, int] = {}
        """Records skipped, per why."""

    @property
    def skipped(self) -> int:
        return sum(self.counts.values())

    @property
    def wants_headers(self) -> bool:
        """Whether `admit` needs the record's headers (a region signs its records)."""
        return self.gate is not None and self.gate.signs

    def count(self, skip: Skip) -> Skip:
        """Count a record the reader skipped (also one it skipped on a refusal it caught)."""
        self.counts[skip.kind] = self.counts.get(skip.kind, 0) + 1
        return skip

    def admit(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes | None,
        headers: ReadHeaders | None = None,
    ) -> Admitted:
        """The ops of one Kafka record as the gate admits them (see the module docstring);
        raises `UndecodableRecord` or `UntrustedRecord` when the reader must stop."""
        named = (topic, partition, offset) in self.named
        try:
            items, continues = decode_record(value)
        except DecodeError as exc:
            refused = UndecodableRecord(topic, partition, offset, str(exc))
            if named:
                return Admitted([], 0, (self.count(self._named(refused)),))
            raise refused from exc
        gate = self.gate
        if gate is None:
            return Admitted(items, continues)
        try:
            if gate.signs:
                gate.check_signature(topic, partition, offset, value or b"", items[0][1], headers)
            for item, record in items:
                gate.check_op(topic, partition, offset, item, record, remember=not named)
        except UntrustedRecord as exc:
            if exc.kind is Refusal.FORGED:
                return Admitted([], 0, (self.count(Skip.of(exc)),))
            if named:
                return Admitted([], 0, (self.count(self._named(exc)),))
            raise
        if named:
            for _item, record in items:
                if isinstance(record, ops.Op):
                    gate.withhold(topic, partition, offset, record)
            local: list[Item] = [(i, r) for i, r in items if isinstance(r, ops.LocalOp)]
            return Admitted(local, 0, withheld=True)
        skipped: list[Skip] = []
        for _item, record in items:
            rival = gate.resolves(record)
            if rival is not None:
                skipped.append(
                    self.count(
                        Skip(
                            Refusal.NAMED,
                            *rival,
                            f"the record at topic {topic} partition {partition} offset "
                            f"{offset} carries its dot and is applied instead",
                        )
                    )
                )
        return Admitted(items, continues, tuple(skipped))

    def unresolved(self) -> list[Place]:
        """Records named by --skip-record that decode, pass the checks and met no rival."""
        return self.gate.unresolved() if self.gate is not None else []

    @staticmethod
    def _named(refused: RecordRefused) -> Skip:
        return Skip(Refusal.NAMED, refused.topic, refused.partition, refused.offset, refused.reason)
