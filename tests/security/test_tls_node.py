"""RESP over TLS on a node (`--tls-port`, Redis's tls-* options), with real certificates made by
`topology.certs` and a real node serving in process on an in-memory op log (no broker: fast).

What a client sees: redis-py `ssl=True` served, a plaintext client refused on the TLS port, a
client certificate of another CA refused under `tls-auth-clients yes`, none needed under `no`,
cluster replies naming TLS ports to TLS clients; and what an operator sees: one clear line for a
bad option or file, no traceback.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest
import redis

from security.served import NodeThread
from streams.config import NodeConfig, RegionConfig, Topology, dumps
from streams.node.node import NodeOptions, RegionNode
from streams.node.runtime.memory import MemoryLog
from streams.resp.tls import TlsConfigError, TlsOptions
from streams.slots import key_slot
from topology.certs import TlsFiles, make_ca, make_certificate, make_tls_files
from topology.ports import free_port


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A certificate (and its CA) that the node's CA did not sign."""
    base = tmp_path_factory.mktemp("other-ca")
    ca_cert, ca_key = make_ca(base, "some other CA")
    cert, key = make_certificate(base, ca_cert, ca_key, "intruder")
    return ca_cert, cert, key


class TlsNode(NodeThread):
    """Node `index` of `topology`'s region r1, serving in a thread's event loop."""

    def __init__(self, topology: Topology, index: int = 0, tls: TlsOptions | None = None) -> None:
        super().__init__(
            RegionNode(NodeOptions(topology, "r1", node=index, tls=tls), log=MemoryLog())
        )

    def __enter__(self) -> RegionNode:
        self.start()
        return self.node

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def one_node(certs: TlsFiles, plain: bool = True, auth_clients: str = "yes") -> Topology:
    tls = TlsOptions(str(certs.cert), str(certs.key), str(certs.ca), auth_clients)
    region = RegionConfig(
        "r1", 1, "127.0.0.1:1", free_port() if plain else 0, tls_port=free_port(), tls=tls
    )
    return Topology(regions=(region,))


def tls_client(port: int, certs: TlsFiles, **extra: object) -> redis.Redis:
    options: dict[str, object] = {
        "ssl_ca_certs": str(certs.ca),
        "ssl_certfile": str(certs.cert),
        "ssl_keyfile": str(certs.key),
    }
    options.update(extra)
    return redis.Redis(port=port, ssl=True, socket_timeout=5, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def served(certs: TlsFiles) -> Iterator[RegionNode]:
    with TlsNode(one_node(certs)) as node:
        yield node


def test_tls_client_is_served(served: RegionNode, certs: TlsFiles) -> None:
    client = tls_client(served.tls_port, certs)
    assert client.ping()
    entry = client.xadd("s", {"f": "v"})
    assert client.xrange("s") == [(entry, {b"f": b"v"})]
    # the plaintext port serves the same data
    assert redis.Redis(port=served.port).xlen("s") == 1
    listed = client.client_list()
    assert listed and all("laddr" in c for c in listed)


def test_plaintext_client_refused_on_tls_port(served: RegionNode) -> None:
    with socket.create_connection(("127.0.0.1", served.tls_port), timeout=5) as sock:
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        sock.settimeout(5)
        try:
            data = sock.recv(1024)
        except ConnectionResetError:
            data = b""
        assert b"PONG" not in data
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=served.tls_port, socket_timeout=3).ping()


def test_untrusted_client_certificate_refused(
    served: RegionNode, certs: TlsFiles, stranger: tuple[Path, Path, Path]
) -> None:
    _, cert, key = stranger
    with pytest.raises(redis.ConnectionError):
        tls_client(served.tls_port, certs, ssl_certfile=str(cert), ssl_keyfile=str(key)).ping()
    with pytest.raises(redis.ConnectionError):  # tls-auth-clients yes: a certificate is needed
        tls_client(served.tls_port, certs, ssl_certfile=None, ssl_keyfile=None).ping()


def test_client_refuses_a_node_of_another_ca(
    served: RegionNode, certs: TlsFiles, stranger: tuple[Path, Path, Path]
) -> None:
    ca, _, _ = stranger
    with pytest.raises(redis.ConnectionError, match="(?i)certificate verify failed"):
        tls_client(served.tls_port, certs, ssl_ca_certs=str(ca)).ping()


def test_tls_only_and_auth_clients_no(certs: TlsFiles) -> None:
    topology = one_node(certs, plain=False, auth_clients="no")
    with TlsNode(topology) as node:
        assert node.port == 0 and node.endpoints.endswith("(TLS)")
        client = tls_client(node.tls_port, certs, ssl_certfile=None, ssl_keyfile=None)
        assert client.ping()


def test_cluster_replies_name_tls_ports_to_tls_clients(certs: TlsFiles) -> None:
    ports = [free_port() for _ in range(4)]
    tls = TlsOptions(str(certs.cert), str(certs.key), str(certs.ca))
    nodes = (
        NodeConfig(0, "127.0.0.1", ports[0], (0,), tls_port=ports[1]),
        NodeConfig(1, "127.0.0.1", ports[2], (1,), tls_port=ports[3]),
    )
    region = RegionConfig("r1", 1, "127.0.0.1:1", ports[0], nodes=nodes, tls=tls)
    topology = Topology(regions=(region,), shards=2)
    with TlsNode(topology, 0):
        over_tls = tls_client(ports[1], certs)
        plain = redis.Redis(port=ports[0])
        tls_slots = over_tls.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        plain_slots = plain.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        assert sorted(run[2][1] for run in tls_slots) == sorted([ports[1], ports[3]])
        assert sorted(run[2][1] for run in plain_slots) == sorted([ports[0], ports[2]])
        shards = over_tls.execute_command("CLUSTER", "SHARDS")  # type: ignore[no-untyped-call]
        assert b"%d" % ports[3] in repr(shards).encode()
        key = next(k for k in (f"k{i}" for i in range(100)) if key_slot(k.encode()) >= 8192)
        with pytest.raises(redis.ResponseError, match=f":{ports[3]}$"):
            over_tls.xlen(key)
        with pytest.raises(redis.ResponseError, match=f":{ports[2]}$"):
            plain.xlen(key)


def test_bad_files_are_one_clear_line(certs: TlsFiles, tmp_path: Path) -> None:
    missing = TlsOptions(str(tmp_path / "nope.pem"), str(certs.key), str(certs.ca))
    with pytest.raises(TlsConfigError, match="no such file"):
        RegionNode(NodeOptions(one_node(certs), "r1", tls=missing), log=MemoryLog())
    mismatched = TlsOptions(str(certs.ca), str(certs.key), str(certs.ca))
    with pytest.raises(TlsConfigError, match="cannot load"):
        RegionNode(NodeOptions(one_node(certs), "r1", tls=mismatched), log=MemoryLog())
    no_ca = TlsOptions(str(certs.cert), str(certs.key), "")
    with pytest.raises(TlsConfigError, match="needs tls-ca-cert-file"):
        RegionNode(NodeOptions(one_node(certs), "r1", tls=no_ca), log=MemoryLog())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tls-auth-clients", "maybe"], "--tls-auth-clients must be one of yes, no, optional"),
        (["--tls-cert-file", "/nonexistent/node.pem"], "no such file: /nonexistent/node.pem"),
        (["--port", "0", "--tls-port", "0"], "field 'resp_port' must be an integer in 1..65535"),
    ],
)
def test_node_command_line_errors(
    certs: TlsFiles, tmp_path: Path, extra: list[str], message: str
) -> None:
    path = tmp_path / "topology.toml"
    path.write_text(dumps(one_node(certs)))
    result = subprocess.run(
        [sys.executable, "-m", "streams.node", "--topology", str(path), "--region", "r1", *extra],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr.strip().splitlines()[-1]  # one line says it all
    assert "Traceback" not in result.stderr


def test_topology_file_round_trip(certs: TlsFiles) -> None:
    from streams.config import loads

    topology = one_node(certs, plain=False)
    again = loads(dumps(topology))
    assert again == topology
    assert again.regions[0].tls_port == topology.regions[0].tls_port
    assert again.regions[0].resp_port == 0


def test_server_context_is_tls12_or_later(certs: TlsFiles) -> None:
    from streams.resp.tls import server_context

    context = server_context(TlsOptions(str(certs.cert), str(certs.key), str(certs.ca)))
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
