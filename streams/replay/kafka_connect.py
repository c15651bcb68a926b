"""How every `streams` verb reaches Kafka: one probe, one clear error, librdkafka's log in
Python `logging`, and calls that Ctrl-C can interrupt.

Why a module of its own: left to itself, librdkafka answers a wrong `--bootstrap` by retrying
for the whole metadata timeout and printing each attempt on stderr from C (`%3|...|FAIL|...
Connection refused`, about 20 lines a second), and its metadata call holds the main thread, so
Ctrl-C waits for it. Every verb that reads Kafka (log, replay, snapshot, history, diff, the Spark
jobs) goes through here instead:

- `ensure(bootstrap)` probes the bootstrap addresses with plain sockets before any Kafka client
  exists: a TCP connect, then a Kafka ApiVersions request. When no address answers as a Kafka
  broker it raises `Unreachable` at once (refused connections fail in milliseconds, the whole
  probe is bounded by `PROBE_TIMEOUT_S`), naming each address and what happened, and, when the
  port answered in the Redis protocol, saying that it is a node's RESP port; the topology file
  (`--topology`, else `.streams/topology.toml`) lends the Kafka bootstraps it lists as a hint.
  A probe that cannot tell (an address that accepts and stays silent) lets the client try.
- `client_config(config)` routes librdkafka's log to the `streams.kafka` logger (the `logger`
  client setting), silent unless `-v` (`configure(verbose=1)`; `-vv` adds debug contexts).
- `metadata(consumer, bootstrap)` lists topics in short slices, so a KeyboardInterrupt is
  raised within half a second; `Consumer.poll` is interruptible already.
"""

from __future__ import annotations

import argparse
import logging
import socket
import ssl
import struct
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from streams.kafka import security
from streams.kafka.tls_check import client_context

LOG = logging.getLogger("streams.kafka")
"""librdkafka's own log. A NullHandler keeps Python's last-resort handler from printing it."""
LOG.addHandler(logging.NullHandler())

PROBE_TIMEOUT_S = 4.0
"""The whole probe of a bootstrap ends within this (the verb's error comes within 5 s)."""
SILENT_S = 1.0
"""A Kafka broker answers ApiVersions in milliseconds; silent this long, the probe pokes a RESP
server (which waits for a line end) and, failing that, leaves the verdict to the client."""
METADATA_TIMEOUT_S = 10.0
SLICE_S = 0.5
"""One `list_topics` call's timeout: how long Ctrl-C may wait."""
DEFAULT_TOPOLOGY = Path(".streams/topology.toml")

_CORRELATION = 0x5354_524D  # "STRM"
_CLIENT = b"streams"
# ApiVersions v0: size, api key 18, version 0, correlation id, client id (int16 + bytes). No
# byte of it is a line end, so a RESP server reads it as an unfinished inline command.
_API_VERSIONS = struct.pack(">hhih", 18, 0, _CORRELATION, len(_CLIENT)) + _CLIENT
_REQUEST = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS
_RESP_FIRST = b"+-:$*%_#,(!=>|~"
_RESP_PORT = "it speaks the Redis protocol"


class Unreachable(ConnectionError):
    """No Kafka broker answered at a bootstrap, or the cluster stopped answering; the text says
    what was tried (exit status 4). A ConnectionError, so what handles OSError handles it."""


_settings: dict[str, Any] = {"verbose": 0, "topology": None}
_answered: set[str] = set()


def configure(verbose: int = 0, topology: str | None = None) -> None:
    """Once per command: `-v` count (librdkafka's log on stderr from 1, debug contexts from 2)
    and the topology file the user named (for hints)."""
    _settings["verbose"] = verbose
    _settings["topology"] = topology
    if verbose and not any(getattr(h, "_streams_cli", False) for h in LOG.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        handler._streams_cli = True  # type: ignore[attr-defined]
        LOG.addHandler(handler)
        LOG.setLevel(logging.DEBUG)


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    """`-v` on a verb (`streams -v VERB` works too): librdkafka's own log on stderr."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,  # given before the verb: not overwritten here
        help="show the Kafka client's own log on stderr (-vv: with debug contexts)",
    )


def client_config(config: dict[str, object]) -> dict[str, object]:
    """`config` with librdkafka's log sent to `LOG` (and more of it with -v / -vv)."""
    out = dict(config, logger=LOG)
    verbose = int(_settings["verbose"])
    if verbose:
        out["log_level"] = 7 if verbose > 1 else 6
    if verbose > 1:
        out["debug"] = "broker,protocol,metadata,fetch"
    return out


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`h1:9092,[::1]:9093,PLAINTEXT://h2` -> [(host, port)]; 9092 when a port is left out."""
    out: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        item = item.strip().split("://", 1)[-1]
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":")
        else:
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, ""
        if port and not port.isdigit():
            raise Unreachable(f"--bootstrap {bootstrap}: {item!r} is not HOST:PORT")
        out.append((host or "localhost", int(port) if port else 9092))
    if not out:
        raise Unreachable("--bootstrap is empty: give HOST:PORT of a Kafka broker")
    return out


def _recv_some(sock: socket.socket, deadline: float) -> bytes | None:
    """Up to 64 bytes of the reply; b"" when the peer closed, None when it stayed silent."""
    sock.settimeout(max(0.05, deadline - time.monotonic()))
    try:
        return sock.recv(64)
    except TimeoutError:
        return None


def _probe_one(host: str, port: int, deadline: float, bootstrap: str = "") -> str | None:
    """None when a Kafka broker answered at host:port (or the probe cannot tell), else why not.
    A cluster whose settings say SSL is probed over TLS, and a certificate the settings do not
    trust (or that the broker refuses) is named as such."""
    left = deadline - time.monotonic()
    settings = security.client_settings(bootstrap) if bootstrap else {}
    protocol = settings.get("security.protocol", "plaintext").lower()
    try:
        sock = socket.create_connection((host, port), timeout=max(0.05, left))
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror as exc:
        return f"cannot resolve {host}: {exc.strerror}"
    except TimeoutError:
        return f"no answer to the TCP connect in {max(0.0, left):.1f}s"
    except OSError as exc:
        return exc.strerror or str(exc)
    if protocol in ("ssl", "sasl_ssl"):
        try:
            context = client_context(settings)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            return f"cannot load the ssl.* files of [region.kafka]: {exc}"
        try:
            sock = context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            return (
                f"TLS: the broker's certificate is not trusted ({exc.verify_message});"
                f" ssl.ca.location is {settings.get('ssl.ca.location', 'the system CAs')}"
            )
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            return f"TLS handshake failed: {exc}"
        if protocol == "sasl_ssl":
            sock.close()
            return None  # SASL comes first on such a connection: let the client try
    with sock:
        try:
            sock.sendall(_REQUEST)
            reply = _recv_some(sock, min(deadline, time.monotonic() + SILENT_S))
        except OSError as exc:
            return f"the connection failed: {exc.strerror or exc}"
    if reply is None:
        # Silent: Redis reads a request starting with a zero byte as an inline command that
        # never ends. A PING on a connection of its own tells a RESP server from a slow broker
        # (which drops the connection: "PING" read as a request size is far too large).
        if _answers_ping(host, port, deadline):
            return _RESP_PORT
        return None  # maybe a slow broker: let the client try
    if len(reply) >= 8 and struct.unpack(">i", reply[4:8])[0] == _CORRELATION:
        return None
    if reply[:1] and reply[:1] in _RESP_FIRST:
        return _RESP_PORT
    if reply.startswith(b"HTTP/"):
        return "it answered in HTTP, not the Kafka protocol"
    if reply[:2] == b"\x15\x03":  # a TLS alert record
        return (
            'it speaks TLS: give the region\'s [region.kafka] "security.protocol" = "SSL" and'
            " its ssl.* files in the topology file"
        )
    if not reply:
        return "it closed the connection without answering a Kafka request"
    return "it answered, but not in the Kafka protocol"


def _answers_ping(host: str, port: int, deadline: float) -> bool:
    """Whether host:port answers a RESP PING (+PONG, or an error such as -NOAUTH)."""
    try:
        with socket.create_connection(
            (host, port), timeout=max(0.05, deadline - time.monotonic())
        ) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = _recv_some(sock, deadline)
    except OSError:
        return False
    return reply is not None and reply[:1] != b"" and reply[:1] in _RESP_FIRST


def probe(bootstrap: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise `Unreachable` unless some address of `bootstrap` answers as a Kafka broker."""
    deadline = time.monotonic() + timeout
    tried: list[str] = []
    for host, port in addresses(bootstrap):
        why = _probe_one(host, port, deadline, bootstrap)
        if why is None:
            return
        tried.append(f"{_show(host, port)} ({why})")
    resp = any(_RESP_PORT in t for t in tried)
    hint = _hint(bootstrap, "is this a node's RESP port? " if resp else "")
    raise Unreachable(f"no Kafka broker answered at {', '.join(tried)}{hint}")


def ensure(bootstrap: str) -> None:
    """`probe`, once per bootstrap per process (a verb reads the same cluster many times)."""
    if bootstrap in _answered:
        return
    probe(bootstrap)
    _answered.add(bootstrap)


def metadata(consumer: Consumer, bootstrap: str, timeout: float = METADATA_TIMEOUT_S) -> Any:
    """`consumer.list_topics()`, in slices of `SLICE_S` so that Ctrl-C is honoured at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.list_topics(timeout=SLICE_S)
        except KafkaException as exc:
            if time.monotonic() >= deadline:
                err = exc.args[0] if exc.args else None
                why = err.str() if isinstance(err, KafkaError) else str(exc)
                raise Unreachable(
                    f"no topic list from the Kafka cluster at {bootstrap} in {timeout:.0f}s "
                    f"({why}){_hint(bootstrap)}"
                ) from None


def _show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _hint(bootstrap: str, question: str = "") -> str:
    """`; <question>` and what the topology file says: which Kafka bootstraps it lists, and
    whether the address given is one of its nodes' RESP ports."""
    from streams.config import TopologyError, load

    named = _settings["topology"]
    path = Path(named) if named else DEFAULT_TOPOLOGY
    try:
        topology = load(path)
    except (OSError, TopologyError):
        if named:
            return f"; {question}the topology file {named} cannot be read either"
        return (
            f"; {question}`streams up` prints each region's Kafka bootstrap and writes them "
            f"to {path}"
        )
    given = {_show(h, p) for h, p in addresses(bootstrap)}
    for region in topology.regions:
        for node in region.nodes:
            if _show(node.bind, node.resp_port) in given:
                resp = _show(node.bind, node.resp_port)
                return (
                    f"; {question}{path} has {resp} as {region.name}'s RESP port: its Kafka "
                    f"bootstrap is {region.bootstrap}"
                )
    listed = ", ".join(f"{r.name} {r.bootstrap}" for r in topology.regions)
    return f"; {question}the topology file {path} lists the Kafka bootstraps {listed}"
