"""The `streams_oplog` source's options, parsed and checked before anything touches Kafka.

Why a module of its own: the option names are the ones users know from Spark's Kafka source
(`kafka.bootstrap.servers`, `subscribe`, `startingOffsets`, ...), Spark lower-cases every option
key before a Python data source sees it, and a typo must fail with a clear message at planning
time, not as an empty DataFrame. Everything here is pure (unit-tested without Spark or Kafka).

Offsets are Kafka-shaped JSON, as in Spark's Kafka source: `{"r1.oplog": {"0": 42}}`, where -2
means earliest and -1 latest. `startingOffsets`/`endingOffsets` also take `earliest`/`latest`.
A streaming query's checkpointed offsets also name the Kafka cluster they were read from
(`"cluster": ID`): offsets of one cluster mean other records on another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EARLIEST = -2
LATEST = -1

KNOWN = {
    "kafka.bootstrap.servers": "the cluster to read (host:port[,host:port...])",
    "subscribe": "comma-separated topic names (default: every op-log topic, *.oplog)",
    "subscribepattern": "a regular expression over topic names",
    "startingoffsets": "earliest, latest or JSON {topic: {partition: offset}}",
    "endingoffsets": "latest or JSON {topic: {partition: offset}} (batch only)",
    "startingtimestamp": "milliseconds since the epoch: start at the first record at or after it",
    "maxoffsetspertrigger": "streaming: at most this many offsets per micro-batch",
    "minpartitions": "split offset ranges so the read has at least this many Spark partitions",
    "failondataloss": "true (default): fail when requested offsets are no longer in Kafka",
    "includeheaders": "true: add the Kafka headers column",
    "fetchwaitms": "librdkafka fetch.wait.max.ms (default 500; Tansu needs >= 500)",
    "readtimeoutseconds": "fail a read that makes no progress for this long (default 120)",
    "topology": "a topology file: its regions and signing keys are what the record gate checks "
    "(read by every executor; without it, the regions the op logs' first records name)",
}

Offsets = dict[str, dict[int, int]]
"""topic -> partition -> offset (or EARLIEST / LATEST)."""


class OptionError(ValueError):
    """An option the source cannot use; the message names the option and what it accepts."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscribe: tuple[str, ...] | None
    pattern: str | None
    starting: str | Offsets
    ending: str | Offsets
    starting_timestamp: int | None
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    fetch_wait_ms: int
    read_timeout_s: float
    topology: str | None = None
    """A topology file (path): the record gate's regions and signing keys."""
    offsets_cluster: str | None = None
    """The cluster that `startingOffsets` / `endingOffsets` JSON says its offsets were read
    from (`"cluster": ID`); offsets of another cluster are refused."""

    def wants(self, topic: str) -> bool:
        """Whether `topic` is subscribed (by name, by pattern, or as an op log by default)."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic.endswith(".oplog")


def _bool(name: str, text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name}: expected true or false, got {text!r}")


def _positive(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option {name}: expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise OptionError(f"option {name}: expected a positive integer, got {value}")
    return value


def parse_offsets(name: str, text: str, allow_earliest: bool = True) -> str | Offsets:
    """`earliest` / `latest` or Kafka-shaped JSON `{"topic": {"0": 12}}`."""
    low = text.strip().lower()
    if low == "latest" or (low == "earliest" and allow_earliest):
        return low
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        words = "earliest, latest" if allow_earliest else "latest"
        raise OptionError(
            f'option {name}: expected {words} or JSON like {{"r1.oplog": {{"0": 0}}}}, got {text!r}'
        ) from None
    if not isinstance(doc, dict):
        raise OptionError(f"option {name}: the JSON must map topics to {{partition: offset}}")
    out: Offsets = {}
    for topic, parts in doc.items():
        if topic == CLUSTER_KEY:
            continue  # the cluster they were read from: `offsets_cluster`
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to offsets")
        out[topic] = {}
        for part, offset in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise OptionError(f"option {name}: partition {part!r} is not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise OptionError(
                    f"option {name}: offset of {topic}[{p}] must be an integer >= -2 "
                    f"(-2 earliest, -1 latest), got {offset!r}"
                )
            if offset == EARLIEST and not allow_earliest:
                raise OptionError(f"option {name}: -2 (earliest) is not an ending offset")
            out[topic][p] = offset
    return out


def parse(options: Mapping[str, str]) -> SourceOptions:
    """Options as Spark hands them over (keys in any case); raises OptionError."""
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in KNOWN and k != "path")
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(unknown)} for the streams_oplog source; known: "
            + ", ".join(sorted(KNOWN))
        )
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required (host:port of the cluster)")
    subscribe: tuple[str, ...] | None = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe: expected comma-separated topic names")
    pattern = opts.get("subscribepattern")
    if subscribe is not None and pattern is not None:
        raise OptionError("options subscribe and subscribePattern exclude each other")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern: not a regular expression: {exc}") from None
    starting_timestamp = None
    if "startingtimestamp" in opts:
        if "startingoffsets" in opts:
            raise OptionError("options startingOffsets and startingTimestamp exclude each other")
        try:
            starting_timestamp = int(opts["startingtimestamp"])
        except ValueError:
            raise OptionError(
                f"option startingTimestamp: expected milliseconds since the epoch, got "
                f"{opts['startingtimestamp']!r}"
            ) from None
    max_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = _positive("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"])
    min_partitions = None
    if "minpartitions" in opts:
        min_partitions = _positive("minPartitions", opts["minpartitions"])
    read_timeout = float(_positive("readTimeoutSeconds", opts.get("readtimeoutseconds", "120")))
    return SourceOptions(
        bootstrap=bootstrap,
        subscribe=subscribe,
        pattern=pattern,
        starting=parse_offsets("startingOffsets", opts.get("startingoffsets", "earliest")),
        ending=parse_offsets("endingOffsets", opts.get("endingoffsets", "latest"), False),
        starting_timestamp=starting_timestamp,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=min_partitions,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        fetch_wait_ms=_positive("fetchWaitMs", opts.get("fetchwaitms", "500")),
        read_timeout_s=read_timeout,
        topology=opts.get("topology") or None,
        offsets_cluster=_json_cluster(opts.get("startingoffsets"), opts.get("endingoffsets")),
    )


def _json_cluster(*texts: str | None) -> str | None:
    """The `"cluster"` named by offsets JSON (the same in both when both name one)."""
    found: set[str] = set()
    for text in texts:
        try:
            doc = json.loads(text) if text else None
        except json.JSONDecodeError:
            continue  # `earliest` / `latest`
        if isinstance(doc, dict) and doc.get(CLUSTER_KEY):
            found.add(str(doc[CLUSTER_KEY]))
    if len(found) > 1:
        raise OptionError(
            f"startingOffsets and endingOffsets name different clusters: {sorted(found)}"
        )
    return found.pop() if found else None


CLUSTER_KEY = "cluster"
"""The key of a checkpointed offset naming the Kafka cluster its offsets were read from (no op
log is named so: every log's name ends in `.oplog` or `.local`)."""


def offsets_json(offsets: Offsets, cluster: str | None = None) -> dict[str, Any]:
    """Offsets as the JSON-able dict Spark checkpoints (string partition keys, sorted), with the
    cluster they were read from (`streams.kafka.clusters`)."""
    doc: dict[str, Any] = {
        t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())
    }
    if cluster:
        doc[CLUSTER_KEY] = cluster
    return doc


def offsets_from_json(doc: Mapping[str, Any]) -> Offsets:
    return {
        t: {int(p): int(o) for p, o in parts.items()}
        for t, parts in doc.items()
        if t != CLUSTER_KEY
    }


def offsets_cluster(doc: Mapping[str, Any]) -> str | None:
    """The cluster a checkpointed offset was read from (None: written before offsets said)."""
    cluster = doc.get(CLUSTER_KEY)
    return str(cluster) if cluster else None
