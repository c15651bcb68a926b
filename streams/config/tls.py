"""A node's TLS settings as the topology file and the node's options give them (Redis's names:
`tls-cert-file`, `tls-key-file`, `tls-ca-cert-file`, `tls-auth-clients`). The configuration
layer holds them; `streams.resp.tls` makes the SSL contexts from them."""

from __future__ import annotations

from dataclasses import dataclass

AUTH_CLIENTS = ("yes", "no", "optional")
"""`tls-auth-clients` values, as Redis spells them."""


class TlsConfigError(ValueError):
    """A TLS option that cannot work (a missing file, a bad value); the message is one line."""


@dataclass(frozen=True)
class TlsOptions:
    """The node's TLS settings (`--tls-*` options, or a region's `[region.tls]` table)."""

    cert_file: str = ""
    key_file: str = ""
    ca_cert_file: str = ""
    auth_clients: str = "yes"

    def __post_init__(self) -> None:
        if self.auth_clients not in AUTH_CLIENTS:
            raise TlsConfigError(
                f"tls-auth-clients must be one of {', '.join(AUTH_CLIENTS)},"
                f" got {self.auth_clients!r}"
            )

    @property
    def configured(self) -> bool:
        """Whether anything TLS was given (a node then needs all it takes to serve it)."""
        return bool(self.cert_file or self.key_file or self.ca_cert_file)
