"""The benchmark's pure parts: what `--only` picks, per-round ratios, the Redis Cluster's slot
runs, the redis-benchmark command, and the py-spy self-time summary (no process is started)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import ab
from bench.shards import DEFAULT_SYSTEMS, FIGURES, pick
from bench.shards_profile import GC, ROOT, function_name, self_time
from bench.throughput import (
    Figures,
    Sample,
    benchmark_rate,
    shard_tags,
    split,
    xadd_benchmark_command,
)
from streams.slots import shard_of


def test_only_picks_systems_and_figures_and_names_what_it_knows() -> None:
    assert pick("s4n2,redis-cluster,p16") == (("s4n2", "redis-cluster"), ("p16",))
    assert pick("p1") == (DEFAULT_SYSTEMS, ("p1",))
    assert pick("r3s4") == (("r3s4",), FIGURES)
    with pytest.raises(ValueError, match="unknown s3: systems are redis, "):
        pick("s3,p1")


def test_ratios_pair_each_round_with_the_anchor_of_the_same_round() -> None:
    figures = Figures()
    for round_no, ours, theirs in ((1, 10.0, 100.0), (2, 30.0, 50.0), (3, 20.0, 40.0)):
        figures.add("XADD", "ours", Sample(round_no, ours, 0.0))
        figures.add("XADD", "redis", Sample(round_no, theirs, 0.0))
    figures.add("XADD replicated", "ours", Sample(1, 5.0, 0.0))
    assert figures.ratios("XADD", "ours", "redis") == (0.1, 0.5, 0.6)
    assert figures.ratios("XADD replicated", "ours", "redis", "XADD") == (0.05, 0.05, 0.05)
    assert figures.ratios("XADD", "ours", "nobody") is None
    assert figures.summary("XADD", "ours") == (10.0, 20.0, 30.0)


def test_a_tag_per_shard_and_clients_split_over_them() -> None:
    for shards in (1, 2, 4, 8):
        tags = shard_tags(shards)
        assert [shard_of(f"key:{{{t}}}:000000001234".encode(), shards) for t in tags] == list(
            range(shards)
        )
    assert split(50, 4) == [13, 13, 12, 12] and sum(split(100_000, 3)) == 100_000


def test_cluster_runs_tag_their_keys_and_plain_runs_do_not() -> None:
    plain = xadd_benchmark_command(7000, 100_000, 16)
    assert "--cluster" not in plain and "key:__rand_int__" in plain
    assert plain[plain.index("-r") + 1] == "100000" and plain[plain.index("-P") + 1] == "16"
    cluster = xadd_benchmark_command(7000, 100_000, 1, cluster=True)
    assert "--cluster" in cluster and "key:{tag}:__rand_int__" in cluster
    tagged = xadd_benchmark_command(7000, 25_000, 16, clients=13, tag="s3")
    assert "key:{s3}:__rand_int__" in tagged and tagged[tagged.index("-c") + 1] == "13"
    csv = '"test","rps","avg_latency_ms"\n"XADD key:__rand_int__ * field value","4866.86","1.2"\n'
    assert benchmark_rate(csv) == 4866.86


def test_self_time_counts_each_sample_for_its_innermost_python_function() -> None:
    raw = "\n".join(
        [
            f"main ({ROOT}/streams/node/x.py:3);parse ({ROOT}/streams/resp/parser.py:10) 30",
            f"main ({ROOT}/streams/node/x.py:3);parse ({ROOT}/streams/resp/parser.py:12) 20",
            "main (/usr/lib/python3.11/asyncio/base_events.py:1) 40",
            "run (/x/lib/python3.11/site-packages/confluent_kafka/p.py:5) 10",
            "garbage",
        ]
    )
    samples, top = self_time(raw, top=2)
    assert samples == 100
    assert top == (("parse (streams/resp/parser.py)", 0.5), ("main (asyncio/base_events.py)", 0.4))
    assert function_name("f (<string>:5)") == "f (<string>)"
    assert function_name("run (/x/lib/python3.11/site-packages/a/b.py:5)") == "run (a/b.py)"


def test_c_time_counts_for_its_python_caller_and_the_collector_apart() -> None:
    """py-spy --native stacks: C below Python is the caller's time, except the cyclic GC (it
    runs in whichever allocation crossed its threshold)."""
    loop = "_run_once (asyncio/base_events.py:1922);task_step (_asynciomodule.c:2990)"
    raw = "\n".join(
        [
            f"{loop};prepare (streams/crdt/region.py:37);gc_collect_main (libpython3.11.so.1.0) 6",
            f"{loop};prepare (streams/crdt/region.py:40);PyDict_SetItem (dictobject.c:1) 3",
            "0x7f18208a4193 (libc.so.6) 1",
        ]
    )
    samples, top = self_time(raw)
    assert samples == 10
    assert top == (
        (GC, 0.6),
        ("prepare (streams/crdt/region.py)", 0.3),
        ("0x7f18208a4193 (libc.so.6)", 0.1),
    )


def test_ab_reads_a_trees_results_and_compares_each_round_with_the_first_tree(
    tmp_path: Path,
) -> None:
    """bench.ab runs a script with a tree's code (cwd and PYTHONPATH the tree) and reports per
    figure the median, the range and the median of the per-round ratios to the first tree."""
    (tmp_path / "marker.py").write_text("NAME = 'the tree'\n")
    script = "import marker\nprint('RESULT', 'xadd P16', 10.0)\nprint('noise')\n"
    assert ab.run_in(str(tmp_path), script, []) == {"xadd P16": 10.0}
    # settings after @ reach the tree's runs: the same code is another arm
    script = "import os\nprint('RESULT', 'loop', len(os.environ['STREAMS_EVENT_LOOP']))\n"
    assert ab.run_in(f"{tmp_path}@STREAMS_EVENT_LOOP=asyncio", script, []) == {"loop": 7.0}
    old, new = "/old", "/new"
    results = {
        (str(old), "xadd P16"): [100.0, 200.0, 100.0],
        (str(new), "xadd P16"): [150.0, 300.0, 250.0],
    }
    args = argparse.Namespace(rounds=3, regions=1, requests=1000, replay=0, broker="kafka")
    table = ab.markdown(results, [old, new], args, [1.0, 2.5])
    assert "| xadd P16 | /new | 250 | 150-300 | 1.50 |" in table
    assert "| xadd P16 | /old | 100 | 100-200 | 1.00 |" in table
    assert "load average before each run 1.00-2.50" in table
    assert "1 region(s) on kafka" in table
