"""Partitions end to end on real (embedded Tansu) brokers: a mirror copies partition p of an op log
to partition p of its copy, resumes per partition, refuses a target with another partition count;
a materializer reads only its own partition of every log. (A mirror stopped and restarted
mid-copy over 4 partitions is test_mirror's test_restart_mid_stream_with_background_threads.)

This is what shards stand on: shard s's ops live in partition s of every region's logs, so the
mirror must keep each record in its partition (and in order there), and shard s's node reads
partition s alone. Three brokers (test_mirror's fixture, started anew for this module) live for
the whole module; each test uses its own region names.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import wait_until

from integration import test_mirror
from integration.test_mirror import Clusters, assert_copied, produce, read_all
from streams.crdt import ops
from streams.kafka.topics import ensure_topics, local_topic, oplog_topic
from streams.node.kafka.materializer import Materializer
from streams.node.runtime.oplog import Batch
from streams.ops.codec import encode
from topology.mirror import Mirror, MirrorError

PARTITIONS = 4

# test_mirror's fixtures, for brokers of this module's own and fresh region names per test.
clusters = test_mirror.clusters
region = test_mirror.region


def fill(bootstrap: str, topic: str, counts: dict[int, int], start: int = 0) -> None:
    """`counts[p]` records into partition p, each partition's keys and values its own."""
    for partition, count in counts.items():
        if count:
            produce(
                bootstrap,
                topic,
                count,
                start=start,
                partition=partition,
                partitions=PARTITIONS,
                key_prefix=b"p%d-" % partition,
                value=lambda i, p=partition: b"partition-%d-value-%d" % (p, i),
            )


def test_each_partition_is_copied_to_the_same_partition_and_resumed_on_its_own(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    name = region()
    topic = oplog_topic(name)
    fill(clusters.a, topic, {0: 9, 1: 0, 2: 23, 3: 5})  # partition 1 stays empty for now
    with Mirror(clusters.a, clusters.b, name, "A") as first:
        assert first.copy_available() == 37
        assert first.positions.keys() == set(range(PARTITIONS))
    assert_copied(clusters, topic, PARTITIONS)  # the target was created with 4 partitions

    fill(clusters.a, topic, {1: 4, 2: 8}, start=100)
    with Mirror(clusters.a, clusters.b, name, "A") as second:
        assert second.copy_available() == 12  # only what the target lacked, per partition
    with Mirror(clusters.a, clusters.b, name, "A") as third:
        assert third.copy_available() == 0
    assert_copied(clusters, topic, PARTITIONS)


def test_a_target_with_another_partition_count_is_refused(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    name = region()
    topic = oplog_topic(name)
    fill(clusters.a, topic, {0: 3, 3: 3})
    ensure_topics(clusters.b, [topic], partitions=2)
    with Mirror(clusters.a, clusters.b, name, "A") as mirror:
        with pytest.raises(MirrorError, match=f"has 2 partitions but {topic} on .* has 4"):
            mirror.copy_available(timeout=20)
        mirror.start()  # the background thread gives up with the same reason
        wait_until(lambda: mirror.error is not None, timeout=20)
        assert isinstance(mirror.error, MirrorError) and "has 2 partitions" in str(mirror.error)
    assert read_all(clusters.b, topic, partition=0) == []
    assert read_all(clusters.b, topic, partition=1) == []


def _op(origin: int, seq: int) -> bytes:
    return encode(ops.Op(origin, seq, (), 1000, ops.XAdd(b"k", (seq, origin), (b"f", b"v"))))


def test_a_materializer_reads_only_its_partition_of_every_log(
    clusters: Clusters, region: Callable[[], str]
) -> None:
    """Partition 2 of the region's own logs (`.local` first, then `.oplog`) and of another
    region's log; a log without a partition 2 is left alone; records that arrive after the
    catch-up too. On cluster C, which holds only this test's logs: a materializer reads every
    op log on its cluster."""
    own, other, single = region(), region(), region()
    logs = {oplog_topic(own): 1, local_topic(own): 1, oplog_topic(other): 2}
    # One partition, like an unsharded database's logs.
    produce(clusters.c, oplog_topic(single), 5, value=lambda i: _op(3, i + 1))

    def write(topic: str, first: int, count: int) -> None:
        """Seqs first..first+count-1 into every partition, each partition's seqs its own."""
        for partition in range(PARTITIONS):
            seq = 1000 * partition + first

            def value(i: int, seq: int = seq, origin: int = logs[topic]) -> bytes:
                return _op(origin, seq + i)

            produce(
                clusters.c, topic, count, partition=partition, partitions=PARTITIONS, value=value
            )

    for topic in logs:
        write(topic, 1, 6)
    received: list[Batch] = []
    errors: list[Exception] = []
    materializer = Materializer(
        clusters.c,
        local_topic(own),
        received.append,
        errors.append,
        name=f"materializer-{own}",
        own_topics=frozenset({oplog_topic(own), local_topic(own)}),
        partition=2,
    )
    materializer.start()
    try:
        assert materializer.caught_up.wait(30), materializer.progress()
        write(oplog_topic(other), 7, 3)  # read live, after the catch-up
        wait_until(lambda: sum(map(len, received)) == 3 * 6 + 3, timeout=30)
    finally:
        materializer.stop()
    assert not errors
    decoded = [record for batch in received for record in batch]
    assert {record.partition for record in decoded} == {2}
    seqs: dict[str, list[int]] = {}
    for record in decoded:
        assert isinstance(record.record, ops.Op)
        seqs.setdefault(record.topic, []).append(record.record.seq)
    assert seqs == {
        local_topic(own): list(range(2001, 2007)),
        oplog_topic(own): list(range(2001, 2007)),
        oplog_topic(other): list(range(2001, 2010)),
    }
    # The local log came first: the fold needs every local op before the replicated ones.
    assert decoded[0].topic == local_topic(own)
    assert set(materializer.positions) == {oplog_topic(other)}  # own logs dropped once caught up
    assert set(materializer.own_positions) == {oplog_topic(own), local_topic(own)}
