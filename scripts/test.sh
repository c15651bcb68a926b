#!/usr/bin/env bash
# The whole test suite as CI runs it (README's test command), in two phases, because the tiers
# use the machine very differently (measured on 2 cores, docs/benchmarks.md "CI's time"):
#  1. the apache_kafka tier alone: its three-region Apache Kafka + MirrorMaker 2 topologies keep
#     ~80 % of both cores busy, and its fault tests (a broker SIGKILLed and started on its data,
#     a 30 s partition) must not share them;
#  2. everything else on STREAMS_TEST_WORKERS (default 3) pytest-xdist workers side by side,
#     `--dist loadfile` (a module's tests and module fixtures stay on one worker): these tests
#     mostly wait on brokers, nodes, timeouts and Spark (a third of a core each on average), so
#     running them one after another left most of the machine idle. Each worker hands out
#     loopback ports from a slice of its own (tests/conftest.py, STREAMS_PORT_RANGE).
# Both phases always run; the script fails if either did. Arguments go to both pytest runs.
# `python3 -m pytest -q` alone runs the same tests one after another (slower, same outcome).
set -uo pipefail
cd "$(dirname "$0")/.."
workers="${STREAMS_TEST_WORKERS:-3}"
status=0
echo "test: phase 1 of 2, the apache_kafka tier on its own" >&2
python3 -m pytest -q -m "apache_kafka" "$@" || status=1
echo "test: phase 2 of 2, every other test on $workers workers side by side" >&2
python3 -m pytest -q -m "not apache_kafka" -n "$workers" --dist loadfile "$@" || status=1
exit "$status"
