"""A TLS handshake with a cluster before its Kafka clients are made, so that a certificate
problem is one clear line within seconds.

librdkafka retries a failed handshake like any broken connection: a node whose
`[region.kafka]` named the wrong CA waited out its whole broker wait (90 s) and then said
"Broker transport failure". Here the handshake is made with Python's `ssl` from the same
settings, an ApiVersions request sent over it (a broker that refuses the client's certificate
says so only after the handshake, under TLS 1.3), and what failed is named.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time

from streams.kafka import security

UNREACHABLE = "unreachable"
"""No address of the bootstrap accepted a TCP connection (the broker may still be starting)."""

_API_VERSIONS = struct.pack(">hhih", 18, 0, 0x5354_524D, 7) + b"streams"
_REQUEST = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


def client_context(settings: dict[str, str]) -> ssl.SSLContext:
    """A client context from librdkafka's ssl.* settings, checking as librdkafka does: the CA of
    ssl.ca.location (else the system's), the host name unless
    ssl.endpoint.identification.algorithm is none, the client certificate if given."""
    context = ssl.create_default_context(cafile=settings.get("ssl.ca.location"))
    context.check_hostname = settings.get("ssl.endpoint.identification.algorithm") != "none"
    if settings.get("enable.ssl.certificate.verification") == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert, key = settings.get("ssl.certificate.location"), settings.get("ssl.key.location")
    if cert:
        context.load_cert_chain(cert, key or None, settings.get("ssl.key.password"))
    return context


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().split("://", 1)[-1].rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def tls_problem(bootstrap: str, timeout: float = 4.0) -> str | None:
    """None when the cluster is not configured for TLS or a handshake and a Kafka request
    succeeded; `UNREACHABLE` when no address took a connection; else what failed, in one line
    naming the setting to look at."""
    settings = security.client_settings(bootstrap)
    if settings.get("security.protocol", "").lower() not in ("ssl", "sasl_ssl"):
        return None
    try:
        context = client_context(settings)
    except (OSError, ssl.SSLError) as exc:
        return f"cannot load the ssl.* files of [region.kafka] for {bootstrap}: {exc}"
    for host, port in _addresses(bootstrap):
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError:
            continue
        try:
            with context.wrap_socket(raw, server_hostname=host) as sock:
                if settings["security.protocol"].lower() == "sasl_ssl":
                    return None  # SASL comes first on such a connection: the client goes on
                sock.sendall(_REQUEST)
                if not sock.recv(8):
                    raise ssl.SSLError("the broker closed the connection")
                return None
        except ssl.SSLCertVerificationError as exc:
            return (
                f"TLS with Kafka at {host}:{port}: the broker's certificate is not trusted"
                f" ({exc.verify_message}); ssl.ca.location is"
                f" {settings.get('ssl.ca.location', 'unset (the system CAs)')}"
            )
        except (ssl.SSLError, OSError) as exc:
            mine = settings.get("ssl.certificate.location", "none given")
            return (
                f"TLS with Kafka at {host}:{port} failed ({exc}): does the broker trust this"
                f" client's certificate (ssl.certificate.location: {mine})?"
            )
        finally:
            raw.close()
    return UNREACHABLE


def wait_for_tls(bootstrap: str, timeout: float) -> None:
    """Until the cluster answers over TLS (or is not configured for it); `ConnectionError`
    with `tls_problem`'s line at once when a handshake fails, rather than after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        problem = tls_problem(bootstrap, timeout=max(0.5, min(4.0, deadline - time.monotonic())))
        if problem is None:
            return
        if problem != UNREACHABLE:
            raise ConnectionError(problem)
        if time.monotonic() > deadline:
            return  # the Kafka client's own wait and error follow
        time.sleep(0.2)
