"""What every reader checks before a decoded record may reach a state: that it can be a real op
of the topology, and that it does not contradict an op already read under its dot. Readers do
not call it directly: `streams.kafka.records.Admission` decodes a Kafka record and passes its
ops through a gate, for the node's materializer, `streams replay / diff / history / log` and the
Spark source alike, so a record one of them refuses is refused by all.

The op logs are Kafka topics, and anyone who can produce to them can put a record there. A
record that decodes is not yet an op of the database:

- its origin must be a region of the topology: an op "from r9" that no region wrote would be
  applied everywhere it is mirrored and stay in every causal context for good;
- an op in an op-log topic must be of the region the topic belongs to (`r1.oplog` and its
  mirrored copies hold r1's ops only; a mirrored topic keeps the region's name as its last part,
  `A.r1.oplog`);
- two records with the same dot (origin, seq) and different bytes are a conflict. Duplicates
  are normal (mirrors copy at least once) and are dropped by the fold as duplicates, so a forged
  record that takes the dot the region's writer uses next would make every reader drop the real
  op silently. The gate remembers a digest of the most recent `WINDOW` dots of each origin and
  stops on a second record under one of them whose bytes differ, naming both places; an
  operator decides which one carries no op and names it with `--skip-record`. (Older dots are
  no longer compared: a forged record far behind the frontier is a duplicate the fold drops,
  which changes nothing.)

Every refusal (`Refusal`: a typed value readers decide on) stops the materializer like an
undecodable record does (nothing is applied silently, nothing skipped silently), and
`--skip-record TOPIC:PARTITION:OFFSET` lets an operator skip the one record named. Of two
records under one dot, the first passed the checks when it was read; naming it withholds it
until the other arrives, which is then applied in its place, and a named record that meets no
such rival by the end of catching up stops the node
(skipping a real op would make the region diverge for good).

Records are authenticated when the topology gives a region a `signing_key`: its writer adds
an HMAC-SHA256 of each Kafka record's value (a pack of ops or a single op) in the `streams.sig`
header (`sign`), and every reader
refuses that region's records without it or with a wrong one, so a producer with broker access
but no key cannot forge the region's ops: such a record is skipped, counted and logged (it
cannot be real, so nothing is lost and replication goes on). The value holds the dot and the
origin, so a signed record copied elsewhere is a duplicate or refused by the checks above.
Without keys, a forged op under a dot its region's writer uses next is caught by the dot check
once the real op arrives, but one under a dot far ahead is not; Kafka ACLs (only a region's
principal writes its topics) are what keeps such producers out (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import hmac
from array import array
from collections.abc import Mapping, Sequence
from enum import Enum

from streams.crdt import ops
from streams.kafka.headers import header
from streams.kafka.topics import OPLOG_SUFFIX, is_oplog_topic

WINDOW = 1 << 16
"""Dots remembered per origin (a power of two: a dot's slot is `seq & (WINDOW - 1)`); about
26 bytes each, 1.7 MB per origin and shard."""


class Refusal(Enum):
    """Why a reader did not take a record, as a value readers decide on (never on the text)."""

    CORRUPT = "corrupt"
    """It does not decode (not an op-log record, a malformed pack): stops the reader."""
    UNTRUSTED = "untrusted"
    """It decodes but cannot be an op of this topology, or contradicts an op under its dot:
    stops the reader (a replay may skip it on request, the result then tainted)."""
    FORGED = "forged"
    """Its region signs its records and it carries no valid signature: it cannot be real, so it
    is skipped (and counted) wherever it is read, and nothing is lost."""
    NAMED = "named"
    """An operator named it with `--skip-record` (the node only)."""


class RecordRefused(RuntimeError):
    """A record a reader does not take; `kind` says why, `reason` in words without the place."""

    kind = Refusal.UNTRUSTED

    def __init__(self, topic: str, partition: int, offset: int, reason: str, text: str) -> None:
        super().__init__(text)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = reason


class UndecodableRecord(RecordRefused):
    """A record that is not an op-log record (or a malformed pack)."""

    kind = Refusal.CORRUPT

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            topic,
            partition,
            offset,
            reason,
            f"cannot decode the record at topic {topic} partition {partition} offset {offset}: "
            f"{reason}",
        )


class UntrustedRecord(RecordRefused):
    """A record that decodes but cannot be an op of this topology."""

    kind = Refusal.UNTRUSTED

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            topic,
            partition,
            offset,
            reason,
            f"refusing the record at topic {topic} partition {partition} offset {offset}: "
            f"{reason}; the materializer stopped (this record and what follows it were not "
            f"applied; if this record carries no op, restart the node with --skip-record "
            f"{topic}:{partition}:{offset})",
        )


class ForgedRecord(UntrustedRecord):
    """A record of a region that signs its records, without its signature or with a wrong one:
    certainly not written by the region's writer, so it is skipped (and counted and logged)
    rather than stopping the reader; nothing real is lost by skipping it."""

    kind = Refusal.FORGED

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        RecordRefused.__init__(
            self,
            topic,
            partition,
            offset,
            reason,
            f"the record at topic {topic} partition {partition} offset {offset}: {reason}",
        )


def topic_region(topic: str) -> str:
    """The region whose op log `topic` is (or is a copy of): `r1.oplog` and `A.r1.oplog` -> r1."""
    return topic[: -len(OPLOG_SUFFIX)].rsplit(".", 1)[-1]


SIGNATURE_HEADER = "streams.sig"

Headers = Sequence[tuple[str, str | bytes | None]]
ReadHeaders = Headers | Mapping[str, str | bytes | None]
"""What confluent-kafka hands a reader (a list of pairs; a dict in some versions)."""


def signature(key: bytes, value: bytes) -> bytes:
    return hmac.new(key, value, hashlib.sha256).digest()


def signed(headers: Headers, key: bytes, value: bytes) -> list[tuple[str, str | bytes | None]]:
    """`headers` with the record's signature added (the writer of a region with a key)."""
    return [*headers, (SIGNATURE_HEADER, signature(key, value))]


def _signature_of(headers: ReadHeaders | None) -> bytes | None:
    return header(headers, SIGNATURE_HEADER)


def digest(value: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(value, digest_size=8).digest(), "little")


class _Dots:
    """The most recent dots of one origin: a ring of (seq, digest, where)."""

    __slots__ = ("seqs", "digests", "offsets", "topics")

    def __init__(self) -> None:
        self.seqs = array("Q", bytes(8 * WINDOW))
        self.digests = array("Q", bytes(8 * WINDOW))
        self.offsets = array("q", bytes(8 * WINDOW))
        self.topics = array("H", bytes(2 * WINDOW))


class RecordGate:
    """One per materializer (one shard's reader); not thread-safe (the reader thread owns it)."""

    def __init__(
        self,
        regions: Mapping[int, str],
        own_region: int,
        keys: Mapping[int, bytes] | None = None,
        *,
        learned: bool = False,
    ) -> None:
        """`keys`: per region id, the key its records must be signed with (regions without
        one are not checked for signatures). `learned`: `regions` are not a topology's but what
        a reader without a topology file learned from the logs on the cluster (the first record
        of each op log names its origin: `streams.kafka.records.origin_names`), and refusals say
        so."""
        self.regions = dict(regions)
        self.learned = learned
        self.keys = dict(keys or {})
        self.own_region = own_region
        self._dots: dict[int, _Dots] = {}
        self._topics: list[str] = []
        self._topic_index: dict[str, int] = {}
        self._withheld: dict[tuple[int, int], tuple[str, int, int]] = {}
        self._home: dict[str, str | None] = {}
        """Per topic read: the region whose op log it is (None: not an op log)."""

    def admit(self, regions: Mapping[int, str], keys: Mapping[int, bytes]) -> None:
        """Regions that joined the topology while the reader runs (called from the node's
        thread: single dict updates, which the reader thread sees whole)."""
        self.regions.update(regions)
        self.keys.update(keys)

    def check(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes,
        record: ops.Op | ops.LocalOp,
        *,
        remember: bool = True,
        headers: ReadHeaders | None = None,
    ) -> None:
        """Raise UntrustedRecord if `record`, the one op of a single Kafka record (read at
        `topic`/`partition`/`offset` with the bytes `value`), must not be applied; `remember=False`
        checks without taking its dot (a record withheld on the operator's word)."""
        self.check_signature(topic, partition, offset, value, record, headers)
        self.check_op(topic, partition, offset, value, record, remember=remember)

    def check_signature(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes,
        record: ops.Op | ops.LocalOp,
        headers: ReadHeaders | None,
    ) -> None:
        """Raise ForgedRecord if `record`'s region signs its records and the Kafka record
        (`value`: the whole record, a pack of several ops or a single one) does not carry its
        signature. Once per Kafka record: a pack's ops share its signature."""
        key = self.keys.get(record.region if isinstance(record, ops.LocalOp) else record.origin)
        if key is None:
            return
        found = _signature_of(headers)
        if found is None or not hmac.compare_digest(found, signature(key, value)):
            origin = record.region if isinstance(record, ops.LocalOp) else record.origin
            raise ForgedRecord(
                topic,
                partition,
                offset,
                f"region {self.regions.get(origin, origin)} signs its records and this one "
                + ("is not signed" if found is None else "carries a wrong signature")
                + f" ({SIGNATURE_HEADER} header): it was not written by the region's writer",
            )

    @property
    def signs(self) -> bool:
        """Whether any region signs its records (else readers need not fetch headers)."""
        return bool(self.keys)

    def check_op(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes,
        record: ops.Op | ops.LocalOp,
        *,
        remember: bool = True,
    ) -> None:
        """The checks of one op (`value`: its own record bytes, a pack's item or a single
        record's value): its origin, its topic, its dot against the dots read before."""
        if isinstance(record, ops.LocalOp):
            return  # the region's own .local topic; the fold checks the region
        origin = record.origin
        name = self.regions.get(origin)
        if name is None:
            known = ", ".join(f"{n} (id {i})" for i, n in sorted(self.regions.items()))
            which = (
                f"the regions whose op logs are on this cluster ({known}; no topology file)"
                if self.learned
                else f"the topology ({known})"
            )
            raise UntrustedRecord(
                topic,
                partition,
                offset,
                f"its origin, region id {origin}, is not a region of {which}",
            )
        home = self._home.get(topic, "")
        if home == "":
            home = self._home[topic] = topic_region(topic) if is_oplog_topic(topic) else None
        if home is not None and home != name:
            raise UntrustedRecord(
                topic,
                partition,
                offset,
                f"it is an op of region {name} (dot {origin}:{record.seq}) in the op log of "
                f"region {home}",
            )
        if remember:
            self._check_dot(topic, partition, offset, origin, record.seq, digest(value))

    def withhold(self, topic: str, partition: int, offset: int, record: ops.Op) -> None:
        """An operator named this record, which passes the checks, with `--skip-record`: it is
        withheld only if another record under its dot follows (the conflict the operator
        resolved this way); `unresolved` says which named records met none."""
        self._withheld[(record.origin, record.seq)] = (topic, partition, offset)

    def resolves(self, record: ops.Op | ops.LocalOp) -> tuple[str, int, int] | None:
        """Where the withheld record under this record's dot was, if any (then this record is
        the one applied instead)."""
        if isinstance(record, ops.LocalOp):
            return None
        return self._withheld.pop((record.origin, record.seq), None)

    def unresolved(self) -> list[tuple[str, int, int]]:
        return sorted(self._withheld.values())

    def _check_dot(
        self, topic: str, partition: int, offset: int, origin: int, seq: int, value_digest: int
    ) -> None:
        dots = self._dots.get(origin)
        if dots is None:
            dots = self._dots[origin] = _Dots()
        slot = seq & (WINDOW - 1)
        if dots.seqs[slot] == seq:
            if dots.digests[slot] != value_digest:
                first_topic = self._topics[dots.topics[slot]]
                raise UntrustedRecord(
                    topic,
                    partition,
                    offset,
                    f"it carries dot {origin}:{seq} ({self.regions.get(origin, origin)}), as "
                    "does the "
                    f"different record at topic {first_topic} partition {partition} offset "
                    f"{dots.offsets[slot]}: one of them was not written by the region's writer "
                    "(the first was applied, this one was not; skip the forged one and restart)",
                )
            return
        if seq < dots.seqs[slot]:
            return  # older than the window: the fold drops it as a duplicate
        dots.seqs[slot] = seq
        dots.digests[slot] = value_digest
        dots.offsets[slot] = offset
        dots.topics[slot] = self._index(topic)

    def _index(self, topic: str) -> int:
        index = self._topic_index.get(topic)
        if index is None:
            index = self._topic_index[topic] = len(self._topics)
            self._topics.append(topic)
        return index
