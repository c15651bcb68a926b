"""A region's Kafka client settings in the topology file (`[region.kafka]`) and the op logs'
compression (`[topology] compression`).

`[region.kafka]` holds librdkafka properties (`security.protocol`, `ssl.ca.location`,
`sasl.mechanism`, ...) that every Kafka client made for the region's cluster takes
(`streams.kafka.security`), and that the MirrorMaker 2 config generator translates to Java's
names (`topology.mm2.security`). A password is better not written in the file:
`sasl.password.file` (a file holding it) or `sasl.password.env` (an environment variable) is read
when the client is made, so the secret is never printed nor put on a command line.
"""

from __future__ import annotations

from streams.config.nodes import TopologyError

COMPRESSIONS = ("none", "lz4", "zstd")
DEFAULT_COMPRESSION = "zstd"
"""The op-log producers' and mirrors' compression.type: zstd, measured smallest on op logs for
little CPU (bench/compression.py, docs/benchmarks.md "Compression")."""

SECRET_SOURCES = {"sasl.password.file": "sasl.password", "sasl.password.env": "sasl.password"}
"""Keys that name where a secret is rather than holding it, and the property they fill."""

REFUSED = {
    "bootstrap.servers": "give the region's 'bootstrap' instead",
    "transactional.id": "the node chooses it per shard",
    "group.id": "each reader chooses its own",
    "compression.type": "set [topology] compression instead",
}
"""Properties that would break what the project sets itself."""


def check_kafka_settings(where: str, raw: object) -> dict[str, str]:
    """`[region.kafka]` as strings (TOML's booleans and integers as librdkafka spells them);
    a key the project sets itself, or a value that is a table or a list, is refused."""
    if not isinstance(raw, dict):
        raise TopologyError(f"{where}: 'kafka' must be a table of librdkafka properties")
    settings: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key or key != key.strip():
            raise TopologyError(f"{where}: [region.kafka] key {key!r} is not a property name")
        if key in REFUSED:
            raise TopologyError(f"{where}: [region.kafka] may not set {key!r}: {REFUSED[key]}")
        if isinstance(value, bool):
            settings[key] = "true" if value else "false"
        elif isinstance(value, int | float | str):
            settings[key] = str(value)
        else:
            raise TopologyError(
                f"{where}: [region.kafka] {key!r} must be a string, number or boolean"
            )
    if "sasl.password" in settings and any(k in settings for k in SECRET_SOURCES):
        raise TopologyError(
            f"{where}: [region.kafka] gives sasl.password and where to read it: give one"
        )
    return settings


def check_replication(factor: object, min_insync: object) -> None:
    """Both optional positive integers; min.insync.replicas above the replica count would make
    every acks=all write fail, so it is refused here rather than by the first write."""
    for key, value in (("replication_factor", factor), ("min_insync_replicas", min_insync)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 32767:
            raise TopologyError(
                f"[topology]: field {key!r} must be an integer 1..32767, got {value!r}"
            )
    if isinstance(factor, int) and isinstance(min_insync, int) and min_insync > factor:
        raise TopologyError(
            f"[topology]: min_insync_replicas = {min_insync} exceeds replication_factor ="
            f" {factor}: no write could ever be acknowledged"
        )
