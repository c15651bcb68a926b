#!/usr/bin/env bash
# Run one of Kafka's Java programs on the image's jars: kafka-run-class.sh MAIN_CLASS [ARGS...]
# The JVM options are topology/jvm.py's DEFAULT_JVM_OPTS; the heap is $KAFKA_HEAP_MB (MiB).
# The JVM replaces this shell (exec): it is the container's process 1 and gets its signals
# (SIGTERM: Kafka's controlled shutdown, MirrorMaker's clean stop).
set -euo pipefail
if [ "$#" -lt 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,5s/^# \{0,1\}//p' "$0"
  [ "$#" -ge 1 ] && exit 0
  exit 2
fi
MAIN=$1
shift
HEAP_MB=${KAFKA_HEAP_MB:-384}
exec java "-Xms$((HEAP_MB < 64 ? HEAP_MB : 64))m" "-Xmx${HEAP_MB}m" \
  -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -XX:+ExplicitGCInvokesConcurrent -XX:MaxMetaspaceSize=128m \
  -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true \
  "-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.xml" \
  "-Dstreams.log.level=${KAFKA_LOG_LEVEL:-INFO}" \
  -cp '/opt/kafka/libs/*' "$MAIN" "$@"
