#!/usr/bin/env bash
# Run one of Kafka's Java programs on the image's jars: kafka-run-class.sh MAIN_CLASS [ARGS...]
# The JVM options are topology/jvm.py's DEFAULT_JVM_OPTS, then $STREAMS_JVM_OPTS (split at
# white space: e.g. -XX:TieredStopAtLevel=4 gives C2 back); the heap is $KAFKA_HEAP_MB (MiB).
# The JVM replaces this shell (exec): it is the container's process 1 and gets its signals
# (SIGTERM: Kafka's controlled shutdown, MirrorMaker's clean stop).
set -euo pipefail
if [ "$#" -lt 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,6s/^# \{0,1\}//p' "$0"
  [ "$#" -ge 1 ] && exit 0
  exit 2
fi
MAIN=$1
shift
HEAP_MB=${KAFKA_HEAP_MB:-384}
# shellcheck disable=SC2086 # STREAMS_JVM_OPTS is a list of options
exec java "-Xms$((HEAP_MB < 64 ? HEAP_MB : 64))m" "-Xmx${HEAP_MB}m" \
  -XX:TieredStopAtLevel=1 -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -XX:+ExplicitGCInvokesConcurrent -XX:MaxMetaspaceSize=128m \
  -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true ${STREAMS_JVM_OPTS:-} \
  "-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.xml" \
  "-Dstreams.log.level=${KAFKA_LOG_LEVEL:-INFO}" \
  -cp '/opt/kafka/libs/*' "$MAIN" "$@"
