#!/usr/bin/env bash
# Fetch Apache Kafka (broker) and MirrorMaker 2 with their logging backend from Maven Central,
# through scripts/kafka/pom.xml, into a cache directory keyed by Kafka's version; print that
# directory (the classpath of topology/apache_kafka.py and topology/mm2/process.py).
#
#   scripts/kafka_jars.sh            -> ~/.cache/streams/kafka-4.3.1/libs
#   STREAMS_KAFKA_HOME=/opt/k scripts/kafka_jars.sh   -> /opt/k/libs
#   STREAMS_KAFKA_VERSION=4.2.1 scripts/kafka_jars.sh -> another version (same pom)
#
# Why a marker file: the copy is complete only once mvn finished; a run interrupted halfway
# leaves jars that look fine but lack some. With the marker present later runs touch neither
# Maven nor the network, and return at once.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=scripts/kafka/pom.xml
DEFAULT_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
VERSION=${STREAMS_KAFKA_VERSION:-$DEFAULT_VERSION}
HOME_DIR=${STREAMS_KAFKA_HOME:-$HOME/.cache/streams/kafka-$VERSION}
LIBS=$HOME_DIR/libs
MARKER=$LIBS/.complete

if [ -f "$MARKER" ]; then
  echo "$LIBS"
  exit 0
fi

# Kafka 4 brokers and MirrorMaker 2 need Java 17 or newer.
JAVA=java
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA=$JAVA_HOME/bin/java; fi
if ! command -v "$JAVA" >/dev/null; then
  echo "kafka_jars: no java found: install Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi
JAVA_MAJOR=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = \([0-9.]*\)$/\1/p')
JAVA_MAJOR=${JAVA_MAJOR#1.}
JAVA_MAJOR=${JAVA_MAJOR%%.*}
if [ -z "$JAVA_MAJOR" ] || [ "$JAVA_MAJOR" -lt 17 ]; then
  echo "kafka_jars: $JAVA is Java ${JAVA_MAJOR:-?}, Kafka 4 needs 17 or newer (Debian: apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi
if ! command -v mvn >/dev/null; then
  echo "kafka_jars: no mvn found: install Maven to fetch Kafka's jars (Debian: apt-get install maven)" >&2
  exit 1
fi

mkdir -p "$LIBS"
rm -f "$LIBS"/*.jar
if ! mvn -q -B -f "$POM" -Dkafka.version="$VERSION" dependency:copy-dependencies \
    -DoutputDirectory="$LIBS" >&2; then
  echo "kafka_jars: mvn could not fetch Kafka $VERSION (see above)" >&2
  exit 1
fi
ls "$LIBS"/*.jar | wc -l > "$MARKER"
echo "$LIBS"
