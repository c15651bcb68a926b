"""One region on Apache Kafka answers like redis-server 7.0, byte for byte (issue 32, item 5).

The same generated command histories, normalisation and known deviations as the differential
test on Tansu (`differential/test_node_vs_redis_kafka.py`, whose docstring lists them), run
against a region whose writer commits to, and whose materializer reads from, a real Apache Kafka
broker: read-your-writes, the transactions of a batch and the replies held until they commit go
through the broker users deploy. Two shapes: one shard, and four shards over two node processes
(the cluster protocol, transactions on several partitions); fewer examples than on Tansu, as the
generator and the comparison are the same and the tier's time is shared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from differential.redis_server import RedisServer
from differential.test_node_vs_redis_kafka import Command, Region, history, run_example
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from topology.local import LocalTopology

pytestmark = [pytest.mark.apache_kafka, pytest.mark.slow, pytest.mark.redis]

SHAPES = {"one-shard": (1, 1), "4-shards-2-nodes": (4, 2)}


@pytest.fixture(scope="module", params=list(SHAPES))
def kafka_region(request: pytest.FixtureRequest) -> Iterator[Region]:
    shards, nodes = SHAPES[request.param]
    with LocalTopology(
        regions=1,
        manual_sync=True,
        id_mode="liberal",
        shards=shards,
        nodes=nodes,
        broker="kafka",
        mirror="mm2",
    ) as topo:
        yield Region(topo, nodes)


@settings(
    max_examples=40,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=history(), proto=st.sampled_from([2, 3]))
def test_a_region_on_apache_kafka_replies_like_redis_byte_for_byte(
    redis_server: RedisServer,
    kafka_region: Region,
    history: list[Command],
    proto: int,
) -> None:
    run_example(kafka_region, redis_server, history, proto)
