"""A local Apache Kafka cluster: one KRaft node, broker and controller in one JVM.

The same surface as `topology.broker.EmbeddedBroker` (name, port, bootstrap, log_path,
start(timeout), alive(), stop()), plus `kill()` (SIGKILL, for the fault tests) and a data
directory: the node's log dir is formatted once under `data_dir` (`kafka.tools.StorageTool
format`, a cluster id derived from the region's name) and every later start, after stop() or
kill(), serves the same topics, offsets, groups and producer state again. Without `data_dir`
the node runs in a temporary directory that stop() removes (kill() keeps it, so a killed node
can be started again on what it had, as after a crash).

The settings are those of a one-node cluster holding op logs: replication factors of 1 for
Kafka's own topics, records up to the op logs' 64 MiB (`TOPIC_MAX_MESSAGE_BYTES`), nothing
deleted by age, no topic created by a stray produce or fetch, and few partitions for
`__transaction_state` and `__consumer_offsets` (created on first use: 50 partitions each by
default, and the first `init_transactions` waits until every one has a leader).

Ready means an admin client got the cluster's metadata with this broker in it, not only that a
port accepts connections: a KRaft broker listens before it has registered with its controller.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from streams.kafka.sizes import TOPIC_MAX_MESSAGE_BYTES
from topology.broker import BrokerError
from topology.certs import TlsFiles
from topology.jvm import DEFAULT_JVM_OPTS, JavaProcess, kafka_libs, write_log4j2
from topology.ports import free_port, reuse_port

DEFAULT_HEAP_MB = 384
"""-Xmx of a broker: what one 64 MiB record in flight needs with room to spare (a produce
request is read whole into the heap). Measured idle RSS: 190-230 MB (scripts/kafka_probe.py)."""

NODE_ID = 1


def cluster_id(name: str) -> str:
    """A Kafka cluster id (a UUID in URL-safe base64, 22 characters) derived from the region's
    name, so the same region always formats the same cluster. The first byte's top bit is
    cleared so the id never starts with '-' or '_' (a leading '-' reads as an option on the
    format command line, and Kafka's own ids avoid it for that reason)."""
    digest = bytearray(hashlib.sha256(f"streams-kafka-{name}".encode()).digest()[:16])
    digest[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(digest)).decode().rstrip("=")


def server_properties(
    log_dir: Path,
    port: int,
    controller_port: int,
    extra: dict[str, str] | None = None,
    host: str = "127.0.0.1",
    tls: TlsFiles | None = None,
) -> str:
    """The node's server.properties (comments say why for what is not Kafka's default); with
    `tls`, the client listener speaks SSL only (`ssl_properties`)."""
    size = str(TOPIC_MAX_MESSAGE_BYTES)
    props: dict[str, str] = {
        # One combined node; a static voter set (controller.quorum.voters) rather than a
        # dynamic quorum (`format --standalone`), because a dynamic quorum stores the
        # controller's endpoint in the metadata log and a restart on other ports would not
        # find its own voter again.
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{host}:{controller_port}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        # Records as large as the op logs take (64 MiB and framing); a topic's own
        # max.message.bytes still applies, the broker default only for topics without one.
        "message.max.bytes": size,
        "replica.fetch.max.bytes": size,
        "socket.request.max.bytes": str(2 * TOPIC_MAX_MESSAGE_BYTES),
        # One node: every internal topic with one replica, or it can never be created.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        # Few partitions for the coordinators' topics: they are created on first use, and the
        # first init_transactions / group join waits for all of them to have a leader.
        "transaction.state.log.num.partitions": "4",
        "offsets.topic.num.partitions": "4",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        # An op log is the database: nothing is deleted by age or size.
        "log.retention.ms": "-1",
        "log.retention.bytes": "-1",
        # A topic is created on purpose (with its partitions = shards and its configs), never
        # by a client's metadata request for a name that does not exist yet.
        "auto.create.topics.enable": "false",
        # A small node on a shared 2-core machine: few threads, a small cleaner buffer (the
        # cleaner compacts only __consumer_offsets / __transaction_state here; the default
        # allocates 128 MiB of heap for it).
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "num.replica.fetchers": "1",
        # Nothing to wait for in a one-node quorum.
        "controller.quorum.election.backoff.max.ms": "100",
        # A node started again after SIGKILL finds its previous incarnation still registered
        # (the controller restores it from the metadata log with a fresh session, counted from
        # the controller's activation) and gets DUPLICATE_BROKER_REGISTRATION until that
        # session expires: 9 s by default, measured as a 14 s start after a kill against 4 s
        # after a clean stop. Broker and controller share one JVM here, so a short session
        # costs nothing but a stall of 1.5 s, after which the broker is fenced and unfenced
        # at its next heartbeat. 1.5 s is about when the broker has recovered its logs
        # (1.0-1.7 s after activation on 2 cores, three brokers at once); measured, three
        # regions restarted after 1,000,000 XADDs and a SIGKILL of every process, in turn:
        # serving after 8.8-10.8 s with 3 s / 500 ms, 6.5-7.6 s with 1.5 s / 250 ms
        # (docs/durability.md, "After a SIGKILL within 10 s", has every run).
        "broker.heartbeat.interval.ms": "250",
        "broker.session.timeout.ms": "1500",
    }
    if tls is not None:
        props.update(ssl_properties(host, port, controller_port, tls))
    props.update(extra or {})
    return "".join(f"{key}={value}\n" for key, value in props.items())


def ssl_properties(host: str, port: int, controller_port: int, tls: TlsFiles) -> dict[str, str]:
    """The client listener as SSL with client certificates required (mutual TLS: a client
    without a certificate of the CA is refused), key and certificates as PEM files (Kafka 4
    reads PEM key stores: no keytool, no JKS). The controller listener stays plaintext: it is
    bound to loopback and only the node itself speaks to it."""
    return {
        "listeners": f"SSL://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"SSL://{host}:{port}",
        "inter.broker.listener.name": "SSL",
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.bundle),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
        "ssl.client.auth": "required",
    }


def client_tls_settings(tls: TlsFiles) -> dict[str, str]:
    """librdkafka settings of a client of an SSL broker made with `tls` (what a region's
    `[region.kafka]` holds in a local topology over TLS)."""
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls.ca),
        "ssl.certificate.location": str(tls.cert),
        "ssl.key.location": str(tls.key),
    }


log = logging.getLogger(__name__)


def kept_ports(data_dir: Path, host: str, check: bool = True) -> tuple[int | None, int | None]:
    """The client and controller ports a durable node listened on at its last start (its
    server.properties), each if still free (`check`; a node in a network namespace of its own is
    not checked from here), so a restart keeps its addresses. Why it matters beyond the user's
    bootstrap: MirrorMaker 2 keeps each connector's config, bootstrap servers included, in its
    config topics, and after a restart on new ports it first starts the connectors on the old
    addresses; under Kafka 4's default recovery strategy their admin clients rebootstrapped in a
    loop for the life of the process (70,000-80,000 log lines a second, measured; the generated
    config now sets `metadata.recovery.strategy = none` as well, topology/mm2/README.md)."""
    try:
        text = (data_dir / "server.properties").read_text()
    except OSError:
        return None, None
    listeners = next(
        (line.partition("=")[2] for line in text.splitlines() if line.startswith("listeners=")), ""
    )
    client: int | None = None
    controller: int | None = None
    for listener in filter(None, listeners.split(",")):
        name, _, address = listener.partition("://")
        port_text = address.rpartition(":")[2]
        if not port_text.isdigit():
            continue
        if name == "CONTROLLER":
            controller = int(port_text)
        else:
            client = int(port_text)
    return (
        _still_free(client, data_dir, host, check),
        _still_free(controller, data_dir, host, check),
    )


def _still_free(port: int | None, data_dir: Path, host: str, check: bool) -> int | None:
    if port is None or not check or reuse_port(port, host):
        return port
    log.warning(
        "Kafka in %s: port %d of its last start is taken, a new one is used (the topology"
        " file and MirrorMaker 2's config name it)",
        data_dir,
        port,
    )
    return None


class KafkaBroker:
    """One Apache Kafka node (KRaft, broker + controller) on free loopback ports."""

    def __init__(
        self,
        name: str,
        port: int | None = None,
        data_dir: str | Path | None = None,
        heap_mb: int = DEFAULT_HEAP_MB,
        controller_port: int | None = None,
        extra_config: dict[str, str] | None = None,
        log_level: str = "INFO",
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        host: str = "127.0.0.1",
        netns: str | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        """`data_dir`: where the node keeps its log dir, config and log (formatted on the first
        start, served again on later ones); None for a temporary directory removed by stop().
        `extra_config`: server.properties entries overriding ours (e.g. log.flush.*). `host`:
        the address it listens on and advertises; `netns`: a network namespace to run it in
        (a test host of its own: the fault tests cut its link); `tls`: serve clients over SSL
        only, with these certificates (`topology.certs`)."""
        self.name = name
        self.tls = tls
        self.host = host
        self.netns = netns
        kept: tuple[int | None, int | None] = (None, None)
        if port is None and controller_port is None and data_dir is not None:
            kept = kept_ports(Path(data_dir), host, check=netns is None)
        self.port = port or kept[0] or free_port()
        self.controller_port = controller_port or kept[1] or free_port()
        self.heap_mb = heap_mb
        self.extra_config = dict(extra_config or {})
        self.log_level = log_level
        self.jvm_opts = list(jvm_opts)
        self.ephemeral = data_dir is None
        self._dir: Path | None = None if data_dir is None else Path(data_dir)
        self._log = (
            Path(tempfile.gettempdir()) / f"streams-kafka-{name}-{self.port}.log"
            if data_dir is None
            else Path(data_dir) / "server.log"
        )
        self._java: JavaProcess | None = None
        self.start_seconds: float | None = None
        """How long the last start() took, from launching the JVM to ready."""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self._log

    @property
    def data_dir(self) -> Path | None:
        """The node's directory (a temporary one while an ephemeral node exists)."""
        return self._dir

    @property
    def cluster_id(self) -> str:
        return cluster_id(self.name)

    @property
    def pid(self) -> int | None:
        return self._java.pid if self._java is not None else None

    def start(self, timeout: float = 60.0) -> None:
        if self.alive():
            return
        kafka_libs()  # fail with the set-up hint before creating anything
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix=f"streams-kafka-{self.name}-"))
        base = self._dir
        base.mkdir(parents=True, exist_ok=True)
        log_dir = base / "kraft"
        config = base / "server.properties"
        config.write_text(
            server_properties(
                log_dir, self.port, self.controller_port, self.extra_config, self.host, self.tls
            )
        )
        log4j2 = base / "log4j2.xml"
        write_log4j2(log4j2, self._log, self.log_level)
        began = time.monotonic()
        if not (log_dir / "meta.properties").is_file():
            self._format(config, log4j2)
        self._java = JavaProcess(
            "kafka.Kafka",
            [str(config)],
            self._log,
            log4j2,
            self.heap_mb,
            self.jvm_opts,
            prefix=["ip", "netns", "exec", self.netns] if self.netns else (),
        )
        self._java.start()
        try:
            self._wait_ready(began + timeout)
        except BrokerError:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - began

    def _format(self, config: Path, log4j2: Path) -> None:
        """`kafka-storage format` for this node: once per data directory (the cluster id and
        the node id are written to meta.properties; formatting again would refuse)."""
        fmt = JavaProcess(
            "kafka.tools.StorageTool",
            ["format", "--config", str(config), "--cluster-id", self.cluster_id],
            self._log,
            log4j2,
            heap_mb=128,
        )
        cmd = fmt.command()
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        fmt.keep_archive()
        with open(self._log, "a") as log:
            log.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise BrokerError(
                f"formatting Kafka's log dir for {self.name} failed "
                f"(exit {result.returncode}): {(result.stderr or result.stdout).strip()[-500:]}"
            )

    def _wait_ready(self, deadline: float) -> None:
        """Until an admin client sees this broker in the cluster's metadata (registered with
        its controller and unfenced), or the JVM exits, or the deadline passes."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {
                **(client_tls_settings(self.tls) if self.tls is not None else {}),
                "bootstrap.servers": self.bootstrap,
                "socket.connection.setup.timeout.ms": 1000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "log_level": 2,  # connection refused while the JVM starts is expected
            }
        )
        while True:
            java = self._java
            if java is None or not java.alive():
                code = java.exit_code() if java is not None else None
                raise BrokerError(f"Kafka {self.name} exited ({code}) at start; see {self._log}")
            try:
                metadata = admin.list_topics(timeout=1.0)
                if NODE_ID in metadata.brokers:
                    admin.describe_cluster(request_timeout=1.0).result()
                    return
            except Exception:  # noqa: BLE001 - not up yet: KafkaException of every kind
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"Kafka {self.name} was not ready in time; see {self._log}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self._java is not None and self._java.alive()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: a controlled shutdown (logs flushed and a clean-shutdown marker written, so
        the next start skips log recovery); SIGKILL if it takes longer than `timeout`. An
        ephemeral node's directory goes with it."""
        java, self._java = self._java, None
        if java is not None:
            java.stop(timeout)
        self._drop_ephemeral_dir()

    def discard(self) -> None:
        """The end of an ephemeral node (`JavaProcess.discard`: SIGKILL, no controlled
        shutdown to wait for), its directory with it."""
        java, self._java = self._java, None
        if java is not None:
            java.discard()
        self._drop_ephemeral_dir()

    def _drop_ephemeral_dir(self) -> None:
        if self.ephemeral and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def kill(self) -> None:
        """SIGKILL, as a crash: the data stays (ephemeral too, until stop())."""
        java, self._java = self._java, None
        if java is not None:
            java.kill()

    def rss_bytes(self) -> int | None:
        return self._java.rss_bytes() if self._java is not None else None

    def cpu_seconds(self) -> float | None:
        return self._java.cpu_seconds() if self._java is not None else None
