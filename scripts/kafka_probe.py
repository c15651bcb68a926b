"""Probe Apache Kafka and MirrorMaker 2 as the project runs them, and print what was measured.

    python3 scripts/kafka_probe.py                 # every section (about 10 minutes on 2 cores)
    python3 scripts/kafka_probe.py commit mm2      # some of them

Sections (each starts its own brokers and MirrorMaker processes, and stops them):

- `broker`: start time of a KafkaBroker (fresh: format + start; again on its data), its RSS and
  idle CPU, stop time, restart after SIGKILL.
- `commit`: one-record transactions (idempotent, acks=all) against one broker: the first
  init_transactions, then 1000 commits, p50/p99, with Kafka's default flush settings and with
  `log.flush.interval.messages=1` (an fsync per append) for comparison.
- `mm2`: MirrorMaker 2 from the project's generator (identity naming, read_committed): a topic
  created after MM2 started (how long until copied), what is copied of committed, aborted and
  open transactions, idle copy latency, control markers and offsets on the target, internal
  topics on each cluster, SIGKILL mid-stream and restart (duplicates?), start time, RSS and idle
  CPU of the process.
- `eos`: the same with exactly-once source support: what it takes to start, transactions on
  the target (one per poll batch: is a multi-record source transaction split?), SIGKILL
  mid-stream and restart.
- `pause`: one MirrorMaker process per ordered pair (`flow_properties`, `--clusters`), each
  frozen with SIGSTOP; a subset sync (thaw, wait until copied, freeze), a freeze longer than
  the worker's session timeout, SIGKILL and restart with raised timeouts.

Needs the jars (scripts/kafka_jars.sh) and confluent_kafka.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from confluent_kafka.admin._config import ConfigResource  # noqa: E402
from confluent_kafka.cimpl import NewTopic  # noqa: E402

from streams.config.topology import loads  # noqa: E402
from streams.kafka.reading import TOPIC_MAX_MESSAGE_BYTES  # noqa: E402
from topology.apache_kafka import KafkaBroker  # noqa: E402
from topology.mm2 import render  # noqa: E402
from topology.mm2.process import (  # noqa: E402
    MirrorMaker2,
    exactly_once_settings,
    fast_start_settings,
    flow_properties,
    with_settings,
)
from topology.ports import free_port  # noqa: E402

ALIASES = "ABC"
LOGS = Path(tempfile.gettempdir()) / "kafka-probe"
"""Where MirrorMaker's work directories (config, log) are kept after the probe, to read."""
MB = 1024 * 1024


def say(text: str) -> None:
    print(text, flush=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def brokers(count: int, **kwargs: Any) -> Iterator[list[KafkaBroker]]:
    started: list[KafkaBroker] = []
    try:
        for i in range(count):
            broker = KafkaBroker(f"r{i + 1}", **kwargs)
            broker.start()
            started.append(broker)
        yield started
    finally:
        for broker in started:
            broker.stop()


def topology_properties(clusters: list[KafkaBroker]) -> str:
    """The generator's config for one region per cluster (r1 on A, r2 on B, ...)."""
    lines = ["[topology]", 'mirror_naming = "identity"', "shards = 1", ""]
    for i, broker in enumerate(clusters, 1):
        lines += [
            "[[region]]",
            f'name = "r{i}"',
            f"id = {i}",
            f'bootstrap = "{broker.bootstrap}"',
            f"resp_port = {free_port()}",
            f'alias = "{ALIASES[i - 1]}"',
            "",
        ]
    return render(loads("\n".join(lines)))


def create_topic(broker: KafkaBroker, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES), "retention.ms": "-1"}
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])
    for future in futures.values():
        future.result()


def topics(broker: KafkaBroker) -> list[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return sorted(t for t in admin.list_topics(timeout=10).topics if not t.startswith("__"))


def read_all(
    broker: KafkaBroker, topic: str, isolation: str = "read_uncommitted", timeout: float = 10.0
) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition 0 up to its end, in the given isolation."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "probe-" + uuid.uuid4().hex,
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    time.sleep(0.1)
                continue
            out.append((msg.offset() or 0, msg.value() or b""))
    finally:
        consumer.close()
    return out


def end_offset(broker: KafkaBroker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe-end"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> float | None:
    """Seconds until check() held, or None at the timeout."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic() - began
        time.sleep(step)
    return None


def tx_producer(broker: KafkaBroker, name: str, **extra: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": f"probe-{name}-{uuid.uuid4().hex[:6]}",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 0,
        "retry.backoff.ms": 5,
    }
    config.update(extra)
    return Producer(config)


def plain_producer(broker: KafkaBroker) -> Producer:
    return Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all"}
    )


def mb(value: int | None) -> str:
    return "?" if value is None else f"{value / MB:.0f} MB"


def idle_cpu(proc: KafkaBroker | MirrorMaker2, seconds: float = 20.0) -> str:
    before = proc.cpu_seconds()
    time.sleep(seconds)
    after = proc.cpu_seconds()
    if before is None or after is None:
        return "?"
    return f"{(after - before) / seconds * 100:.1f} % of a core"


# ---------------------------------------------------------------------------------------------
# broker


def section_broker() -> None:
    say("== broker: KafkaBroker start, memory, stop, restart")
    with tempfile.TemporaryDirectory(prefix="probe-kafka-") as tmp:
        broker = KafkaBroker("r1", data_dir=Path(tmp) / "r1")
        try:
            broker.start()
            say(
                f"fresh start (format + start, until the admin client sees it): "
                f"{broker.start_seconds:.1f} s"
            )
            create_topic(broker, "r1.oplog")
            producer = plain_producer(broker)
            for i in range(100):
                producer.produce("r1.oplog", f"v{i}".encode())
            producer.flush(10)
            time.sleep(5)
            say(f"RSS after start: {mb(broker.rss_bytes())}; idle CPU: {idle_cpu(broker)}")
            say(f"RSS idle: {mb(broker.rss_bytes())}")
            began = time.monotonic()
            broker.stop()
            say(f"stop (SIGTERM, controlled shutdown): {time.monotonic() - began:.1f} s")
            broker.start()
            say(f"start again on its data: {broker.start_seconds:.1f} s")
            broker.kill()
            broker.start()
            kept = len(read_all(broker, "r1.oplog"))
            say(f"start after SIGKILL: {broker.start_seconds:.1f} s, records kept: {kept}/100")
        finally:
            broker.stop()
    ephemeral = KafkaBroker("eph")
    try:
        ephemeral.start()
        path = ephemeral.data_dir
        say(f"ephemeral start: {ephemeral.start_seconds:.1f} s in {path}")
    finally:
        ephemeral.stop()
    say(f"ephemeral dir removed at stop: {path is not None and not path.exists()}")


# ---------------------------------------------------------------------------------------------
# commit


def commit_latencies(
    broker: KafkaBroker, count: int = 1000, **extra: object
) -> tuple[float, list[float]]:
    """The first init_transactions (seconds) and `count` one-record commits (milliseconds)."""
    topic = f"commit-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    producer = tx_producer(broker, "commit", **extra)
    began = time.monotonic()
    producer.init_transactions(60)
    init = time.monotonic() - began
    latencies: list[float] = []
    for i in range(count):
        t0 = time.perf_counter()
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=f"op{i}".encode())
        producer.commit_transaction(30)
        latencies.append((time.perf_counter() - t0) * 1000)
    return init, latencies


def commit_line(label: str, init: float, lat: list[float]) -> str:
    return (
        f"{label}: first init_transactions {init * 1000:.0f} ms; {len(lat)} commits "
        f"p50 {pct(lat, 0.5):.2f} ms p99 {pct(lat, 0.99):.2f} ms max {max(lat):.1f} ms "
        f"mean {statistics.mean(lat):.2f} ms"
    )


def section_commit() -> None:
    say("== commit: one-record transactions on one KafkaBroker (idempotent, acks=all)")
    with brokers(1) as (broker,):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ConfigResource.Type.BROKER, "1")
        configs = admin.describe_configs([resource])[resource].result()
        flush = {k: configs[k].value for k in sorted(configs) if k.startswith("log.flush")}
        say(f"broker flush settings (defaults): {flush}")
        init, lat = commit_latencies(broker, **{"retry.backoff.ms": 100})
        say(commit_line("default flush, librdkafka's retry.backoff.ms (100 ms)", init, lat))
        # After EndTxn the next transaction's AddPartitionsToTxn often meets
        # CONCURRENT_TRANSACTIONS (the coordinator still writes the markers), and librdkafka
        # waits retry.backoff.ms (100 ms) before trying again.
        init, lat = commit_latencies(broker, **{"retry.backoff.ms": 5, "retry.backoff.max.ms": 20})
        say(commit_line("default flush, retry.backoff.ms=5", init, lat))
    extra = {"log.flush.interval.messages": "1"}
    with tempfile.TemporaryDirectory(prefix="probe-kafka-", dir="/var/tmp") as tmp:
        with brokers(1, data_dir=Path(tmp) / "r1", extra_config=extra) as (broker,):
            init, lat = commit_latencies(broker, **{"retry.backoff.ms": 5})
            say(
                commit_line(
                    f"log.flush.interval.messages=1 (fsync per append, {tmp}), retry.backoff.ms=5",
                    init,
                    lat,
                )
            )


# ---------------------------------------------------------------------------------------------
# MirrorMaker 2 helpers


class Stream:
    """A thread writing numbered records to `topic` in transactions of `size` records, until
    `count` records or stop(): what a region node does to its op log, with values a reader can
    check for loss, duplicates and transaction boundaries (b"<stream><tx>:<index>:<size>")."""

    def __init__(
        self, broker: KafkaBroker, topic: str, count: int, size: int = 1, pace_s: float = 0.0
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.count = count
        self.size = size
        self.pace_s = pace_s
        self.written = 0
        self.tag = uuid.uuid4().hex[:4]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Stream:
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = tx_producer(self.broker, "stream")
        producer.init_transactions(60)
        tx = 0
        while self.written < self.count and not self._stop.is_set():
            producer.begin_transaction()
            for i in range(self.size):
                producer.produce(self.topic, f"{self.tag}{tx}:{i}:{self.size}".encode())
            producer.commit_transaction(30)
            self.written += self.size
            tx += 1
            if self.pace_s:
                time.sleep(self.pace_s)

    def join(self, timeout: float = 120.0) -> None:
        self._thread.join(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def count_values(records: list[tuple[int, bytes]]) -> tuple[int, int, int]:
    """(records, distinct values, duplicated values)."""
    values = [value for _, value in records]
    distinct = len(set(values))
    return len(values), distinct, len(values) - distinct


def source_tx_splits(records: list[tuple[int, bytes]]) -> tuple[int, int, int, int]:
    """From a target partition read uncommitted (every record; a gap in the offsets is a
    transaction marker, so the records between two gaps were one target transaction): how many
    target transactions, how many source transactions ended up in more than one, and the
    largest number of records in one target transaction, and how many source transactions."""
    if not records:
        return 0, 0, 0, 0
    groups: list[list[bytes]] = [[]]
    previous = records[0][0] - 1
    for offset, value in records:
        if offset != previous + 1:
            groups.append([])
        groups[-1].append(value)
        previous = offset
    groups = [g for g in groups if g]
    where: dict[str, set[int]] = {}
    for index, group in enumerate(groups):
        for value in group:
            text = value.decode()
            if ":" in text:
                where.setdefault(text.split(":")[0], set()).add(index)
    split = sum(1 for spots in where.values() if len(spots) > 1)
    return len(groups), split, max(len(g) for g in groups), len(where)


class PartialWatcher:
    """A read_committed reader of the target that notes every moment its visible end (an EOF
    event) fell inside a source transaction: what a region node reading the copy would see."""

    def __init__(self, broker: KafkaBroker, topic: str) -> None:
        self.broker = broker
        self.topic = topic
        self.partial_ends = 0
        self.ends = 0
        self.seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PartialWatcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.broker.bootstrap,
                "group.id": "probe-" + uuid.uuid4().hex,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        last: tuple[int, int] | None = None  # (index in tx, tx size) of the last record seen
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and last is not None:
                        self.ends += 1
                        if last[0] != last[1] - 1:
                            self.partial_ends += 1
                    continue
                _, index, size = (msg.value() or b"0:0:1").decode().split(":")
                last = (int(index), int(size))
                self.seen += 1
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def wait_copied(broker: KafkaBroker, topic: str, count: int, timeout: float) -> float | None:
    return wait_until(
        lambda: len(read_all(broker, topic, "read_committed", 5)) >= count, timeout, 0.5
    )


def copy_latency(source: KafkaBroker, target: KafkaBroker, topic: str, n: int = 15) -> str:
    """One committed record at a time on an idle flow: seconds until a reader on the target
    sees it."""
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": "probe-" + uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, end_offset(target, topic))])
    producer = tx_producer(source, "latency")
    producer.init_transactions(60)
    latencies: list[float] = []
    try:
        for _ in range(n):
            time.sleep(1.0)
            mark = f"latency-{uuid.uuid4().hex}".encode()
            began = time.monotonic()
            producer.begin_transaction()
            producer.produce(topic, mark)
            producer.commit_transaction(30)
            while time.monotonic() - began < 30:
                msg = consumer.poll(0.05)
                if msg is not None and msg.error() is None and msg.value() == mark:
                    latencies.append((time.monotonic() - began) * 1000)
                    break
    finally:
        consumer.close()
    if not latencies:
        return "nothing copied"
    return (
        f"{len(latencies)}/{n} copied, p50 {pct(latencies, 0.5):.0f} ms, "
        f"max {max(latencies):.0f} ms"
    )


def offsets_line(records: list[tuple[int, bytes]], limit: int = 12) -> str:
    return ", ".join(f"{o}:{v.decode()[:12]}" for o, v in records[:limit])


def fresh_dir(name: str) -> Path:
    path = LOGS / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def start_mm2(
    name: str, properties: str, work: Path, flows: list[str], clusters: list[str] | None = None
) -> MirrorMaker2:
    mm = MirrorMaker2(name, properties, work_dir=work / name, clusters=clusters)
    mm.start(120)
    waited = mm.wait_tasks(flows, 120) if flows else 0.0
    say(
        f"[{name}] MirrorMaker started in {mm.start_seconds:.1f} s, its source tasks "
        f"{waited:.1f} s later; RSS {mb(mm.rss_bytes())}"
    )
    return mm


# ---------------------------------------------------------------------------------------------
# mm2 (at least once, the generator's config)


def section_mm2() -> None:
    say("== mm2: MirrorMaker 2 from topology.mm2.render (identity naming, read_committed)")
    with brokers(2) as (a, b):
        work = fresh_dir("mm2")
        base = topology_properties([a, b])
        create_topic(b, "r2.oplog")
        mm = start_mm2("all", base, work, ["B->A"])
        try:
            # A topic that appears after MirrorMaker started (refresh.topics.interval.seconds=5)
            began = time.monotonic()
            create_topic(a, "r1.oplog")
            producer = tx_producer(a, "first")
            producer.init_transactions(60)
            producer.begin_transaction()
            producer.produce("r1.oplog", b"c1")
            producer.commit_transaction(30)
            took = wait_copied(b, "r1.oplog", 1, 60)
            say(
                f"topic created after MM2 started: first record on the target after "
                f"{'never' if took is None else f'{time.monotonic() - began:.1f} s'}"
            )

            # committed, aborted, open
            aborting = tx_producer(a, "abort")
            aborting.init_transactions(60)
            aborting.begin_transaction()
            aborting.produce("r1.oplog", b"a1")
            aborting.flush(10)
            aborting.abort_transaction(30)
            opened = tx_producer(a, "open")
            opened.init_transactions(60)
            opened.begin_transaction()
            opened.produce("r1.oplog", b"o1")
            opened.flush(10)
            producer.begin_transaction()
            producer.produce("r1.oplog", b"c2")
            producer.commit_transaction(30)
            time.sleep(8)
            copied = [v.decode() for _, v in read_all(b, "r1.oplog")]
            say(
                f"source: c1 committed, a1 aborted, o1 open, c2 committed after o1 -> target "
                f"(read_uncommitted) has {copied}"
            )
            opened.commit_transaction(30)
            wait_copied(b, "r1.oplog", 3, 30)
            time.sleep(2)
            copied = [v.decode() for _, v in read_all(b, "r1.oplog")]
            say(f"after o1 commits -> target has {copied}")
            src = read_all(a, "r1.oplog")
            dst = read_all(b, "r1.oplog")
            say(
                f"offsets at the source (read_uncommitted): {offsets_line(src)}; end "
                f"{end_offset(a, 'r1.oplog')}"
            )
            say(f"offsets on the target: {offsets_line(dst)}; end {end_offset(b, 'r1.oplog')}")

            say(f"idle copy latency A->B: {copy_latency(a, b, 'r1.oplog')}")
            say(f"MM2 RSS {mb(mm.rss_bytes())}, idle CPU {idle_cpu(mm)}")
            say(f"topics on A: {topics(a)}")
            say(f"topics on B: {topics(b)}")

            # SIGKILL mid-stream, restart
            before = len(read_all(b, "r1.oplog"))
            stream = Stream(a, "r1.oplog", 3000, size=10).start()
            wait_until(lambda: len(read_all(b, "r1.oplog", timeout=3)) > before + 1000, 60, 0.3)
            mm.kill()
            killed_at = stream.written
            began = time.monotonic()
            mm.start(120)
            mm.wait_tasks(["A->B"], 120)
            say(
                f"killed MM2 after {killed_at} of 3000 records written; started again in "
                f"{time.monotonic() - began:.1f} s (tasks running)"
            )
            stream.join()
            total = before + 3000
            took = wait_until(
                lambda: count_values(read_all(b, "r1.oplog", timeout=5))[1] >= total, 120, 1
            )
            records, distinct, dups = count_values(read_all(b, "r1.oplog"))
            say(
                f"after restart: target holds {records} records, {distinct} distinct of "
                f"{total}, {dups} duplicates (copied again at new offsets); all there "
                f"{'never' if took is None else f'{took:.0f} s after the stream ended'}"
            )
        finally:
            mm.stop()
            say(f"[all] log: {mm.log_path}")
            errors = [
                line[:200]
                for line in mm.log_path.read_text(errors="replace").splitlines()
                if " ERROR " in line
            ]
            say(f"[all] ERROR lines: {len(errors)}; first: {errors[:2]}")


# ---------------------------------------------------------------------------------------------
# eos (exactly-once source support)


def section_eos() -> None:
    say("== eos: MirrorMaker 2 with exactly-once source support")
    with brokers(2) as (a, b):
        work = fresh_dir("eos")
        base = topology_properties([a, b])
        create_topic(a, "r1.oplog")
        create_topic(b, "r2.oplog")
        # Without the internal REST server: does a one-node dedicated cluster start?
        no_rest = with_settings(
            base,
            {
                "A.exactly.once.source.support": "enabled",
                "B.exactly.once.source.support": "enabled",
            },
        )
        mm = MirrorMaker2("eos-norest", no_rest, work_dir=work / "eos-norest")
        try:
            mm.start(120)
            try:
                mm.wait_tasks(["A->B"], 60)
                Stream(a, "r1.oplog", 20, size=5).start().join()
                took = wait_copied(b, "r1.oplog", 20, 60)
                eos_tasks = mm.log_since_start().count("ExactlyOnceWorkerSourceTask{id=")
                say(
                    "exactly-once without dedicated.mode.enable.internal.rest: tasks started, "
                    f"20 records copied {'never' if took is None else f'in {took:.1f} s'}, "
                    f"ExactlyOnceWorkerSourceTask in {eos_tasks} log lines"
                )
            except Exception as exc:  # noqa: BLE001 - report what happened
                say(f"exactly-once without the internal REST server: {exc}")
            lines = [
                line[:220]
                for line in mm.log_since_start().splitlines()
                if (" ERROR " in line or " WARN " in line) and "Checkpoint" not in line
            ]
            say(f"  its ERROR/WARN lines (checkpoint ones aside): {lines[:4]}")
        finally:
            mm.stop()
        # Start the next part on a clean slate: the internal topics of this run stay on the
        # clusters (the same group and offsets), so the next copy resumes after these 20.

        # A backlog of multi-record source transactions (70 records each) written before the
        # copy starts, so MirrorMaker's poll batches (max.poll.records 500) cut through them.
        base_count = len(read_all(b, "r1.oplog", "read_committed"))
        Stream(a, "r1.oplog", 2100, size=70).start().join()
        watcher = PartialWatcher(b, "r1.oplog").start()
        settings = exactly_once_settings(["A", "B"], free_port())
        settings.update(fast_start_settings("AB"))
        props = with_settings(base, settings, "exactly-once, fast start (probe)")
        mm = start_mm2("eos", props, work, ["A->B", "B->A"])
        try:
            took = wait_copied(b, "r1.oplog", base_count + 2100, 120)
            say(
                f"backlog of 30 x 70-record transactions copied in "
                f"{'never' if took is None else f'{took:.1f} s'}"
            )
            # steady state: a stream of 70-record transactions while MM2 copies
            Stream(a, "r1.oplog", 2100, size=70, pace_s=0.01).start().join()
            wait_copied(b, "r1.oplog", base_count + 4200, 120)
            time.sleep(2)
            watcher.stop()
            dst = read_all(b, "r1.oplog")
            groups, split, largest, sources = source_tx_splits(dst)
            say(
                f"target r1.oplog: {len(dst)} records in {groups} target transactions "
                f"(largest {largest} records); {split} of {sources} source transactions were split "
                "across target transactions"
            )
            say(
                f"a read_committed reader of the target saw its end {watcher.ends} times, "
                f"{watcher.partial_ends} of them in the middle of a source transaction "
                f"({watcher.seen} records read)"
            )
            say(
                f"offsets on the target (read_uncommitted): end {end_offset(b, 'r1.oplog')}"
                f" for {len(dst)} records; at the source: end {end_offset(a, 'r1.oplog')}"
            )
            say(f"idle copy latency A->B (exactly-once): {copy_latency(a, b, 'r1.oplog')}")
            say(f"MM2 RSS {mb(mm.rss_bytes())}, idle CPU {idle_cpu(mm)}")
            say(f"topics on A: {topics(a)}")
            say(f"topics on B: {topics(b)}")

            # SIGKILL mid-stream, restart
            before_committed = len(read_all(b, "r1.oplog", "read_committed"))
            stream = Stream(a, "r1.oplog", 3000, size=10).start()
            wait_until(
                lambda: len(read_all(b, "r1.oplog", "read_committed", 3)) > before_committed + 1000,
                60,
                0.3,
            )
            mm.kill()
            killed_at = stream.written
            began = time.monotonic()
            mm.start(120)
            mm.wait_tasks(["A->B"], 180)
            say(
                f"killed MM2 after {killed_at} of 3000 records written; started again in "
                f"{time.monotonic() - began:.1f} s (tasks running)"
            )
            stream.join()
            total = before_committed + 3000
            took = wait_until(
                lambda: count_values(read_all(b, "r1.oplog", "read_committed", 5))[1] >= total,
                180,
                1,
            )
            records, distinct, dups = count_values(read_all(b, "r1.oplog", "read_committed"))
            say(
                f"after restart, read_committed: {records} records, {distinct} distinct of "
                f"{total}, {dups} duplicates; all there "
                f"{'never' if took is None else f'{took:.0f} s after the stream ended'}"
            )
            records, distinct, dups = count_values(read_all(b, "r1.oplog"))
            say(
                f"after restart, read_uncommitted: {records} records, {distinct} distinct, "
                f"{dups} duplicates (aborted copies of the killed transaction stay in the log)"
            )
        finally:
            mm.stop()
            errors = [
                line[:200]
                for line in mm.log_path.read_text(errors="replace").splitlines()
                if " ERROR " in line
            ]
            say(f"[eos] ERROR lines: {len(errors)}; first: {errors[:2]}")


# ---------------------------------------------------------------------------------------------
# pause: one process per ordered pair, frozen with SIGSTOP


def after_resume(mm: MirrorMaker2, mark: int) -> str:
    """What the process logged about its group and tasks since byte `mark` of its log."""
    with open(mm.log_path, "rb") as log:
        log.seek(mark)
        text = log.read().decode(errors="replace")
    keys = {
        "rejoins": "Joined group at generation",
        "task starts": "Starting task MirrorSourceConnector",
        "task stops": "Stopping task MirrorSourceConnector",
        "member errors": "UNKNOWN_MEMBER_ID",
        "fencing": "ence zombie",
        "producer fenced": "ProducerFenced",
        "task failed": "Task threw an uncaught and unrecoverable exception",
    }
    return ", ".join(f"{name} {text.count(needle)}" for name, needle in keys.items())


def pause_round(
    a: KafkaBroker,
    b: KafkaBroker,
    flows: dict[str, MirrorMaker2],
    topic: str,
    freeze_s: float,
) -> None:
    """Copy some records, freeze every flow for `freeze_s`, write more, thaw: how long until
    the new records are copied, duplicates, what the worker logged after the thaw."""
    ab = flows["A->B"]
    before = len(read_all(b, topic, "read_committed"))
    dups_before = count_values(read_all(b, topic, "read_committed"))[2]
    Stream(a, topic, 100, size=10).start().join()
    wait_copied(b, topic, before + 100, 60)
    for mm in flows.values():
        mm.pause()
    Stream(a, topic, 100, size=10).start().join()
    time.sleep(freeze_s)
    mark = ab.log_path.stat().st_size
    for mm in flows.values():
        mm.resume()
    took = wait_copied(b, topic, before + 200, 180)
    time.sleep(3)
    records, distinct, dups = count_values(read_all(b, topic, "read_committed"))
    say(
        f"  frozen {freeze_s:.0f} s: records written while frozen copied "
        f"{'never' if took is None else f'{took:.1f} s after the thaw'}; "
        f"{dups - dups_before} new duplicates; A->B logged after the thaw: "
        f"{after_resume(ab, mark)}"
    )


def freeze_mid_stream(
    a: KafkaBroker, b: KafkaBroker, flows: dict[str, MirrorMaker2], topic: str, freeze_s: float
) -> None:
    """Freeze every flow while records flow (as a sync() that freezes the copy while region
    nodes keep writing would): is a target transaction left open (read_committed readers of
    the copy stuck below it), and does the copy go on after the thaw?"""
    ab = flows["A->B"]
    before = len(read_all(b, topic, "read_committed"))
    dups_before = count_values(read_all(b, topic, "read_committed"))[2]
    stream = Stream(a, topic, 1500, size=10, pace_s=0.02).start()
    wait_until(lambda: len(read_all(b, topic, "read_committed", 3)) > before + 300, 60, 0.2)
    for mm in flows.values():
        mm.pause()
    time.sleep(1)
    committed = len(read_all(b, topic, "read_committed"))
    uncommitted = len(read_all(b, topic, "read_uncommitted"))
    time.sleep(freeze_s)
    committed_late = len(read_all(b, topic, "read_committed"))
    stream.join()
    mark = ab.log_path.stat().st_size
    for mm in flows.values():
        mm.resume()
    took = wait_copied(b, topic, before + 1500, 120)
    time.sleep(3)
    records, distinct, dups = count_values(read_all(b, topic, "read_committed"))
    say(
        f"  frozen mid-stream for {freeze_s:.0f} s: target read_committed {committed - before}"
        f" / read_uncommitted {uncommitted - before} new records just after the freeze "
        f"({uncommitted - committed} in a transaction left open), read_committed "
        f"{committed_late - before} at the end of the freeze; after the thaw all copied "
        f"{'never' if took is None else f'in {took:.1f} s'}, {dups - dups_before} new "
        f"duplicates, {records - before} of 1500 visible; logged: {after_resume(ab, mark)}"
    )


def section_pause() -> None:
    say("== pause: one MirrorMaker process per ordered pair (--clusters <target>), SIGSTOP")
    with brokers(2) as (a, b):
        work = fresh_dir("pause")
        create_topic(a, "r1.oplog")
        create_topic(b, "r2.oplog")
        base = with_settings(
            topology_properties([a, b]), fast_start_settings("AB"), "fast start (probe)"
        )
        variants: list[tuple[str, dict[str, str]]] = [
            ("Connect's default worker timeouts (session 10 s, rebalance 60 s)", {}),
            (
                "raised session timeout, short rebalance timeout, offsets flushed every 1 s",
                {
                    f"{alias}.{key}": value
                    for alias in "AB"
                    for key, value in {
                        "session.timeout.ms": "600000",
                        "heartbeat.interval.ms": "3000",
                        "rebalance.timeout.ms": "10000",
                        "offset.flush.interval.ms": "1000",
                    }.items()
                },
            ),
            (
                "exactly-once (no internal REST: one worker per group), raised session timeout",
                {
                    f"{alias}.{key}": value
                    for alias in "AB"
                    for key, value in {
                        "exactly.once.source.support": "enabled",
                        "session.timeout.ms": "600000",
                        "heartbeat.interval.ms": "3000",
                        "rebalance.timeout.ms": "10000",
                        # the broker aborts a transaction left open this long (Connect: 60 s)
                        "producer.transaction.timeout.ms": "10000",
                    }.items()
                },
            ),
        ]
        for label, settings in variants:
            say(f"- {label}: {settings or 'defaults'}")
            flows: dict[str, MirrorMaker2] = {}
            try:
                for source, target in (("A", "B"), ("B", "A")):
                    props = with_settings(
                        flow_properties(base, source, target), settings, "worker (probe)"
                    )
                    name = f"{source}-{target}-{variants.index((label, settings))}"
                    flows[f"{source}->{target}"] = start_mm2(
                        name, props, work, [f"{source}->{target}"], clusters=[target]
                    )
                ab = flows["A->B"]
                time.sleep(5)
                say(f"  A->B process: RSS {mb(ab.rss_bytes())}, idle CPU {idle_cpu(ab, 15)}")
                pause_round(a, b, flows, "r1.oplog", 5)
                pause_round(a, b, flows, "r1.oplog", 25)
                if settings:
                    freeze_mid_stream(a, b, flows, "r1.oplog", 25)
                # SIGKILL and start again: how long until copying goes on, duplicates
                before = len(read_all(b, "r1.oplog", "read_committed"))
                dups_before = count_values(read_all(b, "r1.oplog", "read_committed"))[2]
                stream = Stream(a, "r1.oplog", 2000, size=10, pace_s=0.03).start()
                floor = before + 500

                def past_floor(floor: int = floor) -> bool:
                    return len(read_all(b, "r1.oplog", "read_committed", 3)) > floor

                wait_until(
                    past_floor,
                    60,
                    0.3,
                )
                ab.kill()
                killed_at = stream.written
                began = time.monotonic()
                ab.start(120)
                ab.wait_tasks(["A->B"], 180)
                restarted = time.monotonic() - began
                stream.join()
                took = wait_copied(b, "r1.oplog", before + 2000, 180)
                records, distinct, dups = count_values(read_all(b, "r1.oplog", "read_committed"))
                say(
                    f"  SIGKILL + start: task running after {restarted:.1f} s; all copied "
                    f"{'never' if took is None else f'{took:.1f} s after the stream ended'}; "
                    f"{dups - dups_before} new duplicates (of 2000 records, {killed_at} "
                    "written at the kill)"
                )
            finally:
                for mm in flows.values():
                    mm.stop()


def main(argv: list[str]) -> int:
    sections: dict[str, Callable[[], None]] = {
        "broker": section_broker,
        "commit": section_commit,
        "mm2": section_mm2,
        "eos": section_eos,
        "pause": section_pause,
    }
    chosen = argv or list(sections)
    for name in chosen:
        if name not in sections:
            say(f"unknown section {name!r}: choose from {', '.join(sections)}")
            return 2
    for name in chosen:
        sections[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
