"""On three Apache Kafka clusters with MirrorMaker 2: a random workload over many keys in every
region (two shards on two node processes per region) converges to one digest, through a partial
sync and a heal; and a MULTI/EXEC of 100 XADDs in r1, large enough to take several Kafka records,
is seen in r2 whole or not at all while MirrorMaker 2 copies it (its exactly-once transactions
follow its own poll batches, not ours: KAFKA-14021), never in part."""

from __future__ import annotations

import random
import threading

from integration.test_sharded_region import KEYS, _random_workload

from apache_kafka.conftest import require_kafka
from streams.slots import shard_of
from topology.local import LocalTopology


def test_a_random_workload_converges_on_kafka_with_two_shards_on_two_processes() -> None:
    require_kafka()
    rng = random.Random(20261127)
    with LocalTopology(
        regions=3, shards=2, nodes=2, manual_sync=True, broker="kafka", mirror="mm2"
    ) as topo:
        clients = {i: topo.cluster_client(i) for i in (1, 2, 3)}
        stamp = {i: 0 for i in clients}
        for round_ in range(2):  # r3 kept apart, then everything healed
            _random_workload(clients, rng, 250, stamp)
            topo.sync(regions=[1, 2] if round_ == 0 else None, timeout=120)  # r3 apart, then healed
        digests = {i: topo.client(i).execute_command("CRDT.DIGEST") for i in clients}
        assert len(set(digests.values())) == 1, digests
        for key in rng.sample(KEYS, 20):
            ranges = {i: clients[i].xrange(key) for i in clients}
            assert ranges[1] == ranges[2] == ranges[3], key
        assert {shard_of(k, 2) for k in KEYS if clients[1].exists(k)} == {0, 1}


TRANSACTIONS = 12
XADDS = 100
VALUE = b"v" * 12_000
"""100 XADDs of 12 kB: 1.2 MB of ops, three op packs (512 KiB each) in one Kafka transaction."""


def test_a_multi_exec_of_100_xadds_is_seen_in_another_region_whole_or_not_at_all() -> None:
    require_kafka()
    with LocalTopology(regions=2, manual_sync=False, broker="kafka", mirror="mm2") as topo:
        writer, reader = topo.client(1), topo.client(2)
        seen: dict[int, set[int]] = {n: set() for n in range(TRANSACTIONS)}
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                pipe = reader.pipeline(transaction=False)
                for n in range(TRANSACTIONS):
                    pipe.xlen(b"tx:%d" % n)
                for n, length in enumerate(pipe.execute()):
                    seen[n].add(int(length))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            for n in range(TRANSACTIONS):
                pipe = writer.pipeline(transaction=True)
                for i in range(XADDS):
                    pipe.xadd(b"tx:%d" % n, {b"i": b"%d" % i, b"v": VALUE})
                assert len(pipe.execute()) == XADDS
            topo.sync(timeout=120)
        finally:
            done.set()
            watcher.join(10)
        for n in range(TRANSACTIONS):
            seen[n].add(int(reader.xlen(b"tx:%d" % n)))
        partial = {n: sorted(lengths) for n, lengths in seen.items() if lengths - {0, XADDS}}
        assert not partial, f"r2 showed transactions in part: {partial}"
        assert all(XADDS in lengths for lengths in seen.values())
        observed_between = sum(1 for lengths in seen.values() if lengths == {0, XADDS})
        print(f"\n{observed_between} of {TRANSACTIONS} transactions watched arriving (0, then 100)")
