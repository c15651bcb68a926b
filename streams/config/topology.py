"""The topology file: which regions exist, where their Kafka clusters are, how mirrors name topics,
how many shards the database has and which node process of a region owns which of them.

One TOML file describes a deployment and every process (region nodes, mirrors, the launcher, the
MirrorMaker 2 config generator) reads the same file, so they cannot disagree about region ids,
bootstraps or which node owns a shard. The file is validated strictly: a typo in a key, a
duplicate region id or a shard no node owns would otherwise surface much later as regions that
silently never converge or keys that no node serves.

    [topology]
    mirror_naming = "identity"     # or "default" (MirrorMaker 2's <source-alias>.<topic>)
    shards = 4                     # 1..1024, default 1; the same in every region, fixed when the
                                   # topics are created (partition s of each op log is shard s)
    replication_factor = 3         # optional: replicas of every topic the nodes create
                                   # (default: the broker's default.replication.factor)
    min_insync_replicas = 2        # optional: the topics' min.insync.replicas (default: the
                                   # broker's); writes use acks=all, so a commit needs this many
    compression = "zstd"           # op-log producers' and mirrors' compression.type: none,
                                   # lz4 or zstd (default zstd; docs/benchmarks.md, "Compression")

    [[region]]
    name = "r1"
    id = 1                         # 1..255, unique
    bootstrap = "127.0.0.1:9092"   # the region's own Kafka cluster
    resp_port = 6380               # with [[region.node]] tables: optional, the first node's
    id_mode = "strict"             # strict | semi-strict | liberal (default strict)
    alias = "A"                    # cluster alias (MirrorMaker 2 source alias), default: name
    bind = "127.0.0.1"             # RESP bind address, default 127.0.0.1 (and each node's)
    signing_key = "<64 hex digits>" # optional: HMAC-SHA256 key; its writer signs each op record
                                   # and every reader refuses this region's records unsigned or
                                   # wrongly signed (streams/kafka/gate.py)

    tls_port = 6443                # optional: RESP over TLS (the first node's); resp_port = 0
                                   # then switches plaintext off, as Redis's `port 0`

    [region.tls]                   # optional: the node's TLS files (Redis's tls-* options;
    cert_file = "node.pem"         # `python -m streams.node --tls-*` overrides them)
    key_file = "node.key"
    ca_cert_file = "ca.pem"        # the CA client certificates must be signed by
    auth_clients = "yes"           # yes (default) | optional | no

    [region.kafka]                 # optional: librdkafka properties of every Kafka client
    "security.protocol" = "SSL"    # made for this region's cluster (node, mirror, CLI tools,
    "ssl.ca.location" = "ca.pem"   # importer) and, as Java properties, MirrorMaker 2's
    "ssl.certificate.location" = "client.pem"
    "ssl.key.location" = "client.key"
    # SASL: "sasl.mechanism", "sasl.username", and the password from a file or the environment
    # ("sasl.password.file" = "/run/secrets/kafka", "sasl.password.env" = "KAFKA_PASSWORD")
    # rather than "sasl.password" in the file: it is never printed or put on a command line

    [[region.node]]                # node 0 (`python -m streams.node ... --node 0`)
    resp_port = 6380               # required; distinct bind:port per node of the region
    shards = "0-1"                 # required with several nodes: "0-3", "0,2", "4-7,9"

    [[region.node]]                # node 1
    resp_port = 6390
    bind = "127.0.0.1"             # default: the region's bind
    shards = "2-3"
    announce = "10.0.0.7"          # optional: the host clients reach it at (CLUSTER SLOTS, MOVED),
                                   # as Redis's cluster-announce-ip; default: bind
    tls_port = 6453                # optional: this node's RESP-over-TLS port

    [retention]                    # optional (streams/config/retention.py): what
    snapshots = 3                  # `streams retention apply` may delete from the op logs
    tail_seconds = 3600

    [[removed]]                    # a region that left (`streams region remove`): its name
    name = "r3"                    # and id are never used again; its old records stay valid
    id = 3                         # (signing_key = "..." when it signed them)

A region without `[[region.node]]` tables runs one node owning every shard on the region's
`resp_port` (the format before shards existed, which stays valid and is written back unchanged).
With node tables, every shard 0..S-1 belongs to exactly one node of the region, the nodes are
numbered 0, 1, ... in file order, and the region's `resp_port` is its first node's (the port a
client that does not follow the cluster protocol uses): it may be left out, and if given must
agree. With more than one node the region's nodes speak the Redis Cluster protocol.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from streams.config.kafka import (
    COMPRESSIONS,
    DEFAULT_COMPRESSION,
    check_kafka_settings,
    check_replication,
)
from streams.config.nodes import (
    MAX_SHARDS,
    NodeConfig,
    TopologyError,
    check_bind,
    check_ports,
    check_shard_count,
    format_shard_set,
    is_int,
    parse_shard_set,
)
from streams.config.retention import RetentionPolicy
from streams.config.tls import TlsOptions
from streams.kafka.security import register_topology

__all__ = [
    "MAX_SHARDS",
    "NodeConfig",
    "RegionConfig",
    "RemovedRegion",
    "Topology",
    "TopologyError",
    "format_shard_set",
    "parse_shard_set",
]

ID_MODES = ("strict", "semi-strict", "liberal")
MIRROR_NAMINGS = ("identity", "default")
REQUIRED_REGION_KEYS = ("name", "id", "bootstrap", "resp_port")
OPTIONAL_REGION_KEYS = (
    "id_mode",
    "alias",
    "bind",
    "node",
    "signing_key",
    "tls_port",
    "tls",
    "kafka",
)
REQUIRED_NODE_KEYS = ("resp_port",)
OPTIONAL_NODE_KEYS = ("bind", "shards", "announce", "tls_port")
TOPOLOGY_KEYS = (
    "mirror_naming",
    "shards",
    "replication_factor",
    "min_insync_replicas",
    "compression",
)
DEFAULT_BIND = "127.0.0.1"
# Names become topic-name parts (`r1.oplog`, `A.r1.oplog`): no dot, or a mirrored topic name
# would be ambiguous; only characters Kafka accepts in topic names.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def _signing_key_ok(text: str) -> bool:
    try:
        return len(bytes.fromhex(text)) >= 16
    except ValueError:
        return False


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
    """One region: its identity, its home Kafka cluster, its RESP endpoint (`bind`:`resp_port`,
    its first node's) and its node processes (`nodes`: always at least one; see the module
    docstring for who owns which shard)."""

    name: str
    id: int
    bootstrap: str
    resp_port: int
    id_mode: str = "strict"
    alias: str = ""  # "" means the region name (resolved in __post_init__)
    bind: str = DEFAULT_BIND
    # () means one node owning every shard on bind:resp_port (filled in by __post_init__; a
    # Topology gives it the topology's shards: on its own a region cannot know their number).
    nodes: tuple[NodeConfig, ...] = ()
    signing_key: str = ""
    """Hex of the key that signs this region's op records ("": not signed)."""
    tls_port: int = 0
    """The first node's RESP-over-TLS port (0: none)."""
    tls: TlsOptions = field(default_factory=TlsOptions)
    """The nodes' TLS files (`[region.tls]`)."""
    kafka: dict[str, str] = field(default_factory=dict, repr=False, hash=False)
    """librdkafka properties of every client of this region's cluster (`[region.kafka]`); not
    in repr: it may hold a password."""

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
        check_ports(where, self.resp_port, self.tls_port)
        if not isinstance(self.tls, TlsOptions):
            raise TopologyError(f"{where}: tls must be TlsOptions, got {self.tls!r}")
        object.__setattr__(self, "kafka", check_kafka_settings(where, self.kafka))
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
        if not isinstance(self.signing_key, str) or (
            self.signing_key and not _signing_key_ok(self.signing_key)
        ):
            raise TopologyError(
                f"{where}: field 'signing_key' must be at least 32 hex digits (16 bytes;"
                " `python3 -c 'import secrets; print(secrets.token_hex(32))'` makes one)"
            )
        check_bind(where, self.bind)
        object.__setattr__(self, "nodes", self._checked_nodes(where))

    def _checked_nodes(self, where: str) -> tuple[NodeConfig, ...]:
        """The region's nodes: the implicit single node when none are given (or when the given
        one is the implicit node of a region this one was copied from), else the given ones,
        numbered in order, the first on the region's resp_port, no address or shard twice."""
        if not isinstance(self.nodes, tuple | list):
            raise TopologyError(f"{where}: nodes must be a tuple of NodeConfig, got {self.nodes!r}")
        nodes = tuple(self.nodes)
        for node in nodes:
            if not isinstance(node, NodeConfig):
                raise TopologyError(f"{where}: nodes must be NodeConfig objects, got {node!r}")
        if not nodes or (len(nodes) == 1 and nodes[0].implicit):
            shards = nodes[0].shards if nodes else (0,)
            return (
                NodeConfig(
                    0, self.bind, self.resp_port, shards, tls_port=self.tls_port, implicit=True
                ),
            )
        addresses: dict[tuple[str, int], int] = {}
        owners: dict[int, int] = {}
        for position, node in enumerate(nodes):
            if node.index != position:
                raise TopologyError(
                    f"{where}: node #{position} has index {node.index}; nodes are numbered"
                    " 0, 1, ... in order"
                )
            for port in node.ports:
                other = addresses.setdefault((node.bind, port), node.index)
                if other != node.index:
                    raise TopologyError(
                        f"{where}: nodes {other} and {node.index} both listen on {node.bind}:{port}"
                    )
            for shard in node.shards:
                owner = owners.setdefault(shard, node.index)
                if owner != node.index:
                    raise TopologyError(
                        f"{where}: shard {shard} is owned by nodes {owner} and {node.index};"
                        " every shard belongs to exactly one node of a region"
                    )
        if nodes[0].resp_port != self.resp_port:
            raise TopologyError(
                f"{where}: field 'resp_port' is {self.resp_port} but its first node listens on"
                f" {nodes[0].resp_port}: a region's resp_port is its first node's"
            )
        if self.tls_port and nodes[0].tls_port != self.tls_port:
            raise TopologyError(
                f"{where}: field 'tls_port' is {self.tls_port} but its first node's is"
                f" {nodes[0].tls_port}: a region's tls_port is its first node's"
            )
        object.__setattr__(self, "tls_port", nodes[0].tls_port)
        return nodes

    def node(self, index: int) -> NodeConfig:
        """Node `index` of the region (what `python -m streams.node --node K` runs)."""
        if is_int(index) and 0 <= index < len(self.nodes):
            return self.nodes[index]
        raise KeyError(
            f"region {self.name!r} has no node {index!r} (its nodes: 0..{len(self.nodes) - 1})"
        )

    def owner(self, shard: int) -> NodeConfig:
        """The node of this region that owns `shard` (where a MOVED reply sends a client)."""
        for node in self.nodes:
            if shard in node.shards:
                return node
        raise KeyError(f"region {self.name!r}: no node owns shard {shard!r}")

    def _with_shards(self, shards: int) -> RegionConfig:
        """This region in a topology of `shards` shards: its implicit node owns all of them, and
        every shard 0..shards-1 belongs to a node (gaps named; overlaps were refused already)."""
        region = self
        everything = tuple(range(shards))
        if self.nodes[0].implicit and self.nodes[0].shards != everything:
            implicit = dataclasses.replace(self.nodes[0], shards=everything)
            region = dataclasses.replace(self, nodes=(implicit,))
        owned: set[int] = set()
        for node in region.nodes:
            beyond = [shard for shard in node.shards if shard >= shards]
            if beyond:
                raise TopologyError(
                    f"region {self.name!r}, node {node.index}: shard {beyond[0]} does not exist:"
                    f" [topology] shards = {shards} makes shards 0..{shards - 1}"
                )
            owned.update(node.shards)
        gaps = sorted(set(everything) - owned)
        if gaps:
            raise TopologyError(
                f"region {self.name!r}: no node owns shard(s) {format_shard_set(gaps)};"
                f" every shard 0..{shards - 1} belongs to exactly one node of a region"
            )
        return region

    def _default_nodes(self, shards: int) -> bool:
        """True when the region runs the one node it gets without [[region.node]] tables (on
        its bind and resp_port, owning all `shards`): `dumps` then writes no node table."""
        default = NodeConfig(
            0, self.bind, self.resp_port, tuple(range(shards)), tls_port=self.tls_port
        )
        return self.nodes == (default,)


@dataclass(frozen=True)
class RemovedRegion:
    """A region that left the topology (`streams region remove`): its id and name are never
    used again, and the records it wrote before leaving stay valid (the record gate still knows
    its origin)."""

    name: str
    id: int
    signing_key: str = ""
    """Its records' key, still checked: a removed region's old records stay signed, and a
    forged one under its origin is still refused."""

    def __post_init__(self) -> None:
        if not isinstance(self.signing_key, str) or (
            self.signing_key and not _signing_key_ok(self.signing_key)
        ):
            raise TopologyError("[[removed]]: field 'signing_key' must be at least 32 hex digits")
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise TopologyError(
                f"[[removed]]: field 'name' must be a region name, got {self.name!r}"
            )
        if not is_int(self.id) or not 1 <= self.id <= 255:
            raise TopologyError(
                f"[[removed]]: field 'id' must be an integer in 1..255, got {self.id!r}"
            )


@dataclass(frozen=True)
class Topology:
    """All regions of a deployment, the mirror naming policy and the shard count they share."""

    regions: tuple[RegionConfig, ...]
    mirror_naming: str = "identity"
    shards: int = 1
    replication_factor: int | None = None
    """Replicas of each topic a node creates; None: the broker's default.replication.factor."""
    min_insync_replicas: int | None = None
    """The created topics' min.insync.replicas; None: the broker's."""
    retention: RetentionPolicy | None = None
    """The `[retention]` table (`streams.config.retention`); None: op logs keep everything."""
    removed: tuple[RemovedRegion, ...] = ()
    """Regions that left (`[[removed]]` tables): never reused, their old records still valid."""
    compression: str = DEFAULT_COMPRESSION
    """compression.type of the op-log producers and the mirrors (`streams.config.kafka`)."""
    _by_name: dict[str, RegionConfig] = field(init=False, repr=False, compare=False)
    _by_id: dict[int, RegionConfig] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", tuple(self.regions))
        if self.mirror_naming not in MIRROR_NAMINGS:
            raise TopologyError(
                f"[topology]: field 'mirror_naming' must be one of {', '.join(MIRROR_NAMINGS)},"
                f" got {self.mirror_naming!r}"
            )
        check_shard_count(self.shards)
        if self.compression not in COMPRESSIONS:
            raise TopologyError(
                f"[topology]: field 'compression' must be one of {', '.join(COMPRESSIONS)},"
                f" got {self.compression!r}"
            )
        check_replication(self.replication_factor, self.min_insync_replicas)
        if not self.regions:
            raise TopologyError("no regions: add at least one [[region]] table")
        for region in self.regions:
            if not isinstance(region, RegionConfig):
                raise TopologyError(f"regions must be RegionConfig objects, got {region!r}")
        object.__setattr__(
            self, "regions", tuple(region._with_shards(self.shards) for region in self.regions)
        )
        by_name: dict[str, RegionConfig] = {}
        by_id: dict[int, RegionConfig] = {}
        alias_home: dict[str, RegionConfig] = {}
        for region in self.regions:
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
        object.__setattr__(self, "removed", tuple(self.removed))
        for gone in self.removed:
            if not isinstance(gone, RemovedRegion):
                raise TopologyError(f"removed must be RemovedRegion objects, got {gone!r}")
            clash = by_id.get(gone.id) or by_name.get(gone.name)
            if clash is not None:
                raise TopologyError(
                    f"region {clash.name!r} (id {clash.id}): region {gone.name!r} (id {gone.id})"
                    " was removed from this topology (streams region remove), and a removed"
                    " region's id and name are never used again: give the region a new name and"
                    " an id no region ever had"
                )
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_id", by_id)
        register_topology(self)

    @property
    def names(self) -> list[str]:
        return [region.name for region in self.regions]

    def region(self, name: str) -> RegionConfig:
        try:
            return self._by_name[name]
        except KeyError:
            if any(gone.name == name for gone in self.removed):
                raise KeyError(
                    f"region {name!r} was removed from the topology (streams region remove):"
                    f" it cannot come back under its name or id (regions: {', '.join(self.names)})"
                ) from None
            raise KeyError(
                f"no region named {name!r} in the topology (regions: {', '.join(self.names)})"
            ) from None

    @property
    def origins(self) -> dict[int, str]:
        """Every region id that ever wrote to this topology -> its name: the current regions
        and the removed ones (their records stay valid)."""
        out = {gone.id: gone.name for gone in self.removed}
        out.update({region.id: region.name for region in self.regions})
        return out

    @property
    def signers(self) -> list[RegionConfig | RemovedRegion]:
        """Every region that ever wrote here, current and removed (for the record gate)."""
        return [*self.regions, *self.removed]

    def without(self, name: str) -> Topology:
        """This topology with region `name` removed (kept under `removed`, never reused)."""
        gone = self.region(name)
        if len(self.regions) == 1:
            raise TopologyError(f"region {name!r} is the only region: it cannot be removed")
        return dataclasses.replace(
            self,
            regions=tuple(r for r in self.regions if r.name != name),
            removed=(*self.removed, RemovedRegion(gone.name, gone.id, gone.signing_key)),
        )

    def by_id(self, region_id: int) -> RegionConfig:
        try:
            return self._by_id[region_id]
        except KeyError:
            ids = ", ".join(str(r.id) for r in self.regions)
            raise KeyError(f"no region with id {region_id} in the topology (ids: {ids})") from None

    def node(self, region: str, index: int) -> NodeConfig:
        """Node `index` of region `region`: its bind, resp_port and shards."""
        return self.region(region).node(index)

    def others(self, name: str) -> list[RegionConfig]:
        """Every region but `name` (the mirror targets of `name`'s op log)."""
        self.region(name)
        return [region for region in self.regions if region.name != name]
