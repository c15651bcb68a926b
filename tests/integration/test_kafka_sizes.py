"""Record sizes and topic configs on the embedded broker, with a real node process (issue 25;
issue 27 item 1).

- The node creates its topics with their role's configs (read back with the admin client) and
  refuses, at start, an op log whose configs would lose data, naming the setting.
- A write whose record is over the topic's limit is refused to its own client before it touches
  the state, while other clients' writes and reads in the same moments all succeed (before, it
  failed the whole batch and sent the region into a 12 s reload); the limit is learned from the
  topic (a topic made like a stock Kafka's, 1 MiB) or is 64 MiB on the node's own topics (the
  70 MB XADD of issue 27).
- A 5 MB value is written, and a snapshot of a state over 10 MB is stored in chunks a stock
  broker takes and boots a restarted node.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from streams.kafka.sizes import TOPIC_MAX_MESSAGE_BYTES
from streams.kafka.topics import describe_topic_configs
from topology.broker import EmbeddedBroker
from topology.ports import free_port

STOCK_LIMIT = 1_048_588
"""Apache Kafka's default message.max.bytes / max.message.bytes."""


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker("sizes")
    b.start()
    try:
        yield b
    finally:
        b.stop()


class Node:
    """One region node process (`python -m streams.node`) on the broker, on a free port."""

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.port = free_port()
        self.path = workdir / "topology.toml"
        self.path.write_text(
            f'[[region]]\nname = "r1"\nid = 1\nbootstrap = "{bootstrap}"\nresp_port = {self.port}\n'
        )
        self.log = workdir / f"node-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams.node", "--topology", str(self.path)]
                + ["--region", "r1", "--log-level", "INFO"],
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 60) -> None:
        probe = self.client(timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
                try:
                    if probe.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)
        finally:
            probe.close()

    def client(self, timeout: float = 60) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=timeout)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def node(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Node]:
    n = Node(broker.bootstrap, tmp_path)
    try:
        yield n
    finally:
        n.stop()


def _create(bootstrap: str, configs: dict[str, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(name, 1, 1, config=config) for name, config in configs.items()]
    for future in admin.create_topics(topics).values():
        future.result(10)


def test_topics_get_their_roles_configs_and_a_data_losing_op_log_is_refused_at_start(
    broker: EmbeddedBroker, node: Node
) -> None:
    # min.insync.replicas from the topology file (one broker: 1; the factor is the broker's).
    node.path.write_text("[topology]\nmin_insync_replicas = 1\n\n" + node.path.read_text())
    node.start()
    node.wait_ready()
    names = ["r1.oplog", "r1.local", "r1.snapshot", "r1.writers"]
    described = describe_topic_configs(broker.bootstrap, names)
    for name in names:
        assert described[name]["min.insync.replicas"] == "1", name
        assert described[name]["retention.ms"] == "-1", name
        assert described[name]["retention.bytes"] == "-1", name
        assert described[name]["cleanup.policy"] == "delete", name
    for name in ("r1.oplog", "r1.local"):
        assert int(described[name]["max.message.bytes"]) == TOPIC_MAX_MESSAGE_BYTES
    # Four snapshots: from the third on, each asks to delete what precedes the one before it;
    # Tansu has no DeleteRecords, which is said once, and snapshots go on being taken.
    client = node.client()
    client.xadd("s", {"f": "v"})
    ids = [client.execute_command("CRDT.SNAPSHOT") for _ in range(4)]
    assert len(set(ids)) == 4
    client.close()
    node.stop()
    assert node.log.read_text().count("older snapshots not deleted") == 1

    # A region whose op log exists with Kafka's 7-day default: refused at start, by name.
    _create(broker.bootstrap, {"r2.oplog": {"retention.ms": "604800000"}, "r2.local": {}})
    text = _refused_start(broker.bootstrap, node.path.parent, "r2")
    assert "r2.oplog" in text and "retention.ms=604800000" in text, text
    # One whose local log takes less than the writer's batches of small records: refused too.
    _create(broker.bootstrap, {"r3.oplog": {}, "r3.local": {"max.message.bytes": "500000"}})
    text = _refused_start(broker.bootstrap, node.path.parent, "r3")
    assert "at most 500000 bytes (max.message.bytes)" in text, text


def _refused_start(bootstrap: str, workdir: Path, region: str) -> str:
    """Start a node of region `region` (id: its number) on the broker and return its output, once
    it exited with an error."""
    path = workdir / f"topology-{region}.toml"
    path.write_text(
        f'[[region]]\nname = "{region}"\nid = {region[1:]}\nbootstrap = "{bootstrap}"\n'
        f"resp_port = {free_port()}\n"
    )
    log = workdir / f"node-{region}.log"
    with open(log, "wb") as out:
        done = subprocess.run(
            [sys.executable, "-m", "streams.node", "--topology", str(path), "--region", region],
            stdout=out,
            stderr=out,
            timeout=60,
        )
    text = log.read_text()
    assert done.returncode != 0, text
    return text


def _others(node: Node, stop: threading.Event, failures: list[str], latencies: list[float]) -> None:
    """Writes and reads of another client, each checked, until `stop`."""
    client = node.client(timeout=30)
    i = 0
    try:
        while not stop.is_set():
            i += 1
            started = time.monotonic()
            try:
                client.xadd(f"other-{threading.get_ident()}", {"i": str(i)})
                client.xrange(f"other-{threading.get_ident()}", count=5)
            except redis.RedisError as exc:
                failures.append(repr(exc))
                return
            latencies.append(time.monotonic() - started)
    finally:
        client.close()


def _refused_while_others_succeed(node: Node, value_len: int, clients: int) -> None:
    stop = threading.Event()
    failures: list[str] = []
    latencies: list[float] = []
    threads = [
        threading.Thread(target=_others, args=(node, stop, failures, latencies))
        for _ in range(clients)
    ]
    for t in threads:
        t.start()
    big = node.client(timeout=120)
    try:
        time.sleep(0.3)
        before = len(latencies)
        with pytest.raises(redis.ResponseError, match="too large for the op log") as refused:
            big.xadd("huge", {"f": b"x" * value_len})
        time.sleep(0.5)  # the others go on after it
        assert len(latencies) > before, "the other clients stopped"
        assert big.exists("huge") == 0  # nothing of it was applied
        assert big.xadd("huge", {"f": "small"})  # its own connection works on
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        big.close()
    assert failures == []
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    print(
        f"{value_len} B refused ({refused.value}); {len(latencies)} other requests,"
        f" p99 {p99:.1f} ms"
    )


def test_a_write_over_a_stock_topics_limit_is_refused_alone_and_others_go_on(
    broker: EmbeddedBroker, node: Node
) -> None:
    stock = {"max.message.bytes": str(STOCK_LIMIT), "retention.ms": "-1"}
    _create(broker.bootstrap, {"r1.oplog": stock, "r1.local": stock})
    node.start()
    node.wait_ready()
    _refused_while_others_succeed(node, 2_000_000, clients=10)
    client = node.client()
    assert client.xadd("fits", {"f": b"y" * 900_000})  # under the learned limit: written
    assert "LOADING" not in node.log.read_text()
    client.close()


def test_5mb_values_and_a_snapshot_over_10mb_work_and_70mb_is_refused_alone(
    broker: EmbeddedBroker, node: Node
) -> None:
    node.start()
    node.wait_ready()
    client = node.client()
    values = [os.urandom(5_000_000) for _ in range(3)]  # 15 MB of state (the format compresses)
    for value in values:
        client.xadd("big", {"v": value})
    _refused_while_others_succeed(node, 70 * 1024 * 1024, clients=20)

    snapshot_id = client.execute_command("CRDT.SNAPSHOT").decode()
    client.close()
    node.stop()
    chunks = _snapshot_records(broker.bootstrap)
    assert len(chunks) >= 10_000_000 // (512 * 1024)  # the state is over 10 MB, in chunks ...
    assert max(chunks) < STOCK_LIMIT // 2  # ... each far under a stock broker's limit

    node.start()
    node.wait_ready()
    client = node.client()
    info = client.execute_command("CRDT.INFO")
    assert snapshot_id.encode() in info if isinstance(info, bytes) else snapshot_id in str(info)
    assert [fields[b"v"] for _id, fields in client.xrange("big")] == values
    client.close()


def _snapshot_records(bootstrap: str) -> list[int]:
    """The size of every record's value in r1.snapshot."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sizes-test",
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition("r1.snapshot", 0, 0)])
    sizes: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                break  # the partition's end
            sizes.append(len(msg.value() or b""))
    finally:
        consumer.close()
    return sizes
