"""Reading and writing topology files (the format is `streams.config.topology`'s docstring):
TOML in, validated `Topology` out, and back, so a launcher can write the file its processes read.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from streams.config.kafka import DEFAULT_COMPRESSION
from streams.config.nodes import (
    SHARD_SET_FORMS,
    NodeConfig,
    TopologyError,
    check_shard_count,
    format_shard_set,
    parse_shard_set,
)
from streams.config.retention import parse_retention, retention_lines
from streams.config.tls import TlsConfigError, TlsOptions
from streams.config.topology import (
    DEFAULT_BIND,
    OPTIONAL_NODE_KEYS,
    OPTIONAL_REGION_KEYS,
    REQUIRED_NODE_KEYS,
    REQUIRED_REGION_KEYS,
    TOPOLOGY_KEYS,
    RegionConfig,
    RemovedRegion,
    Topology,
)


def loads(text: str, source: str = "<topology>") -> Topology:
    """Parse and validate a topology document; errors start with `source` (the file name)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"{source}: not valid TOML: {exc}") from exc
    try:
        return _from_document(doc)
    except TopologyError as exc:
        raise TopologyError(f"{source}: {exc}") from None


def load(path: str | Path) -> Topology:
    """Read a topology file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read the topology file: {exc.strerror}") from exc
    return loads(text, source=str(path))


def _from_document(doc: dict[str, Any]) -> Topology:
    unknown = sorted(set(doc) - {"topology", "region", "retention", "removed"})
    if unknown:
        raise TopologyError(
            f"unknown top-level key(s) {', '.join(map(repr, unknown))}:"
            " expected a [topology] table, [[region]] tables, an optional [retention] table and"
            " [[removed]] tables"
        )
    head = doc.get("topology", {})
    if not isinstance(head, dict):
        raise TopologyError("'topology' must be a table: write [topology]")
    unknown = sorted(set(head) - set(TOPOLOGY_KEYS))
    if unknown:
        raise TopologyError(
            f"[topology]: unknown key(s) {', '.join(map(repr, unknown))}"
            f" (known: {', '.join(TOPOLOGY_KEYS)})"
        )
    shards = head.get("shards", 1)
    check_shard_count(shards)  # before the regions: a lone node's default shards need it
    raw_regions = doc.get("region", [])
    if not isinstance(raw_regions, list):
        raise TopologyError("'region' must be an array of tables: write [[region]], not [region]")
    regions = [_region(raw, index, shards) for index, raw in enumerate(raw_regions, start=1)]
    mirror_naming = head.get("mirror_naming", "identity")
    return Topology(
        regions=tuple(regions),
        mirror_naming=mirror_naming,
        shards=shards,
        replication_factor=head.get("replication_factor"),
        min_insync_replicas=head.get("min_insync_replicas"),
        retention=parse_retention(doc.get("retention")),
        removed=_removed(doc.get("removed", [])),
        **({"compression": head["compression"]} if "compression" in head else {}),
    )


def _removed(raw: object) -> tuple[RemovedRegion, ...]:
    """The `[[removed]]` tables: regions that left, by name and id."""
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise TopologyError("'removed' must be an array of tables: write [[removed]]")
    out = []
    for table in raw:
        unknown = sorted(set(table) - {"name", "id", "signing_key"})
        if unknown or "name" not in table or "id" not in table:
            raise TopologyError("[[removed]]: the fields 'name', 'id' (and 'signing_key')")
        out.append(RemovedRegion(table["name"], table["id"], table.get("signing_key", "")))
    return tuple(out)


def _region(raw: object, index: int, shards: int) -> RegionConfig:
    """Region #index of the file (1-based), its node tables read with the file's shard count."""
    if not isinstance(raw, dict):
        raise TopologyError(f"region #{index}: must be a table ([[region]])")
    named = isinstance(raw.get("name"), str) and raw["name"]
    where = f"region #{index}" + (f" ({raw['name']!r})" if named else "")
    unknown = sorted(set(raw) - set(REQUIRED_REGION_KEYS) - set(OPTIONAL_REGION_KEYS))
    if unknown:
        known = ", ".join(REQUIRED_REGION_KEYS + OPTIONAL_REGION_KEYS)
        raise TopologyError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: {known})"
        )
    fields = dict(raw)
    fields["tls"] = _tls(fields.pop("tls", {}), where)
    raw_nodes = fields.pop("node", [])
    if not isinstance(raw_nodes, list):
        raise TopologyError(f"{where}: 'node' must be an array of tables: write [[region.node]]")
    node_where = f"region {raw['name']!r}" if named else f"region #{index}"
    bind = fields.get("bind", DEFAULT_BIND)
    node_bind = bind if isinstance(bind, str) and bind else DEFAULT_BIND  # a bad one: see below
    nodes = tuple(
        _node(node, k, f"{node_where}, node {k}", node_bind, shards, len(raw_nodes))
        for k, node in enumerate(raw_nodes)
    )
    if nodes and "resp_port" not in fields:
        fields["resp_port"] = nodes[0].resp_port  # the region's port is its first node's
    if nodes and "tls_port" not in fields:
        fields["tls_port"] = nodes[0].tls_port
    missing = [key for key in REQUIRED_REGION_KEYS if key not in fields]
    if missing:
        raise TopologyError(f"{where}: missing field(s) {', '.join(map(repr, missing))}")
    try:
        return RegionConfig(**fields, nodes=nodes)
    except TopologyError as exc:
        message = str(exc)
        if message.startswith("region:"):  # no usable name: point at the table instead
            message = f"region #{index}:" + message.removeprefix("region:")
        raise TopologyError(message) from None


def _node(raw: object, index: int, where: str, bind: str, shards: int, count: int) -> NodeConfig:
    """One [[region.node]] table: `bind` defaults to the region's; a region's only node may omit
    `shards` (it owns them all), a node among several may not (no layout is guessed)."""
    if not isinstance(raw, dict):
        raise TopologyError(f"{where}: must be a table ([[region.node]])")
    unknown = sorted(set(raw) - set(REQUIRED_NODE_KEYS) - set(OPTIONAL_NODE_KEYS))
    if unknown:
        known = ", ".join(REQUIRED_NODE_KEYS + OPTIONAL_NODE_KEYS)
        raise TopologyError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: {known})"
        )
    if "resp_port" not in raw:
        raise TopologyError(f"{where}: missing field 'resp_port'")
    if "shards" in raw:
        try:
            owned = parse_shard_set(raw["shards"])
        except TopologyError as exc:
            raise TopologyError(f"{where}: field 'shards': {exc}") from None
    elif count == 1:
        owned = tuple(range(shards))
    else:
        raise TopologyError(
            f"{where}: missing field 'shards' (with several nodes each names its shards,"
            f" such as {SHARD_SET_FORMS})"
        )
    try:
        return NodeConfig(
            index,
            raw.get("bind", bind),
            raw["resp_port"],
            owned,
            raw.get("announce", ""),
            raw.get("tls_port", 0),
        )
    except TopologyError as exc:
        raise TopologyError(f"{where}:" + str(exc).split(":", 1)[1]) from None


TLS_KEYS = ("cert_file", "key_file", "ca_cert_file", "auth_clients")


def _tls(raw: object, where: str) -> TlsOptions:
    """`[region.tls]`: the node's TLS files, as Redis's tls-* options name them."""
    if not isinstance(raw, dict):
        raise TopologyError(f"{where}: 'tls' must be a table: write [region.tls]")
    unknown = sorted(set(raw) - set(TLS_KEYS))
    if unknown:
        raise TopologyError(
            f"{where}: [region.tls]: unknown key(s) {', '.join(map(repr, unknown))}"
            f" (known: {', '.join(TLS_KEYS)})"
        )
    for key, value in raw.items():
        if not isinstance(value, str):
            raise TopologyError(f"{where}: [region.tls] {key!r} must be a string")
    try:
        return TlsOptions(**raw)
    except TlsConfigError as exc:
        raise TopologyError(f"{where}: [region.tls]: {exc}") from None


def _toml_string(value: str) -> str:
    """A TOML basic string; escapes what TOML requires and nothing else (keeps it readable)."""
    out = ['"']
    for char in value:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def dumps(topology: Topology) -> str:
    """The topology as TOML that `loads` reads back to an equal Topology (every field explicit,
    except what keeps older files byte-identical: `shards` when 1 and the node table of a region
    that runs the default single node)."""
    lines = ["[topology]", f"mirror_naming = {_toml_string(topology.mirror_naming)}"]
    if topology.shards != 1:
        lines.append(f"shards = {topology.shards}")
    if topology.replication_factor is not None:
        lines.append(f"replication_factor = {topology.replication_factor}")
    if topology.min_insync_replicas is not None:
        lines.append(f"min_insync_replicas = {topology.min_insync_replicas}")
    if topology.compression != DEFAULT_COMPRESSION:
        lines.append(f"compression = {_toml_string(topology.compression)}")
    for region in topology.regions:
        lines += [
            "",
            "[[region]]",
            f"name = {_toml_string(region.name)}",
            f"id = {region.id}",
            f"bootstrap = {_toml_string(region.bootstrap)}",
            f"resp_port = {region.resp_port}",
            f"id_mode = {_toml_string(region.id_mode)}",
            f"alias = {_toml_string(region.alias)}",
            f"bind = {_toml_string(region.bind)}",
            *([f"signing_key = {_toml_string(region.signing_key)}"] if region.signing_key else []),
            *([f"tls_port = {region.tls_port}"] if region.tls_port else []),
        ]
        if region.tls != TlsOptions():
            lines += ["", "[region.tls]"] + [
                f"{key} = {_toml_string(getattr(region.tls, key))}"
                for key in TLS_KEYS
                if getattr(region.tls, key)
            ]
        if region.kafka:
            lines += ["", "[region.kafka]"] + [
                f"{_toml_string(key)} = {_toml_string(value)}"
                for key, value in region.kafka.items()
            ]
        if region._default_nodes(topology.shards):
            continue
        for node in region.nodes:
            lines += [
                "",
                "[[region.node]]",
                f"resp_port = {node.resp_port}",
                f"bind = {_toml_string(node.bind)}",
                f"shards = {_toml_string(format_shard_set(node.shards))}",
                *([f"announce = {_toml_string(node.announce)}"] if node.announce else []),
                *([f"tls_port = {node.tls_port}"] if node.tls_port else []),
            ]
    lines += retention_lines(topology.retention)
    for gone in topology.removed:
        lines += ["", "[[removed]]", f"name = {_toml_string(gone.name)}", f"id = {gone.id}"]
        if gone.signing_key:
            lines.append(f"signing_key = {_toml_string(gone.signing_key)}")
    return "\n".join(lines) + "\n"


def dump(topology: Topology, path: str | Path) -> None:
    """Write a topology file (the local launcher hands it to the node and mirror processes)."""
    Path(path).write_text(dumps(topology), encoding="utf-8")
