"""The topology file: which regions exist, where their Kafka clusters are, how mirrors name topics.

One TOML file describes a deployment and every process (region nodes, mirrors, the launcher, the
MirrorMaker 2 config generator) reads the same file, so they cannot disagree about region ids or
bootstraps. The file is validated strictly: a typo in a key or a duplicate region id would
otherwise surface much later as regions that silently never converge.

    [topology]
    mirror_naming = "identity"     # or "default" (MirrorMaker 2's <source-alias>.<topic>)

    [[region]]
    name = "r1"
    id = 1                         # 1..255, unique
    bootstrap = "127.0.0.1:9092"   # the region's own Kafka cluster
    resp_port = 6380
    id_mode = "strict"             # strict | semi-strict | liberal (default strict)
    alias = "A"                    # cluster alias (MirrorMaker 2 source alias), default: name
    bind = "127.0.0.1"             # RESP bind address, default 127.0.0.1
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ID_MODES = ("strict", "semi-strict", "liberal")
MIRROR_NAMINGS = ("identity", "default")
REQUIRED_REGION_KEYS = ("name", "id", "bootstrap", "resp_port")
OPTIONAL_REGION_KEYS = ("id_mode", "alias", "bind")
TOPOLOGY_KEYS = ("mirror_naming",)
# Names become topic-name parts (`r1.oplog`, `A.r1.oplog`): no dot, or a mirrored topic name
# would be ambiguous; only characters Kafka accepts in topic names.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class TopologyError(ValueError):
    """A topology file or object that is not valid; the message names the place and the field."""


def _where(region: RegionConfig | None, name: object = None) -> str:
    if region is not None:
        name = region.name
    return f"region {name!r}" if isinstance(name, str) and name else "region"


def _check_bootstrap(value: str) -> bool:
    """`host:port[,host:port...]` with ports in 1..65535 (librdkafka would fail later, vaguely)."""
    for part in value.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            return False
    return True


@dataclass(frozen=True)
class RegionConfig:
    """One region: its identity, its home Kafka cluster and its RESP endpoint."""

    name: str
    id: int
    bootstrap: str
    resp_port: int
    id_mode: str = "strict"
    alias: str = ""  # "" means the region name (resolved in __post_init__)
    bind: str = "127.0.0.1"

    def __post_init__(self) -> None:
        where = _where(None, self.name)
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise TopologyError(
                f"{where}: field 'name' must be a non-empty string of letters, digits, '_' or '-'"
                f" (it becomes part of topic names), got {self.name!r}"
            )
        if not isinstance(self.id, int) or isinstance(self.id, bool) or not 1 <= self.id <= 255:
            raise TopologyError(
                f"{where}: field 'id' must be an integer in 1..255, got {self.id!r}"
            )
        if not isinstance(self.bootstrap, str) or not _check_bootstrap(self.bootstrap):
            raise TopologyError(
                f"{where}: field 'bootstrap' must be 'host:port' (comma-separated for several"
                f" brokers), got {self.bootstrap!r}"
            )
        if (
            not isinstance(self.resp_port, int)
            or isinstance(self.resp_port, bool)
            or not 1 <= self.resp_port <= 65535
        ):
            raise TopologyError(
                f"{where}: field 'resp_port' must be an integer in 1..65535, got {self.resp_port!r}"
            )
        if self.id_mode not in ID_MODES:
            raise TopologyError(
                f"{where}: field 'id_mode' must be one of {', '.join(ID_MODES)},"
                f" got {self.id_mode!r}"
            )
        if not isinstance(self.alias, str) or (self.alias and not _NAME_RE.match(self.alias)):
            raise TopologyError(
                f"{where}: field 'alias' must be a string of letters, digits, '_' or '-'"
                f" (MirrorMaker 2 uses it as a topic prefix), got {self.alias!r}"
            )
        if not self.alias:
            object.__setattr__(self, "alias", self.name)
        if not isinstance(self.bind, str) or not self.bind:
            raise TopologyError(
                f"{where}: field 'bind' must be a non-empty string, got {self.bind!r}"
            )


@dataclass(frozen=True)
class Topology:
    """All regions of a deployment and the mirror naming policy they share."""

    regions: tuple[RegionConfig, ...]
    mirror_naming: str = "identity"
    _by_name: dict[str, RegionConfig] = field(init=False, repr=False, compare=False)
    _by_id: dict[int, RegionConfig] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", tuple(self.regions))
        if self.mirror_naming not in MIRROR_NAMINGS:
            raise TopologyError(
                f"[topology]: field 'mirror_naming' must be one of {', '.join(MIRROR_NAMINGS)},"
                f" got {self.mirror_naming!r}"
            )
        if not self.regions:
            raise TopologyError("no regions: add at least one [[region]] table")
        by_name: dict[str, RegionConfig] = {}
        by_id: dict[int, RegionConfig] = {}
        alias_home: dict[str, RegionConfig] = {}
        for region in self.regions:
            if not isinstance(region, RegionConfig):
                raise TopologyError(f"regions must be RegionConfig objects, got {region!r}")
            if region.name in by_name:
                raise TopologyError(f"region {region.name!r}: duplicate region name")
            if region.id in by_id:
                raise TopologyError(
                    f"region {region.name!r}: duplicate id {region.id}"
                    f" (already used by region {by_id[region.id].name!r})"
                )
            other = alias_home.get(region.alias)
            if other is not None and other.bootstrap != region.bootstrap:
                raise TopologyError(
                    f"region {region.name!r}: alias {region.alias!r} already names the cluster"
                    f" {other.bootstrap} of region {other.name!r}; one alias, one cluster"
                )
            by_name[region.name] = region
            by_id[region.id] = region
            alias_home.setdefault(region.alias, region)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_id", by_id)

    @property
    def names(self) -> list[str]:
        return [region.name for region in self.regions]

    def region(self, name: str) -> RegionConfig:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(
                f"no region named {name!r} in the topology (regions: {', '.join(self.names)})"
            ) from None

    def by_id(self, region_id: int) -> RegionConfig:
        try:
            return self._by_id[region_id]
        except KeyError:
            ids = ", ".join(str(r.id) for r in self.regions)
            raise KeyError(f"no region with id {region_id} in the topology (ids: {ids})") from None

    def others(self, name: str) -> list[RegionConfig]:
        """Every region but `name` (the mirror targets of `name`'s op log)."""
        self.region(name)
        return [region for region in self.regions if region.name != name]


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
    unknown = sorted(set(doc) - {"topology", "region"})
    if unknown:
        raise TopologyError(
            f"unknown top-level key(s) {', '.join(map(repr, unknown))}:"
            " expected a [topology] table and [[region]] tables"
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
    raw_regions = doc.get("region", [])
    if not isinstance(raw_regions, list):
        raise TopologyError("'region' must be an array of tables: write [[region]], not [region]")
    regions: list[RegionConfig] = []
    for index, raw in enumerate(raw_regions, start=1):
        if not isinstance(raw, dict):
            raise TopologyError(f"region #{index}: must be a table ([[region]])")
        where = f"region #{index}" + (
            f" ({raw['name']!r})" if isinstance(raw.get("name"), str) else ""
        )
        unknown = sorted(set(raw) - set(REQUIRED_REGION_KEYS) - set(OPTIONAL_REGION_KEYS))
        if unknown:
            known = ", ".join(REQUIRED_REGION_KEYS + OPTIONAL_REGION_KEYS)
            raise TopologyError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: {known})"
            )
        missing = [key for key in REQUIRED_REGION_KEYS if key not in raw]
        if missing:
            raise TopologyError(f"{where}: missing field(s) {', '.join(map(repr, missing))}")
        try:
            regions.append(RegionConfig(**raw))
        except TopologyError as exc:
            message = str(exc)
            if message.startswith("region:"):  # no usable name: point at the table instead
                message = f"region #{index}:" + message.removeprefix("region:")
            raise TopologyError(message) from None
    mirror_naming = head.get("mirror_naming", "identity")
    return Topology(regions=tuple(regions), mirror_naming=mirror_naming)


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
    """The topology as TOML that `loads` reads back to an equal Topology (every field explicit)."""
    lines = ["[topology]", f"mirror_naming = {_toml_string(topology.mirror_naming)}"]
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
        ]
    return "\n".join(lines) + "\n"


def dump(topology: Topology, path: str | Path) -> None:
    """Write a topology file (the local launcher hands it to the node and mirror processes)."""
    Path(path).write_text(dumps(topology), encoding="utf-8")
