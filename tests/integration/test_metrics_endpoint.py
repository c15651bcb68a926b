"""The Prometheus endpoint of real nodes (`--metrics-port`) in an embedded three-region topology:
the replication lag of a region whose mirror from another region is paused grows under writes,
and falls to 0 once the mirror resumes."""

from __future__ import annotations

import functools
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from support import wait_until

from topology.local import LocalTopology


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of GET /metrics, by (name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def lag(topo: LocalTopology, region: int, origin: str) -> tuple[float, float, float]:
    """(lag in ops, lag in seconds, age of the newest applied op) of `origin` at `region`."""
    samples = scrape(topo.metrics_ports[region])
    labels = frozenset({("region", f"r{region}"), ("origin", origin)})
    return (
        samples[("streams_replication_lag_ops", labels)],
        samples[("streams_replication_lag_seconds", labels)],
        samples[("streams_replication_last_op_age_seconds", labels)],
    )


def test_lag_of_a_region_whose_mirror_is_paused_grows_then_falls_to_zero() -> None:
    with LocalTopology(regions=3, manual_sync=False, metrics=True) as topo:
        r1, r3 = topo.client(1), topo.client(3)
        r1.xadd("s", {"n": "0"})
        wait_until(lambda: topo.vector(2).get("r1") == 1, timeout=30)
        assert lag(topo, 2, "r1")[:2] == (0, 0)
        assert topo.mirrors is not None
        topo.mirrors.mirror("r1", "r2").pause()  # r2 gets nothing from r1's log any more

        def r3_applied(count: int) -> bool:
            return topo.vector(3).get("r1") == count

        def r2_lags(count: int) -> bool:
            return lag(topo, 2, "r1")[0] == count

        seen: list[float] = []
        for n in range(1, 4):
            for k in range(5):
                r1.xadd("s", {"n": f"{n}.{k}"})
            # r3 applies r1's ops, then writes: its op names them in its causal context, and
            # r2, which has not got them, holds it and knows how far r1 went.
            wait_until(functools.partial(r3_applied, 1 + 5 * n), timeout=30)
            r3.xadd("s", {"from": "r3", "n": str(n)})
            wait_until(functools.partial(r2_lags, 5 * n), timeout=30)
            seen.append(lag(topo, 2, "r1")[1])
        assert seen == sorted(seen) and seen[0] > 0  # the oldest waiting op only gets older
        assert lag(topo, 2, "r1")[2] >= seen[-1]  # no op of r1 applied since the pause

        topo.mirrors.mirror("r1", "r2").resume()
        wait_until(lambda: lag(topo, 2, "r1")[:2] == (0, 0), timeout=30)
        assert topo.vector(2)["r1"] == 16
        r2_shard = frozenset({("region", "r2"), ("shard", "0")})
        assert scrape(topo.metrics_ports[2])[("streams_causal_waiting_ops", r2_shard)] == 0
        r1_shard = frozenset({("region", "r1"), ("shard", "0")})
        written = scrape(topo.metrics_ports[1])
        assert written[("streams_batch_ops_sum", r1_shard)] == 16  # r1's own transactions
        assert 1 <= written[("streams_commit_seconds_count", r1_shard)] <= 16
