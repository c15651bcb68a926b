"""Which node is the writer of a region's shards: a second node refuses to start beside a live
writer (unless `--takeover`), and a node that was taken over knows it at once.

How a live writer is detected, and why this way. Every node announces itself in partition s of
`<region>.writers` for each shard s it owns: a small JSON record (`start`) with a run id, the
region, node index, RESP address, pid, host and start time; it writes `stop` when it stops
cleanly. Registering a shard's transactional id fences every earlier writer, so the newest
`start` of a partition names the shard's writer, unless a `stop` of that run follows. A starting
node reads its shards' partitions; when that writer has not stopped, it is asked: a `probe` record
naming it, which the writer's watcher (a thread reading its partitions) answers with `alive`. An
answer within `PROBE_WAIT_S` proves a live writer: the node refuses to start, naming it. No answer
means it crashed or is frozen, and starting goes on (fencing it, as before). A writer that ran on
this host, in this pid namespace, whose pid is gone, is known dead without asking (so restarting
a killed node costs no wait).

The alternatives: Kafka's transactional id fences but does not tell whether its holder lives
(its state outlives the process by `transactional.id.expiration.ms`, and DescribeTransactions is
not on every broker: not on Tansu); probing the RESP port in the topology file misses a node
started from another copy of the file, with `--port`, or on another host; consumer-group
membership needs a group coordinator and a poll discipline from a busy event loop. The topic
needs only the cluster the writer needs anyway, reachable from wherever the region's nodes run.
No clock is compared (the wait is this process's monotonic clock; the start time is for humans).

Not a lock: two nodes started at the same moment both see no writer; the later registration
fences the earlier, whose watcher then sees the later `start` and reports that it was taken
over, the same end as a `--takeover`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from streams.kafka import security
from streams.kafka.reading import consumer_config

log = logging.getLogger(__name__)

PROBE_WAIT_S = 3.0
"""How long a starting node waits for the recorded writer to answer its probe. A live writer's
watcher answers within a fetch or two (well under a second on one machine); this is the margin
for a loaded one. Only paid when the recorded writer did not stop cleanly and may be elsewhere."""
SCAN_TIMEOUT_S = 20.0
"""Reading the announcements (a few records per node start) to their end."""
FETCH_WAIT_MS = 250
"""Fetch wait of the one-off reads (`check`, `superseded`): each ends with one empty fetch.
Tansu answers a fetch with nothing when assembling it takes longer than the wait
(`streams.replay.reader`), which a partition of a few records never does."""
WATCH_FETCH_WAIT_MS = 1000
"""The fetch wait of the watcher, which reads for as long as the node runs: a probe is answered
within about a second, well inside `PROBE_WAIT_S`. Tansu holds an empty fetch the whole wait and
spends ~2 ms of CPU on each: at 250 ms the watchers of an idle three-region topology cost the
brokers ~2 % of a core (issue 34). The one-off reads (`check`, `superseded`) keep the short
`FETCH_WAIT_MS`: each of them pays one wait at its end."""
STOP_FLUSH_S = 3.0
"""How long a stopping node tries to record its stop (else the next node asks instead)."""


class LiveWriterError(RuntimeError):
    """A live node already writes this region's shards (exit 3 of `python -m streams.node`)."""


@dataclass(frozen=True)
class Identity:
    """A node process as its announcements describe it."""

    run: str
    region: str
    node: int
    address: str
    shards: tuple[int, ...]
    pid: int
    host: str
    machine: str
    """Host, boot and pid namespace: equal means a pid of that record can be looked up here."""
    started: str

    @classmethod
    def here(cls, region: str, node: int, address: str, shards: Iterable[int]) -> Identity:
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # for humans only
        return cls(
            uuid.uuid4().hex,
            region,
            node,
            address,
            tuple(shards),
            os.getpid(),
            socket.gethostname(),
            _machine(),
            started,
        )

    def describe(self) -> str:
        """`node 0 of r1 at 127.0.0.1:6379 (pid 4242 on host h, started 2026-...Z)`."""
        return (
            f"node {self.node} of {self.region} at {self.address} "
            f"(pid {self.pid} on host {self.host}, started {self.started})"
        )


def _machine() -> str:
    """This host, boot and pid namespace ("" where /proc cannot tell: then always probe)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fp:
            boot = fp.read().strip()
        pidns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{socket.gethostname()}/{boot}/{pidns}"


def pid_gone(pid: int) -> bool:
    """No such process here, or only its zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fp:
            return fp.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def record(kind: str, who: Identity, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "kind": kind, **asdict(who), **extra}


def identity_of(rec: dict[str, Any]) -> Identity:
    """The announcing node of a record (fields it lacks, say from another version, as unknown:
    a record never stops a node from starting by failing to parse)."""
    return Identity(
        str(rec.get("run", "")),
        str(rec.get("region", "?")),
        int(rec.get("node", 0)),
        str(rec.get("address", "?")),
        tuple(int(s) for s in rec.get("shards", ())),
        int(rec.get("pid", 0)),
        str(rec.get("host", "?")),
        str(rec.get("machine", "")),
        str(rec.get("started", "?")),
    )


def current_writer(records: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The `start` record of a partition's writer: the newest start, unless its run stopped."""
    writer: dict[str, Any] | None = None
    for rec in records:
        if rec.get("kind") == "start":
            writer = rec
        elif rec.get("kind") == "stop" and writer is not None and rec["run"] == writer["run"]:
            writer = None
    return writer


def taken_over_text(shard_name: str, by: dict[str, Any]) -> str:
    """What a node taken over answers every write with (and shows in CRDT.INFO)."""
    how = "with --takeover" if by.get("takeover") else "(at the same time as this one)"
    return (
        f"another writer took over region {shard_name} (fenced): {identity_of(by).describe()} "
        f"started {how}; this node no longer accepts writes (stop it, or restart it with "
        "--takeover to make it the writer again)"
    )


class Presence:
    """This node's announcements in `<region>.writers` and the watcher of its partitions."""

    def __init__(self, bootstrap: str, topic: str, me: Identity) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.me = me
        self.announced = False
        self._producer: Producer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.taken_over: dict[int, dict[str, Any]] = {}
        """Per shard, the `start` record of the node that took it over."""
        self.txn = ""
        """The transactional id this node's writer registers; each `start` carries it."""
        self.shard_txn: Callable[[int], str] = lambda _shard: ""
        """The id a writer of one shard registered before the record said it (an older node's
        `start` has no `txn`: its shard had a producer of its own)."""
        self.former_ids: tuple[str, ...] = ()
        """What `check` found: the transactional ids the newest writers of this node's shards
        announced, where they differ from `txn` (a shard moved between processes: the node
        registers them first, which fences their holders; `streams.node.kafka.process_writer`)."""

    # --- starting ---------------------------------------------------------------------------

    def check(self) -> list[tuple[Identity, bool]]:
        """The recorded writers of this node's shards that have not stopped: (who, live). Live:
        it answered a probe. Blocking (run it in an executor)."""
        config = consumer_config(self.bootstrap, f"streams-writers-{self.me.run}", FETCH_WAIT_MS)
        consumer = Consumer(config)
        try:
            parts = [TopicPartition(self.topic, s, 0) for s in self.me.shards]
            consumer.assign(parts)
            seen = self._read_to_end(consumer, {s: [] for s in self.me.shards})
            writers: dict[str, tuple[Identity, list[int]]] = {}
            former: set[str] = set()
            for shard, recs in seen.items():
                rec = current_writer(recs)
                if rec is not None and rec["run"] != self.me.run:
                    txn = str(rec.get("txn") or self.shard_txn(shard))
                    if txn and txn != self.txn:
                        former.add(txn)
                    who = identity_of(rec)
                    writers.setdefault(who.run, (who, []))[1].append(shard)
            self.former_ids = tuple(sorted(former))
            found: list[tuple[Identity, bool]] = []
            asked: dict[str, tuple[Identity, int]] = {}
            for who, shards in writers.values():
                if who.machine and who.machine == self.me.machine and pid_gone(who.pid):
                    log.info("%s is gone (no pid %d here): not asked", who.describe(), who.pid)
                    found.append((who, False))
                    continue
                probe = uuid.uuid4().hex
                self._send(shards[0], record("probe", self.me, target=who.run, probe=probe))
                asked[probe] = (who, shards[0])
            answered = self._answers(consumer, set(asked)) if asked else set()
            found += [(who, probe in answered) for probe, (who, _s) in asked.items()]
            return found
        finally:
            consumer.close()

    def _read_to_end(
        self, consumer: Consumer, seen: dict[int, list[dict[str, Any]]]
    ) -> dict[int, list[dict[str, Any]]]:
        ended: set[int] = set()
        deadline = time.monotonic() + SCAN_TIMEOUT_S
        last_error = ""
        while len(ended) < len(seen):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"cannot read {self.topic} on {self.bootstrap} to its end within "
                    f"{SCAN_TIMEOUT_S:g}s, so whether a live node writes this region is unknown"
                    + (f" ({last_error})" if last_error else "")
                )
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition() or 0)
                elif error.fatal():
                    raise RuntimeError(f"reading {self.topic} on {self.bootstrap}: {error}")
                else:  # a topic just created may be unknown to a broker for a moment
                    last_error = str(error)
                continue
            rec = _decode(msg.value())
            if rec is not None:
                seen[msg.partition() or 0].append(rec)
        return seen

    def _answers(self, consumer: Consumer, probes: set[str]) -> set[str]:
        answered: set[str] = set()
        deadline = time.monotonic() + PROBE_WAIT_S
        while answered != probes and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            rec = _decode(msg.value())
            if rec is not None and rec.get("kind") == "alive" and rec.get("probe") in probes:
                answered.add(rec["probe"])
        return answered

    def superseded(self, shard: int, shard_name: str) -> str | None:
        """Whether another node announced itself as the writer of `shard` after this one: the
        text a superseded node answers writes with, else None. Asked before this node renews its
        writer (which would fence the newer one, `streams.node.kafka.writer`), so it reads the
        partition to its end rather than trust the watcher, which may be behind. Blocking;
        raises RuntimeError when the partition cannot be read (then nothing is renewed)."""
        if shard in self.taken_over:
            return taken_over_text(shard_name, self.taken_over[shard])
        config = consumer_config(self.bootstrap, f"streams-writers-{self.me.run}", FETCH_WAIT_MS)
        consumer = Consumer(config)
        try:
            consumer.assign([TopicPartition(self.topic, shard, 0)])
            recs = self._read_to_end(consumer, {shard: []})[shard]
        finally:
            consumer.close()
        writer = current_writer(recs)
        if writer is None or writer.get("run") == self.me.run:
            return None
        if not any(rec.get("run") == self.me.run and rec.get("kind") == "start" for rec in recs):
            return None  # this node's own start is not there: nothing to compare with
        return taken_over_text(shard_name, writer)

    def announce(self, takeover: bool) -> None:
        """`start` in each of this node's partitions (before its writers register)."""
        for shard in self.me.shards:
            rec = record("start", self.me, takeover=takeover)
            if self.txn:
                rec["txn"] = self.txn
            self._send(shard, rec, flush=False)
        self._flush()
        self.announced = True

    # --- running ----------------------------------------------------------------------------

    def watch(self, on_taken_over: Callable[[int, dict[str, Any]], None]) -> None:
        """Answer probes and report takeovers (`on_taken_over(shard, start record)`, called in
        the watcher's thread) until `close`."""
        self._thread = threading.Thread(
            target=self._watch,
            args=(on_taken_over,),
            name=f"presence-{self.me.region}",
            daemon=True,
        )
        self._thread.start()

    def _watch(self, on_taken_over: Callable[[int, dict[str, Any]], None]) -> None:
        config = consumer_config(
            self.bootstrap, f"streams-writers-{self.me.run}", WATCH_FETCH_WAIT_MS
        )
        consumer = Consumer({**config, "enable.partition.eof": False})
        consumer.assign([TopicPartition(self.topic, s, 0) for s in self.me.shards])
        mine: set[int] = set()
        """Partitions where this node's own `start` was read: what came before is history."""
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                rec, shard = _decode(msg.value()), msg.partition() or 0
                if rec is None:
                    continue
                if rec.get("run") == self.me.run:
                    mine.add(shard)
                    continue
                if shard not in mine or shard in self.taken_over:
                    continue
                if rec.get("kind") == "start":
                    self.taken_over[shard] = rec
                    on_taken_over(shard, rec)
                elif rec.get("kind") == "probe" and rec.get("target") == self.me.run:
                    self._send(shard, record("alive", self.me, probe=rec.get("probe")))
        except Exception:  # never take the node down; a starting node then finds no answer
            log.exception("the watcher of %s stopped", self.topic)
        finally:
            consumer.close()

    def close(self) -> None:
        """Stop watching; `stop` in each partition (a clean stop: the next node need not ask)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.announced:
            try:
                for shard in self.me.shards:
                    self._send(shard, record("stop", self.me), flush=False)
                self._flush(STOP_FLUSH_S)
            except Exception as exc:  # the cluster is gone: the next node will ask instead
                log.warning("could not record this node's stop in %s: %s", self.topic, exc)
            self.announced = False

    # --- Kafka ------------------------------------------------------------------------------

    def _send(self, shard: int, rec: dict[str, Any], flush: bool = True) -> None:
        if self._producer is None:
            self._producer = Producer(
                {
                    **security.client_settings(self.bootstrap),
                    "bootstrap.servers": self.bootstrap,
                    "linger.ms": 0,
                    "log_level": 3,
                }
            )
        value = json.dumps(rec).encode()
        self._producer.produce(self.topic, value, self.me.run.encode(), partition=shard)
        if flush:
            self._flush()

    def _flush(self, timeout: float = 10.0) -> None:
        assert self._producer is not None
        if self._producer.flush(timeout) > 0:
            raise RuntimeError(f"cannot write to {self.topic} on {self.bootstrap}")


def _decode(value: bytes | None) -> dict[str, Any] | None:
    try:
        rec = json.loads(value or b"")
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and "kind" in rec and "run" in rec else None
