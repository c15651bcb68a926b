#!/usr/bin/env bash
# The image's entry point.
#   kafka-entrypoint.sh broker        a one-node KRaft broker + controller (the default)
#   kafka-entrypoint.sh CMD [ARGS]    anything else runs as given (connect-mirror-maker.sh ...)
#
# broker: server.properties is /opt/kafka/config/server-defaults.properties, then every KAFKA_*
# variable as a setting, the way apache/kafka's image reads them (KAFKA_LOG_DIRS -> log.dirs:
# drop KAFKA_, lower case, `_` -> `.`, `__` -> `_`, `___` -> `-`; later settings win). Not
# settings: KAFKA_HEAP_MB (heap, MiB), KAFKA_LOG_LEVEL, KAFKA_CLUSTER_ID (else one derived from
# the hostname, as topology/apache_kafka.py derives it from the region's name). The log dir is
# formatted once (when it has no meta.properties) and served again at every later start.
set -euo pipefail
case "${1:-broker}" in
  --help | -h)
    sed -n '2,11s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
  broker) ;;
  *) exec "$@" ;;
esac

CONFIG=/tmp/server.properties
cp /opt/kafka/config/server-defaults.properties "$CONFIG"
while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_MB | KAFKA_LOG_LEVEL | KAFKA_CLUSTER_ID | KAFKA_HEAP_OPTS | KAFKA_OPTS | \
      KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS | KAFKA_JMX_OPTS | KAFKA_GC_LOG_OPTS) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  key=${name#KAFKA_}
  key=${key,,}
  key=${key//___/-}
  key=${key//__/@}
  key=${key//_/.}
  key=${key//@/_}
  printf '%s=%s\n' "$key" "$value" >> "$CONFIG"
done < <(env)

LOG_DIRS=$(sed -n 's/^log\.dirs=//p' "$CONFIG" | tail -n 1)
LOG_DIR=${LOG_DIRS%%,*}
if [ ! -w "$LOG_DIR" ] && ! mkdir -p "$LOG_DIR" 2>/dev/null; then
  echo "kafka-entrypoint: log dir $LOG_DIR is not writable by $(id -un) (uid $(id -u))" >&2
  exit 1
fi

CLUSTER_ID=${KAFKA_CLUSTER_ID:-}
if [ -z "$CLUSTER_ID" ]; then
  # 16 bytes of sha256("streams-kafka-<hostname>"), the first byte's top bit cleared (an id
  # never starts with '-'), URL-safe base64 without padding: topology/apache_kafka.cluster_id.
  hex=$(printf 'streams-kafka-%s' "$(hostname)" | sha256sum | cut -c1-32)
  hex=$(printf '%02x' $((0x${hex:0:2} & 0x7f)))${hex:2}
  CLUSTER_ID=$(printf '%b' "$(sed 's/../\\x&/g' <<< "$hex")" | base64 | tr '+/' '-_' | tr -d '=\n')
fi

: > /tmp/kafka.log
if [ ! -f "$LOG_DIR/meta.properties" ]; then
  echo "kafka-entrypoint: formatting $LOG_DIR for cluster $CLUSTER_ID"
  KAFKA_HEAP_MB=128 /opt/kafka/bin/kafka-run-class.sh kafka.tools.StorageTool format \
    --config "$CONFIG" --cluster-id "$CLUSTER_ID" --ignore-formatted
fi
exec /opt/kafka/bin/kafka-run-class.sh kafka.Kafka "$CONFIG"
