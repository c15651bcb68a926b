#!/usr/bin/env bash
# The broker's healthcheck: exit 0 once the broker started by this container's current run has
# said "Kafka Server started" (registered with its controller and unfenced; a KRaft broker
# accepts connections before that). Reads the log file kafka-entrypoint.sh empties at each start,
# instead of starting a JVM (kafka-topics.sh) every few seconds on a small machine.
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,6s/^# \{0,1\}//p' "$0"
  exit 0
fi
grep -q 'Kafka Server started' /tmp/kafka.log
