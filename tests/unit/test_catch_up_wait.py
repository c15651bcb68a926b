"""`--catch-up-wait-ms`: the boot catch-up's fetch wait, from the node's options to its readers'
`Pacing`, refused outside its range, and passed by a local topology on Apache Kafka only (Tansu
needs its default: it holds a fetch while it assembles a long log).

Why it matters: a catch-up ends with one empty fetch per phase, each waiting the whole fetch
wait; with Tansu's 100 ms a node booting on Apache Kafka with nothing to read said "caught up: 0
records" after 0.6-0.8 s, with 10 ms after 0.1-0.2 s."""

from __future__ import annotations

import pytest

from streams.kafka.reading import Pacing
from streams.node.__main__ import main
from streams.node.kafka.kafka_log import KafkaLog
from streams.node.runtime.oplog import ReaderSpec
from topology.brokers import NODE_ARGS
from topology.local import LocalTopology

SPEC = ReaderSpec(
    on_batch=lambda batch: None, on_error=lambda exc: None, start_offsets=None, read_own=False
)
"""A reader is made without touching the broker (its consumer opens on first use)."""


def reader_pacing(catch_up_wait_ms: int | None) -> Pacing:
    log = KafkaLog("127.0.0.1:1", "r1", 1, catch_up_wait_ms=catch_up_wait_ms)
    return log.reader(0, SPEC).pacing


def test_the_readers_wait_what_the_option_says_while_catching_up() -> None:
    pacing = reader_pacing(10)
    assert pacing.catch_up_ms == 10
    assert (pacing.active_ms, pacing.idle_ms) == (Pacing().active_ms, Pacing().idle_ms)


def test_without_the_option_the_readers_keep_the_wait_tansu_needs() -> None:
    assert reader_pacing(None) == Pacing()
    assert Pacing().catch_up_ms == 100


@pytest.mark.parametrize("value", ["0", "-5", "10001"])
def test_a_wait_out_of_range_is_refused_before_anything_starts(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--topology", "/nonexistent.toml", "--region", "r1", "--catch-up-wait-ms", value])
    assert exited.value.code == 2
    assert "--catch-up-wait-ms must be within [1, 10000]" in capsys.readouterr().err


def test_a_local_topology_on_apache_kafka_passes_the_short_wait_to_its_nodes() -> None:
    topo = LocalTopology(regions=1, broker="kafka", mirror="mm2")
    flag = topo.node_args.index("--catch-up-wait-ms")
    assert topo.node_args[flag + 1] == "10" == NODE_ARGS["kafka"][1]


def test_a_local_topology_on_tansu_leaves_the_default_and_a_given_wait_stands() -> None:
    assert "--catch-up-wait-ms" not in LocalTopology(regions=1).node_args
    given = LocalTopology(regions=1, broker="kafka", node_args=["--catch-up-wait-ms", "50"])
    assert given.node_args == ["--catch-up-wait-ms", "50"]
