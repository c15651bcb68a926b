"""TLS everywhere a region's data travels, on the stack users deploy: two Apache Kafka clusters
serving SSL only (client certificates required), MirrorMaker 2 copying between them over SSL,
nodes serving RESP over TLS only (`LocalTopology(..., tls=True)`, certificates made by
`topology.certs`). One topology for the module (JVMs take seconds to start)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from confluent_kafka.admin import AdminClient

from apache_kafka.conftest import require_kafka
from topology.certs import make_ca, make_certificate
from topology.local import LocalTopology


@pytest.fixture(scope="module")
def topo() -> Iterator[LocalTopology]:
    require_kafka()
    with LocalTopology(regions=2, broker="kafka", mirror="mm2", tls=True) as started:
        yield started


def test_an_xadd_over_tls_in_r1_is_read_over_tls_in_r2(topo: LocalTopology) -> None:
    assert topo.tls_ca is not None and Path(topo.tls_ca).is_file()
    entry = topo.client(1).xadd("orders", {"id": "42"})
    topo.sync(timeout=60)
    assert topo.client(2).xrange("orders") == [(entry, {b"id": b"42"})]
    config = topo.topology_path.read_text()
    assert "tls_port" in config and '"security.protocol" = "SSL"' in config
    mm2 = list(topo.workdir.rglob("*.properties"))
    assert any("c1.security.protocol = SSL" in p.read_text() for p in mm2), mm2


def test_plaintext_is_refused_on_tls_and_ssl_ports(topo: LocalTopology) -> None:
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=topo.ports[1], socket_timeout=3).ping()
    began = time.monotonic()
    admin = AdminClient(
        {"bootstrap.servers": topo.bootstrap[1], "socket.connection.setup.timeout.ms": 2000}
    )
    with pytest.raises(Exception, match="(?i)transport|timed out"):
        admin.list_topics(timeout=4)
    assert time.monotonic() - began < 10
    # a raw TCP client speaking Kafka's plaintext framing gets no answer but a closed socket
    with socket.create_connection(("127.0.0.1", topo.brokers[1].port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)
        sock.settimeout(5)
        try:
            reply = sock.recv(64)
        except (ConnectionResetError, TimeoutError):
            reply = b""
        assert not reply.startswith(b"\x00\x00")


def test_a_wrong_ca_is_a_clear_error_within_seconds(topo: LocalTopology, tmp_path: Path) -> None:
    ca, ca_key = make_ca(tmp_path, "not the topology's CA")
    with pytest.raises(redis.ConnectionError, match="(?i)certificate verify failed"):
        redis.Redis(port=topo.ports[2], ssl=True, ssl_ca_certs=str(ca), socket_timeout=5).ping()
    # a Kafka tool with a topology file naming the wrong CA: one line within seconds
    config = topo.topology_path.read_text().replace(str(topo.tls_ca), str(ca))
    wrong = tmp_path / "wrong-ca.toml"
    wrong.write_text(config)
    began = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "streams.cli",
            "log",
            "--topology",
            str(wrong),
            "--region",
            "r1",
            "--topic",
            "r1.oplog",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - began
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "certificate is not trusted" in last, result.stderr
    assert took < 15, took
    # a node whose [region.kafka] names the wrong CA: refused at its start, in one line
    began = time.monotonic()
    node = subprocess.run(
        [sys.executable, "-m", "streams.node", "--topology", str(wrong), "--region", "r1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert node.returncode == 1, node.stderr
    assert "certificate is not trusted" in node.stderr.strip().splitlines()[-1], node.stderr
    assert time.monotonic() - began < 15
    # and an untrusted client certificate is refused by the broker
    cert, key = make_certificate(tmp_path, ca, ca_key, "intruder")
    settings = dict(topo.topology.regions[0].kafka) if topo.topology else {}
    settings.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    admin = AdminClient({**settings, "bootstrap.servers": topo.bootstrap[1]})
    with pytest.raises(Exception, match="(?i)transport|ssl|handshake|timed out"):
        admin.list_topics(timeout=5)
