"""The transactional ids of a node process's shared producer (streams.node.kafka.process_writer):
today's layouts of one shard per process keep the ids their per-shard writers had, and a shard
set names the same id in every process that derives it."""

from __future__ import annotations

from streams.node.kafka.process_writer import process_transactional_id
from streams.node.kafka.writer import transactional_id


def test_one_shard_per_process_keeps_the_per_shard_ids() -> None:
    assert process_transactional_id("r1", (0,), 1) == transactional_id("r1") == "streams-writer-r1"
    for shard in range(4):
        assert process_transactional_id("r1", (shard,), 4) == transactional_id("r1", shard, 4)


def test_a_shard_set_names_one_id_whatever_its_order() -> None:
    assert process_transactional_id("r1", (3, 1, 0, 2), 4) == "streams-writer-r1-s0+1+2+3"
    assert process_transactional_id("r1", [1, 0], 4) == process_transactional_id("r1", (0, 1), 4)
    assert process_transactional_id("r1", (0, 1), 4) != process_transactional_id("r1", (1,), 4)
