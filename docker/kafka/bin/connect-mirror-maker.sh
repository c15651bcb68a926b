#!/usr/bin/env bash
# MirrorMaker 2 in dedicated mode, as Kafka's own script of that name:
#   connect-mirror-maker.sh PROPERTIES [--clusters ALIAS...]
# The heap: $KAFKA_HEAP_MB, 768 MiB by default (topology/mm2/process.py: what copying 64 MiB op
# records takes; idle it stays near 160 MB).
set -euo pipefail
if [ "$#" -lt 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,5s/^# \{0,1\}//p' "$0"
  [ "$#" -ge 1 ] && exit 0
  exit 2
fi
: > /tmp/kafka.log
export KAFKA_HEAP_MB=${KAFKA_HEAP_MB:-768}
exec /opt/kafka/bin/kafka-run-class.sh org.apache.kafka.connect.mirror.MirrorMaker "$@"
