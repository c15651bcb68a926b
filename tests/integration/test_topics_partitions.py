"""`ensure_topics` with a shard count, on a real embedded broker: topics get one partition per
shard, and a topic that exists with another partition count is refused (the shard count is fixed
when the topics are created), whether it existed before or a racing creator made it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from streams.kafka import topics
from streams.kafka.topics import TopicError, ensure_topics
from topology.broker import EmbeddedBroker


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    broker = EmbeddedBroker("topics-partitions")
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def fresh(count: int = 1) -> list[str]:
    """Topic names no other test of the module uses (the broker is shared)."""
    tag = uuid.uuid4().hex[:8]
    return [f"t{tag}-{i}.oplog" for i in range(count)]


def every_topic(bootstrap: str) -> dict[str, int]:
    """Every topic on the broker and its partition count."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def partition_counts(bootstrap: str, names: list[str]) -> dict[str, int]:
    found = every_topic(bootstrap)
    return {name: found[name] for name in names}


def test_topics_get_one_partition_per_shard_and_ensuring_again_is_a_no_op(bootstrap: str) -> None:
    names = fresh(3)
    assert ensure_topics(bootstrap, names, partitions=4) == names
    assert partition_counts(bootstrap, names) == dict.fromkeys(names, 4)
    assert ensure_topics(bootstrap, names, partitions=4) == []
    extra = fresh()
    assert ensure_topics(bootstrap, names + extra, partitions=4) == extra  # only the missing one


def test_one_partition_by_default(bootstrap: str) -> None:
    names = fresh()
    ensure_topics(bootstrap, names)
    assert partition_counts(bootstrap, names) == dict.fromkeys(names, 1)


def test_an_existing_topic_with_another_partition_count_is_refused(bootstrap: str) -> None:
    existing, missing = fresh(2)
    ensure_topics(bootstrap, [existing], partitions=1)
    with pytest.raises(TopicError) as caught:
        ensure_topics(bootstrap, [missing, existing], partitions=2)
    message = str(caught.value)
    assert f"topic {existing} on {bootstrap} has 1 partition(s), expected 2" in message
    assert "the shard count is fixed when the topics are created" in message
    assert "[topology] shards = 1" in message
    # Nothing is created when the cluster's topics disagree with the shard count asked for.
    assert missing not in every_topic(bootstrap)


def test_a_racing_creator_with_another_partition_count_is_refused(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race made certain: the first listing does not see the topic another creator made with
    # 3 partitions, so the creation meets TOPIC_ALREADY_EXISTS and the count is checked after.
    (name,) = fresh()
    ensure_topics(bootstrap, [name], partitions=3)
    real = topics._partition_counts
    calls: list[int] = []

    def first_listing_misses_it(*args: object) -> dict[str, int | None]:
        calls.append(1)
        found = real(*args)  # type: ignore[arg-type]
        return {} if len(calls) == 1 else found

    monkeypatch.setattr(topics, "_partition_counts", first_listing_misses_it)
    with pytest.raises(TopicError, match=rf"topic {name} on .* has 3 partition\(s\), expected 2"):
        ensure_topics(bootstrap, [name], partitions=2)
    assert len(calls) == 2
    assert ensure_topics(bootstrap, [name], partitions=3) == []  # the same count: success


def test_concurrent_creators_agree_or_the_loser_is_told(bootstrap: str) -> None:
    same, different = fresh(2)
    results: dict[tuple[str, int], list[str] | str] = {}

    def create(name: str, partitions: int, tag: int) -> None:
        try:
            results[(name, tag)] = ensure_topics(bootstrap, [name], partitions=partitions)
        except TopicError as exc:
            results[(name, tag)] = str(exc)

    threads = [threading.Thread(target=create, args=(same, 2, tag)) for tag in range(4)]
    threads += [threading.Thread(target=create, args=(different, 2 + tag, tag)) for tag in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Same count: every creator succeeds and exactly one of them made the topic.
    outcomes = [results[(same, tag)] for tag in range(4)]
    assert sorted(map(str, outcomes)) == sorted(["[]"] * 3 + [str([same])]), outcomes
    assert partition_counts(bootstrap, [same]) == {same: 2}
    # Different counts: one made it, the other is refused naming both counts.
    (won,) = (tag for tag in (0, 1) if results[(different, tag)] == [different])
    lost = results[(different, 1 - won)]
    assert isinstance(lost, str), results
    assert f"has {2 + won} partition(s), expected {3 - won}" in lost
    assert partition_counts(bootstrap, [different]) == {different: 2 + won}


def test_a_partition_count_below_one_is_a_programming_error(bootstrap: str) -> None:
    with pytest.raises(ValueError, match="at least one partition, not 0"):
        ensure_topics(bootstrap, fresh(), partitions=0)
