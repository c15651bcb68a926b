"""A durable Apache Kafka node started again keeps the ports of its last start (its
server.properties says which), unless something else listens there now; real sockets, no
broker."""

from __future__ import annotations

import socket
from pathlib import Path

from topology.apache_kafka import KafkaBroker, kept_ports, server_properties
from topology.ports import free_port


def last_start(data_dir: Path, port: int, controller_port: int) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    text = server_properties(data_dir / "kraft", port, controller_port)
    (data_dir / "server.properties").write_text(text)


def test_a_restarted_node_listens_on_the_ports_of_its_last_start(tmp_path: Path) -> None:
    port, controller = free_port(), free_port()
    last_start(tmp_path, port, controller)
    broker = KafkaBroker("r1", data_dir=tmp_path)
    assert (broker.port, broker.controller_port) == (port, controller)
    assert broker.bootstrap == f"127.0.0.1:{port}"


def test_a_port_taken_since_is_replaced_and_the_other_kept(tmp_path: Path) -> None:
    port, controller = free_port(), free_port()
    last_start(tmp_path, port, controller)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        broker = KafkaBroker("r1", data_dir=tmp_path)
    assert broker.port != port
    assert broker.controller_port == controller


def test_a_first_start_or_an_unreadable_config_gets_free_ports(tmp_path: Path) -> None:
    assert kept_ports(tmp_path, "127.0.0.1") == (None, None)
    (tmp_path / "server.properties").write_text("listeners=PLAINTEXT://127.0.0.1:notaport\n")
    assert kept_ports(tmp_path, "127.0.0.1") == (None, None)
    assert KafkaBroker("r1", data_dir=tmp_path).port > 0


def test_ports_given_by_the_caller_win_over_the_last_start(tmp_path: Path) -> None:
    last_start(tmp_path, free_port(), free_port())
    port, controller = free_port(), free_port()
    broker = KafkaBroker("r1", data_dir=tmp_path, port=port, controller_port=controller)
    assert (broker.port, broker.controller_port) == (port, controller)
