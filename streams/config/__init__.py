"""The topology file: the deployment every process of a database reads (regions, their Kafka
clusters, shards and node processes). `streams.config.topology` holds the model and the format's
description, `streams.config.nodes` a region's node processes, `streams.config.files` reading and
writing the file."""

from streams.config.files import dump, dumps, load, loads
from streams.config.nodes import (
    MAX_SHARDS,
    NodeConfig,
    TopologyError,
    format_shard_set,
    parse_shard_set,
)
from streams.config.topology import RegionConfig, Topology

__all__ = [
    "MAX_SHARDS",
    "NodeConfig",
    "RegionConfig",
    "Topology",
    "TopologyError",
    "dump",
    "dumps",
    "format_shard_set",
    "load",
    "loads",
    "parse_shard_set",
]
