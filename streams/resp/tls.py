"""RESP over TLS: the server's `ssl.SSLContext` from Redis's option names.

A node serves TLS on `tls-port` with `tls-cert-file` / `tls-key-file` (its certificate chain and
key, PEM) and checks clients against `tls-ca-cert-file` as `tls-auth-clients` says: `yes`
(Redis's default) refuses a client without a certificate signed by that CA, `optional` checks a
certificate when one is sent, `no` asks for none. The files are read here, once, at start: a
wrong path or a key that does not match its certificate is one clear line then, not a failed
handshake at the first client.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

from streams.config.tls import AUTH_CLIENTS, TlsConfigError, TlsOptions

__all__ = [
    "AUTH_CLIENTS",
    "TlsConfigError",
    "TlsOptions",
    "client_context",
    "redis_options",
    "server_context",
]


def server_context(options: TlsOptions) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2 or later) for the node's RESP port; `TlsConfigError`
    naming the option and the file when one is missing, unreadable or does not fit."""
    if not options.cert_file or not options.key_file:
        raise TlsConfigError("TLS needs tls-cert-file and tls-key-file (PEM)")
    if options.auth_clients != "no" and not options.ca_cert_file:
        raise TlsConfigError(
            f"tls-auth-clients {options.auth_clients} needs tls-ca-cert-file (the CA that"
            " signs client certificates), or set tls-auth-clients no"
        )
    for option, path in (
        ("tls-cert-file", options.cert_file),
        ("tls-key-file", options.key_file),
        ("tls-ca-cert-file", options.ca_cert_file),
    ):
        if path and not os.path.isfile(path):
            raise TlsConfigError(f"{option}: no such file: {path}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(options.cert_file, options.key_file)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(
            f"tls-cert-file {options.cert_file} / tls-key-file {options.key_file}: cannot load"
            f" ({_reason(exc)}; a PEM certificate and its matching key are expected)"
        ) from None
    if options.ca_cert_file:
        try:
            context.load_verify_locations(cafile=options.ca_cert_file)
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(
                f"tls-ca-cert-file {options.ca_cert_file}: cannot load ({_reason(exc)})"
            ) from None
    context.verify_mode = {
        "yes": ssl.CERT_REQUIRED,
        "optional": ssl.CERT_OPTIONAL,
        "no": ssl.CERT_NONE,
    }[options.auth_clients]
    return context


def redis_options(options: TlsOptions) -> dict[str, Any]:
    """redis-py's options for a client of a node serving `options` (its CA, and its certificate
    as the client's: `tls-auth-clients yes` wants one): `streams status` asks TLS-only nodes."""
    return {
        "ssl": True,
        "ssl_ca_certs": options.ca_cert_file or None,
        "ssl_certfile": options.cert_file or None,
        "ssl_keyfile": options.key_file or None,
    }


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(exc.args[-1] if exc.args else exc)


def client_context(options: TlsOptions) -> ssl.SSLContext:
    """The context a node dials its region's other nodes with over TLS (CRDT.DIGEST asks
    them): their certificates checked against `tls-ca-cert-file`, this node's own certificate
    presented (Redis's `tls-client-cert-file` defaults to `tls-cert-file` likewise). Host names
    are not checked, as Redis does not between its nodes: the CA is the region's."""
    context = ssl.create_default_context(cafile=options.ca_cert_file or None)
    context.check_hostname = False
    if options.cert_file and options.key_file:
        context.load_cert_chain(options.cert_file, options.key_file)
    return context
