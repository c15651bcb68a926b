"""The mirror against real (embedded Tansu) brokers: copies, naming, resume, pause, no loops.

Three brokers (clusters A, B, C) live for the whole module and are always stopped. Tests share
them, so each test uses its own region names (hence its own topics).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from support import wait_until

from streams.config import RegionConfig, Topology, dump
from streams.kafka.topics import ensure_topics, oplog_topic
from topology.broker import EmbeddedBroker
from topology.mirror import (
    MIRROR_OFFSET_HEADER,
    MIRROR_SOURCE_HEADER,
    Mirror,
    MirrorError,
    MirrorSet,
)
from topology.ports import free_port

REPO = Path(__file__).resolve().parents[2]
Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    def header(self, name: str) -> bytes | None:
        found = [value for key, value in self.headers if key == name]
        return found[-1] if found else None

    def without_mirror_headers(self) -> tuple[bytes | None, bytes | None, Headers]:
        kept = [
            (k, v) for k, v in self.headers if k not in (MIRROR_SOURCE_HEADER, MIRROR_OFFSET_HEADER)
        ]
        return (self.key, self.value, kept)


@dataclass(frozen=True)
class Clusters:
    a: str
    b: str
    c: str


@pytest.fixture(scope="module")
def clusters() -> Iterator[Clusters]:
    brokers = [EmbeddedBroker(name) for name in ("mirror-a", "mirror-b", "mirror-c")]
    try:
        for broker in brokers:
            broker.start()
        yield Clusters(*(broker.bootstrap for broker in brokers))
    finally:
        for broker in brokers:
            broker.stop()


_names = itertools.count(1)


@pytest.fixture
def region() -> Callable[[], str]:
    """Fresh region names per test: the brokers are shared by the whole module."""
    tag = uuid.uuid4().hex[:6]
    return lambda: f"t{tag}x{next(_names)}"


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    start: int = 0,
    per_txn: int = 7,
    key_prefix: bytes = b"k",
    partition: int = 0,
    partitions: int = 1,
    value: Callable[[int], bytes] = lambda i: b"value-%d" % i,
) -> None:
    """Append `count` records to `partition` of `topic` (which has `partitions`: created so if
    missing) in transactions, like a region node's writer does."""
    ensure_topics(bootstrap, [topic], partitions=partitions)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"test-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(10)
    for base in range(start, start + count, per_txn):
        producer.begin_transaction()
        for i in range(base, min(base + per_txn, start + count)):
            producer.produce(
                topic,
                key=key_prefix + b"%d" % (i % 5),
                value=value(i),
                partition=partition,
                headers=[("origin", b"1"), ("seq", b"%d" % (i + 1)), ("empty", None)],
            )
        producer.commit_transaction(10)
    producer.flush(10)


def read_all(bootstrap: str, topic: str, timeout: float = 15.0, partition: int = 0) -> list[Record]:
    """Every committed record of `partition` of `topic`, up to partition EOF."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,  # Tansu holds an empty fetch this long: EOF comes after it
        }
    )
    try:
        metadata = consumer.list_topics(timeout=10)
        if topic not in metadata.topics:
            return []
        consumer.assign([TopicPartition(topic, partition, 0)])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return records
                raise AssertionError(f"reading {topic}: {error}")
            offset = message.offset()
            assert offset is not None
            raw = message.headers() or []
            pairs = list(raw.items()) if isinstance(raw, dict) else raw
            headers = [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs]
            timestamp = message.timestamp()[1]
            records.append(Record(offset, message.key(), message.value(), headers, timestamp))
        raise AssertionError(f"reading {topic} on {bootstrap}: no EOF in {timeout}s")
    finally:
        consumer.close()


def partitions_on(bootstrap: str) -> dict[str, int]:
    """Every topic on the cluster and its partition count."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader"})
    try:
        topics = consumer.list_topics(timeout=10).topics
        return {name: len(topic.partitions) for name, topic in topics.items()}
    finally:
        consumer.close()


def topics_on(bootstrap: str) -> set[str]:
    return set(partitions_on(bootstrap))


def holds_for(predicate: Callable[[], bool], seconds: float) -> bool:
    """Whether `predicate` holds throughout the next `seconds` (polled): for the few checks
    whose point is that nothing happens, bounded and short."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(0.02)
    return predicate()


def assert_faithful_copy(source: list[Record], target: list[Record], alias: str) -> None:
    """Same records in the same order, each once, with the mirror headers naming its source."""
    assert [t.without_mirror_headers() for t in target] == [
        s.without_mirror_headers() for s in source
    ]
    assert [t.header(MIRROR_OFFSET_HEADER) for t in target] == [
        str(s.offset).encode() for s in source
    ]
    assert {t.header(MIRROR_SOURCE_HEADER) for t in target} <= {alias.encode()}
    assert [t.timestamp for t in target] == [s.timestamp for s in source]


def assert_copied(clusters: Clusters, topic: str, partitions: int) -> None:
    """`topic` on B has `partitions` partitions, each a faithful copy of the same partition of
    `topic` on A (same records, in order, each once)."""
    assert partitions_on(clusters.b)[topic] == partitions
    for partition in range(partitions):
        source = read_all(clusters.a, topic, partition=partition)
        assert_faithful_copy(source, read_all(clusters.b, topic, partition=partition), "A")


# -- copying --------------------------------------------------------------------------------------


@pytest.mark.parametrize("naming", ["identity", "default"])
def test_copy_available_is_faithful(
    clusters: Clusters, region: Callable[[], str], naming: str
) -> None:
    name = region()
    topic = oplog_topic(name)
    produce(clusters.a, topic, 50)
    source = read_all(clusters.a, topic)
    assert len(source) == 50
    # Transactions leave control records between batches: source offsets have gaps.
    assert source[-1].offset > 49

    with Mirror(clusters.a, clusters.b, name, "A", naming) as mirror:
        assert mirror.copy_available() == 50
        assert mirror.copied == 50
        assert mirror.copy_available() == 0  # caught up: EOF again, nothing new

    target_topic = topic if naming == "identity" else f"A.{topic}"
    assert mirror.target_topic == target_topic
    assert_faithful_copy(source, read_all(clusters.b, target_topic), "A")
    if naming == "default":
        assert topic not in topics_on(clusters.b)


def test_incremental_copies_and_keys_none(clusters: Clusters, region: Callable[[], str]) -> None:
    name = region()
    topic = oplog_topic(name)
    ensure_topics(clusters.a, [topic])
    with Mirror(clusters.a, clusters.b, name, "A") as mirror:
        assert mirror.copy_available() == 0  # empty source topic
        produce(clusters.a, topic, 3)
        plain = Producer({"bootstrap.servers": clusters.a, "enable.idempotence": True})
        plain.produce(topic, value=None, key=None, partition=0)  # a tombstone-shaped record
        plain.produce(topic, value=b"", key=b"", partition=0)
        plain.flush(10)
        assert mirror.copy_available() == 5
        produce(clusters.a, topic, 4, start=3)
        assert mirror.copy_available() == 4
    assert_faithful_copy(read_all(clusters.a, topic), read_all(clusters.b, topic), "A")


def test_missing_source_topic_is_not_an_error(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    name = region()
    with Mirror(clusters.a, clusters.b, name, "A") as mirror:
        assert mirror.copy_available(timeout=5) == 0
        mirror.start()
        # The background mirror keeps looking for the topic, quietly.
        assert holds_for(lambda: mirror.running and mirror.error is None, 0.3)
        assert oplog_topic(name) not in topics_on(clusters.b)
        produce(clusters.a, oplog_topic(name), 5)  # the region node starts later
        wait_until(lambda: mirror.copied == 5, timeout=20)
        assert mirror.error is None
    assert len(read_all(clusters.b, oplog_topic(name))) == 5


# -- resume ---------------------------------------------------------------------------------------


def test_resume_after_restart_loses_nothing_and_copies_nothing_twice(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    name = region()
    topic = oplog_topic(name)
    produce(clusters.a, topic, 30)
    first = Mirror(clusters.a, clusters.b, name, "A")
    assert first.copy_available() == 30
    produce(clusters.a, topic, 20, start=30)
    assert first.copy_available() == 20  # the target now holds two producer batches
    first.stop()

    produce(clusters.a, topic, 25, start=50)
    with Mirror(clusters.a, clusters.b, name, "A") as second:
        assert second.copy_available() == 25
    with Mirror(clusters.a, clusters.b, name, "A") as third:
        assert third.copy_available() == 0
    assert_faithful_copy(read_all(clusters.a, topic), read_all(clusters.b, topic), "A")


@pytest.mark.parametrize("partitions", [1, 4])
def test_restart_mid_stream_with_background_threads(
    clusters: Clusters, region: Callable[[], str], partitions: int
) -> None:
    """A background mirror stopped while a writer appends (to every partition in each
    transaction) and a new one started: between them, every record once, in order, in its
    partition."""
    name = region()
    topic = oplog_topic(name)
    ensure_topics(clusters.a, [topic], partitions=partitions)
    transactions, per_partition = 80, 8 // partitions
    total = transactions * partitions * per_partition
    done = threading.Event()

    def writer() -> None:
        producer = Producer(
            {"bootstrap.servers": clusters.a, "transactional.id": f"test-{uuid.uuid4().hex}"}
        )
        producer.init_transactions(10)
        for txn in range(transactions):
            producer.begin_transaction()
            for partition in range(partitions):
                for i in range(per_partition):
                    value = b"p%d-t%d-%d" % (partition, txn, i)
                    producer.produce(topic, key=b"k", value=value, partition=partition)
            producer.commit_transaction(10)
            time.sleep(0.02)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        first = Mirror(clusters.a, clusters.b, name, "A")
        first.start()
        wait_until(lambda: first.copied >= total // 6, timeout=30)
        first.stop()  # mid-stream: the writer keeps going
        stopped_at = first.copied
        assert not done.is_set(), "the writer finished before the restart: make it longer"
        second = Mirror(clusters.a, clusters.b, name, "A")
        second.start()
        assert done.wait(60)
        wait_until(lambda: stopped_at + second.copied >= total, timeout=30)
        second.stop()
    finally:
        thread.join()
    assert first.error is None and second.error is None
    assert stopped_at + second.copied == total
    assert_copied(clusters, topic, partitions)


def forge_last_copy(bootstrap: str, topic: str, offset: bytes, value: bytes) -> None:
    """Append a record that claims to be the copy of source offset `offset` from cluster A."""
    ensure_topics(bootstrap, [topic])
    forged = Producer({"bootstrap.servers": bootstrap})
    forged.produce(
        topic,
        key=b"k0",
        value=value,
        partition=0,
        headers=[(MIRROR_SOURCE_HEADER, b"A"), (MIRROR_OFFSET_HEADER, offset)],
    )
    forged.flush(10)


@pytest.mark.parametrize(
    ("offset", "value", "refusal"),
    [(b"100", b"old", "source log was recreated"), (b"0", b"changed", "differs from its copy")],
    ids=["past-the-source-end", "another-record"],
)
def test_resume_refuses_a_recreated_source(
    clusters: Clusters, region: Callable[[], str], offset: bytes, value: bytes, refusal: str
) -> None:
    """The target says "copied up to offset 100" but the source log is new and shorter (a
    memory-only broker restarted): resuming at 101 would silently skip the new records. Or the
    source record at the copy's offset is another one: the log was recreated all the same."""
    name = region()
    topic = oplog_topic(name)
    produce(clusters.a, topic, 3)
    forge_last_copy(clusters.b, topic, offset, value)
    with (
        Mirror(clusters.a, clusters.b, name, "A") as mirror,
        pytest.raises(MirrorError, match=refusal),
    ):
        mirror.copy_available(timeout=20)


def crash_and_restart(broker: EmbeddedBroker) -> None:
    """Kill the broker (SIGKILL) and start it again on the same port, empty.

    A crash is the realistic failure; and Tansu ignores SIGTERM while clients are connected, so
    `stop()` would spend its 5 s grace period before killing anyway.
    """
    proc = getattr(broker, "_proc", None)
    if isinstance(proc, subprocess.Popen):
        proc.kill()
        proc.wait()
    broker.stop()
    broker.start()


def test_broker_restarts(region: Callable[[], str]) -> None:
    """Tansu is memory-only: a restarted broker comes back empty under the same address.
    A restarted target is refilled from the start; a restarted source is a clear error."""
    source, target = EmbeddedBroker("mirror-restart-src"), EmbeddedBroker("mirror-restart-dst")
    try:
        source.start()
        target.start()
        name = region()
        topic = oplog_topic(name)
        produce(source.bootstrap, topic, 20)
        with Mirror(source.bootstrap, target.bootstrap, name, "A") as mirror:
            mirror.start()
            wait_until(lambda: mirror.copied == 20, timeout=20)
            crash_and_restart(target)
            produce(source.bootstrap, topic, 5, start=20)
            wait_until(lambda: mirror.copied == 20 + 25, timeout=30)
            assert_faithful_copy(
                read_all(source.bootstrap, topic), read_all(target.bootstrap, topic), "A"
            )
            crash_and_restart(source)
            produce(source.bootstrap, topic, 2)
            wait_until(lambda: mirror.error is not None, timeout=20)
            assert isinstance(mirror.error, MirrorError)
            assert "was deleted or recreated" in str(mirror.error)
            wait_until(lambda: not mirror.running, timeout=5)  # it stops for good
        with (
            Mirror(source.bootstrap, target.bootstrap, name, "A") as fresh,
            pytest.raises(MirrorError, match="source log ends at offset"),
        ):
            fresh.copy_available()
    finally:
        source.stop()
        target.stop()


# -- pause ----------------------------------------------------------------------------------------


def test_paused_mirror_copies_nothing(clusters: Clusters, region: Callable[[], str]) -> None:
    name = region()
    topic = oplog_topic(name)
    produce(clusters.a, topic, 5)
    with Mirror(clusters.a, clusters.b, name, "A") as mirror:
        mirror.start()
        wait_until(lambda: mirror.copied == 5, timeout=20)
        mirror.pause()
        assert mirror.paused and mirror.running
        produce(clusters.a, topic, 10, start=5)  # committed: a running mirror would copy it
        # Running, it copies within its active fetch wait (10 ms) and a poll; paused, nothing.
        assert holds_for(lambda: mirror.copied == 5, 1.0)
        assert len(read_all(clusters.b, topic)) == 5
        mirror.resume()
        wait_until(lambda: mirror.copied == 15, timeout=20)
        # An explicit copy works while paused: that is how a paused topology syncs on demand.
        mirror.pause()
        produce(clusters.a, topic, 2, start=15)
        assert mirror.copy_available() == 2
        assert mirror.copied == 17
    # Nothing twice: the paused thread did not copy again what the explicit copy did.
    assert_faithful_copy(read_all(clusters.a, topic), read_all(clusters.b, topic), "A")


# -- sets of mirrors: no loops --------------------------------------------------------------------


def three_regions(clusters: Clusters, names: list[str], naming: str) -> Topology:
    bootstraps = [clusters.a, clusters.b, clusters.c]
    return Topology(
        tuple(
            RegionConfig(name, i + 1, bootstraps[i], free_port(), alias="ABC"[i])
            for i, name in enumerate(names)
        ),
        mirror_naming=naming,
    )


@pytest.mark.parametrize("naming", ["identity", "default"])
def test_mirror_set_never_mirrors_a_mirror(
    clusters: Clusters, region: Callable[[], str], naming: str
) -> None:
    names = [region(), region(), region()]
    topology = three_regions(clusters, names, naming)
    bootstraps = {"A": clusters.a, "B": clusters.b, "C": clusters.c}
    counts = {names[0]: 11, names[1]: 12, names[2]: 13}
    for cfg in topology.regions:
        produce(cfg.bootstrap, oplog_topic(cfg.name), counts[cfg.name])
    with MirrorSet(topology) as mirrors:
        assert len(mirrors.mirrors) == 6
        assert mirrors.copy_among(None) == 2 * sum(counts.values())
        # Everything is where it belongs; a second pass finds nothing (no copy of a copy).
        assert mirrors.copy_among(None) == 0
    for cfg in topology.regions:
        source = read_all(cfg.bootstrap, oplog_topic(cfg.name))
        for alias, bootstrap in bootstraps.items():
            if alias == cfg.alias:
                continue
            name = (
                oplog_topic(cfg.name)
                if naming == "identity"
                else f"{cfg.alias}.{oplog_topic(cfg.name)}"
            )
            assert_faithful_copy(source, read_all(bootstrap, name), cfg.alias)
    if naming == "default":
        # A copy of a copy would be named B.A.<r1>.oplog on C (and so on).
        for bootstrap in bootstraps.values():
            assert not any(t.count(".") > 2 and t.endswith(".oplog") for t in topics_on(bootstrap))


def test_mirror_refuses_to_read_a_mirrored_topic(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    """`r2.oplog` sits mirrored on A (identity naming): a mirror misconfigured to take it from A
    (not r2's home) refuses instead of copying a copy."""
    home, other = region(), region()
    produce(clusters.b, oplog_topic(home), 4)
    with Mirror(clusters.b, clusters.a, home, "B") as to_a:
        assert to_a.copy_available() == 4
    with (
        Mirror(clusters.a, clusters.c, home, "A") as wrong,
        pytest.raises(MirrorError, match="mirrored copy"),
    ):
        wrong.copy_available()
    assert read_all(clusters.c, oplog_topic(home)) == []
    # And a correct mirror of another region on A never touches the mirrored topic.
    produce(clusters.a, oplog_topic(other), 2)
    with Mirror(clusters.a, clusters.c, other, "A") as right:
        assert right.copy_available() == 2
        assert right.source_topic == oplog_topic(other)


def test_copy_among_a_subset(clusters: Clusters, region: Callable[[], str]) -> None:
    names = [region(), region(), region()]
    topology = three_regions(clusters, names, "identity")
    for cfg in topology.regions:
        produce(cfg.bootstrap, oplog_topic(cfg.name), 3)
    with MirrorSet(topology) as mirrors:
        mirrors.pause()
        assert mirrors.copy_among(names[:2]) == 6  # r1 -> r2 and r2 -> r1 only
        assert read_all(clusters.c, oplog_topic(names[0])) == []
        assert len(read_all(clusters.b, oplog_topic(names[0]))) == 3
        assert mirrors.copy_among(None) == 12  # the four pairs that involve the third region
        with pytest.raises(KeyError, match="no region named"):
            mirrors.copy_among(["nope"])


def test_cli_once(clusters: Clusters, region: Callable[[], str], tmp_path: Path) -> None:
    names = [region(), region(), region()]
    topology = three_regions(clusters, names, "default")
    produce(clusters.a, oplog_topic(names[0]), 4)
    path = tmp_path / "topology.toml"
    dump(topology, path)
    result = subprocess.run(
        [sys.executable, "-m", "topology.mirror", "--topology", str(path), "--once"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"{names[0]} -> {names[1]}: copied 4" in result.stdout
    assert f"{names[1]} -> {names[0]}: copied 0" in result.stdout
    assert len(read_all(clusters.c, f"A.{oplog_topic(names[0])}")) == 4


def test_cli_runs_until_interrupted(
    clusters: Clusters, region: Callable[[], str], tmp_path: Path
) -> None:
    names = [region(), region()]
    topology = Topology(
        (
            RegionConfig(names[0], 1, clusters.a, free_port(), alias="A"),
            RegionConfig(names[1], 2, clusters.b, free_port(), alias="B"),
        )
    )
    path = tmp_path / "topology.toml"
    dump(topology, path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "topology.mirror", "--topology", str(path), "--interval", "0.2"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        produce(clusters.a, oplog_topic(names[0]), 6)
        wait_until(lambda: len(read_all(clusters.b, oplog_topic(names[0]))) == 6, timeout=20)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"{names[0]} -> {names[1]}: 6 copied (+6)" in out


def test_a_record_carrying_a_mirror_header_is_skipped_and_reported_not_fatal(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    """A record some producer wrote into a region's own log with a `mirror.source` header is
    not the region's: the mirror skips it, counts it, and goes on copying what follows (it
    used to stop for good, the only sign being lag that grew)."""
    name = region()
    topic = oplog_topic(name)
    produce(clusters.a, topic, 3)
    stray = Producer({"bootstrap.servers": clusters.a})
    stray.produce(
        topic, key=b"x", value=b"stray", partition=0, headers=[(MIRROR_SOURCE_HEADER, b"Z")]
    )
    stray.flush(10)
    produce(clusters.a, topic, 4, start=3)
    with Mirror(clusters.a, clusters.b, name, "A") as mirror:
        mirror.copy_available(timeout=20)
        assert mirror.error is None
        assert mirror.skipped == 1
    copies = read_all(clusters.b, topic)
    assert [c.value for c in copies] == [b"value-%d" % i for i in range(7)]
