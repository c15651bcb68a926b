"""Which settings a Kafka client of a given cluster takes: TLS / SASL properties and the
producers' compression, from the topology file (`streams.config.kafka`).

The project makes Kafka clients in some twenty places (the node's writer, materializer,
presence and snapshots, the mirror, the CLI tools, replay, the importer, the Spark source),
each from a cluster's bootstrap string. Rather than thread a settings object through all of
them, every `Topology` registers its regions' settings here under their bootstraps when it is
made, and each place asks `client_settings(bootstrap)` when it makes a client: a process that
read a topology file talks to every cluster of it as the file says. A cluster not in any
topology (a tool given only `--bootstrap`) gets librdkafka's defaults, plaintext, unless
`STREAMS_KAFKA_CONFIG` names a topology file to take them from.

Secrets: `sasl.password.file` / `sasl.password.env` are resolved to `sasl.password` here, when a
client is made; nothing here prints a setting's value.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.config.topology import Topology


class KafkaSettingsError(ValueError):
    """A secret the settings name cannot be read (the message names the file or variable,
    never the value)."""


_settings: dict[str, dict[str, str]] = {}
_compression: dict[str, str] = {}
_env_loaded = False


def register(bootstrap: str, settings: dict[str, str], compression: str | None = None) -> None:
    """Clients of the cluster at `bootstrap` take `settings` (librdkafka properties; secrets by
    file or environment resolved later) and, producing op logs, `compression`."""
    _settings[bootstrap] = dict(settings)
    if compression is not None:
        _compression[bootstrap] = compression


def register_topology(topology: Topology) -> None:
    """Every region's `[region.kafka]` under its bootstrap, and the topology's compression."""
    for region in topology.regions:
        register(region.bootstrap, region.kafka, topology.compression)


def _load_env() -> None:
    """Once: the topology file `STREAMS_KAFKA_CONFIG` names (for tools given only a
    bootstrap), registering its clusters' settings."""
    global _env_loaded
    if _env_loaded:
        return
    _env_loaded = True
    path = os.environ.get("STREAMS_KAFKA_CONFIG")
    if path:
        from streams.config.files import load

        load(path)


def client_settings(bootstrap: str) -> dict[str, str]:
    """The security properties of a client of `bootstrap` (empty: plaintext), the password read
    from its file or environment variable now. `KafkaSettingsError` naming the file or variable when
    it cannot be read."""
    _load_env()
    settings = dict(_settings.get(bootstrap, {}))
    path = settings.pop("sasl.password.file", None)
    if path is not None:
        try:
            with open(path, encoding="utf-8") as fp:
                settings["sasl.password"] = fp.read().strip()
        except OSError as exc:
            raise KafkaSettingsError(
                f"sasl.password.file {path}: cannot read it ({exc.strerror})"
            ) from None
    variable = settings.pop("sasl.password.env", None)
    if variable is not None:
        if variable not in os.environ:
            raise KafkaSettingsError(f"sasl.password.env: the environment has no {variable}")
        settings["sasl.password"] = os.environ[variable]
    return settings


def compression(bootstrap: str) -> str:
    """compression.type for op-log producers writing to `bootstrap` (the topology's, else the
    default)."""
    from streams.config.kafka import DEFAULT_COMPRESSION

    _load_env()
    return _compression.get(bootstrap, DEFAULT_COMPRESSION)


def producer_settings(bootstrap: str) -> dict[str, str]:
    """`client_settings` plus the compression: what an op-log producer (the node's writer, the
    mirror's) takes."""
    return {**client_settings(bootstrap), "compression.type": compression(bootstrap)}
