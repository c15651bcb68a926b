#!/usr/bin/env bash
# Run the docker-compose.yml demo (three Apache Kafka clusters, MirrorMaker 2, five region
# nodes) on this machine, with Docker where it can, else with podman and no image pulled.
#
#   scripts/compose-local.sh up          build what is missing, start everything but the demo,
#                                        return once every node answers PING on its port
#   scripts/compose-local.sh demo        run the SDK demo service once (exit status: the demo's)
#   scripts/compose-local.sh down [-v]   stop and remove the containers (-v: and the named
#                                        volumes, i.e. every region's data)
#   scripts/compose-local.sh engine      print which way it would run (docker or podman)
#   scripts/compose-local.sh install     install what podman's way needs from Debian where it
#                                        is missing (podman podman-compose runc debootstrap; root)
#
# STREAMS_PASSWORD must be set for up and demo (every node runs --requirepass with it).
#
# The way: `docker compose` when a Docker engine answers (`docker info`) and so does a registry
# (Docker Hub); else podman-compose (Debian: apt-get install podman podman-compose runc
# debootstrap). STREAMS_COMPOSE_ENGINE=docker|podman forces one.
# With podman, nothing is pulled: a Debian bookworm base image is made once with debootstrap
# (localhost/streams-base:bookworm; kept, and reused by later runs) and both images of the
# compose file are built FROM it (build args STREAMS_KAFKA_BASE, STREAMS_NODE_BASE). The base
# also trusts the CA certificates this host added (/usr/local/share/ca-certificates: e.g. a
# TLS-intercepting proxy's), or the builds could not reach Maven Central and PyPI.
# Containers run with runc where it is installed (crun fails on hybrid cgroups) and a
# containers.conf that sets no ulimits (raising RLIMIT_NOFILE/NPROC may be refused), unless
# CONTAINERS_CONF names one already.
#
# Environment: STREAMS_COMPOSE_PROJECT (the compose project name; default: this directory's
# name), STREAMS_COMPOSE_TIMEOUT (seconds `up` waits for the nodes, default 900),
# STREAMS_DEBIAN_MIRROR (for debootstrap, default http://deb.debian.org/debian),
# STREAMS_BASE_IMAGE (default localhost/streams-base:bookworm).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COMPOSE_FILE=$ROOT/docker-compose.yml
BASE_IMAGE=${STREAMS_BASE_IMAGE:-localhost/streams-base:bookworm}
MIRROR=${STREAMS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TIMEOUT=${STREAMS_COMPOSE_TIMEOUT:-900}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/streams/compose
# What `up` starts: every service but the one-off demo (its dependencies come with it).
SERVICES=(kafka-a kafka-b kafka-c mirror-maker region-r1 region-r1-n1 region-r2 region-r2-n1
  region-r3)
# Each node's published port on 127.0.0.1, as docker-compose.yml publishes them.
NODE_PORTS=(6380 6390 6381 6391 6382)

usage() { sed -n '2,33s/^# \{0,1\}//p' "$0"; }
die() {
  echo "compose-local: $*" >&2
  exit 1
}
say() { echo "compose-local: $*" >&2; }

docker_usable() {
  command -v docker >/dev/null || return 1
  timeout 20 docker info >/dev/null 2>&1 || return 1
  timeout 20 docker compose version >/dev/null 2>&1 || return 1
  # A registry answers when Docker Hub's API says anything over HTTP (401 without a token).
  local code
  code=$(curl -s -o /dev/null -m 10 -w '%{http_code}' https://registry-1.docker.io/v2/ || true)
  [ -n "$code" ] && [ "$code" != "000" ]
}

engine() {
  case "${STREAMS_COMPOSE_ENGINE:-}" in
    docker | podman)
      echo "$STREAMS_COMPOSE_ENGINE"
      return
      ;;
    "") ;;
    *) die "STREAMS_COMPOSE_ENGINE is '$STREAMS_COMPOSE_ENGINE': docker or podman" ;;
  esac
  if docker_usable; then echo docker; else echo podman; fi
}

podman_setup() {
  command -v podman >/dev/null && command -v podman-compose >/dev/null ||
    die "no usable Docker engine and no podman: apt-get install -y podman podman-compose runc debootstrap"
  if [ -z "${CONTAINERS_CONF:-}" ]; then
    mkdir -p "$CACHE"
    {
      echo '[containers]'
      echo 'default_ulimits = []'
      if command -v runc >/dev/null; then
        printf '\n[engine]\nruntime = "runc"\n'
      fi
    } > "$CACHE/containers.conf"
    export CONTAINERS_CONF=$CACHE/containers.conf
  fi
  podman info >/dev/null 2>&1 || die "podman does not work here: $(podman info 2>&1 | tail -n 3)"
}

# The Debian bookworm base image, made once with debootstrap (nothing pulled).
podman_base() {
  if podman image exists "$BASE_IMAGE"; then
    say "base image $BASE_IMAGE: already built, reused"
    return
  fi
  command -v debootstrap >/dev/null || die "no debootstrap to make $BASE_IMAGE: apt-get install -y debootstrap"
  [ "$(id -u)" = 0 ] || die "debootstrap needs root to make $BASE_IMAGE"
  local dir began
  began=$(date +%s)
  dir=$(mktemp -d /var/tmp/streams-base.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$dir'" EXIT
  say "making $BASE_IMAGE with debootstrap from $MIRROR (once)"
  debootstrap --variant=minbase --include=ca-certificates bookworm "$dir/rootfs" "$MIRROR" >&2 ||
    die "debootstrap failed (see above)"
  local certs=0 crt
  for crt in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$crt" ] || continue
    cp "$crt" "$dir/rootfs/usr/local/share/ca-certificates/"
    certs=$((certs + 1))
  done
  if [ "$certs" -gt 0 ]; then
    chroot "$dir/rootfs" update-ca-certificates >&2
    say "the base trusts this host's $certs added CA certificate(s)"
  fi
  cat > "$dir/rootfs/etc/apt/sources.list" << EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -rf "$dir/rootfs/var/cache/apt/archives/"*.deb "$dir/rootfs/var/lib/apt/lists/"*
  # pip in a virtualenv trusts its own certifi bundle, not the system's: point it at the system's.
  tar -C "$dir/rootfs" -c . | podman import \
    --change 'CMD ["/bin/bash"]' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    - "$BASE_IMAGE" >&2 || die "podman import of $BASE_IMAGE failed"
  rm -rf "$dir"
  trap - EXIT
  say "base image $BASE_IMAGE made in $(($(date +%s) - began)) s"
}

compose() {
  local project=()
  if [ -n "${STREAMS_COMPOSE_PROJECT:-}" ]; then project=(-p "$STREAMS_COMPOSE_PROJECT"); fi
  if [ "$ENGINE" = docker ]; then
    docker compose "${project[@]}" -f "$COMPOSE_FILE" "$@"
  else
    podman-compose "${project[@]}" -f "$COMPOSE_FILE" "$@"
  fi
}

# PING with AUTH over RESP, in bash: exit 0 when the node on 127.0.0.1:$1 answers PONG.
ping_node() {
  local port=$1 reply line
  { exec 3<> "/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
  printf '*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n' \
    "$(printf '%s' "$STREAMS_PASSWORD" | wc -c)" "$STREAMS_PASSWORD" >&3 || {
    exec 3>&-
    return 1
  }
  # Two replies, a line each: AUTH's (+OK, or an error) and PING's (+PONG).
  reply=
  IFS= read -r -t 5 line <&3 && reply=$line && IFS= read -r -t 5 line <&3 && reply+=$line
  exec 3>&-
  [[ $reply == *+PONG* ]]
}

wait_nodes() {
  local deadline=$(($(date +%s) + TIMEOUT)) waiting port
  while :; do
    waiting=()
    for port in "${NODE_PORTS[@]}"; do
      ping_node "$port" || waiting+=("$port")
    done
    [ "${#waiting[@]}" -eq 0 ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      compose ps >&2 || true
      die "nodes on 127.0.0.1:${waiting[*]} did not answer PING in ${TIMEOUT} s (logs: $ENGINE logs <container>)"
    fi
    sleep 2
  done
}

require_password() {
  [ -n "${STREAMS_PASSWORD:-}" ] || die "set STREAMS_PASSWORD (the nodes' password) first"
}

cmd=${1:-}
[ "$#" -gt 0 ] && shift
case "$cmd" in
  -h | --help | help)
    usage
    exit 0
    ;;
  up | demo | down | engine | install) ;;
  "")
    usage >&2
    exit 2
    ;;
  *) die "unknown command '$cmd' (up, demo, down [-v], engine, install; --help)" ;;
esac

if [ "$cmd" = install ]; then
  missing=()
  for tool in podman podman-compose runc debootstrap; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    say "podman, podman-compose, runc and debootstrap are installed"
    exit 0
  fi
  [ "$(id -u)" = 0 ] || die "installing ${missing[*]} needs root: sudo apt-get install -y ${missing[*]}"
  say "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
  exit 0
fi

ENGINE=$(engine)
if [ "$cmd" = engine ]; then
  echo "$ENGINE"
  exit 0
fi
[ "$ENGINE" = podman ] && podman_setup

case "$cmd" in
  up)
    [ "$#" -eq 0 ] || die "up takes no arguments"
    require_password
    began=$(date +%s)
    if [ "$ENGINE" = docker ]; then
      say "Docker engine and registry answer: docker compose up --build -d"
      compose up --build -d "${SERVICES[@]}"
    else
      say "no Docker engine or no registry: podman-compose, images built here from Debian packages"
      podman_base
      export STREAMS_KAFKA_BASE=$BASE_IMAGE STREAMS_NODE_BASE=$BASE_IMAGE
      # One build per image (podman-compose's `up --build` builds once per service); podman
      # reuses cached layers, so an unchanged tree builds in seconds.
      compose build kafka-a region-r1
      compose up -d --no-build "${SERVICES[@]}"
    fi
    wait_nodes
    say "up with $ENGINE in $(($(date +%s) - began)) s: every node answers PING on 127.0.0.1 ports ${NODE_PORTS[*]}"
    ;;
  demo)
    [ "$#" -eq 0 ] || die "demo takes no arguments"
    require_password
    say "running the SDK demo with $ENGINE"
    if [ "$ENGINE" = podman ]; then
      export STREAMS_KAFKA_BASE=$BASE_IMAGE STREAMS_NODE_BASE=$BASE_IMAGE
      # podman-compose 1.0's `run` exits 0 whatever the container's exit code (it prints
      # "exit code: N"): run it detached under a name, follow its output, take its code from
      # `podman wait`.
      name="streams-demo-$$"
      podman rm -f "$name" >/dev/null 2>&1 || true
      compose run -d --no-deps --name "$name" demo >/dev/null
      podman logs -f "$name" || true
      code=$(podman wait "$name")
      podman rm -f "$name" >/dev/null 2>&1 || true
      [ "$code" = 0 ] || die "the demo exited with $code"
    else
      compose run --rm demo
    fi
    ;;
  down)
    volumes=()
    for arg in "$@"; do
      case "$arg" in
        -v | --volumes) volumes=(-v) ;;
        *) die "down takes only -v (also delete the named volumes: every region's data)" ;;
      esac
    done
    # The compose file refuses to load without a password; down needs none.
    export STREAMS_PASSWORD=${STREAMS_PASSWORD:-unused-by-down}
    [ "$ENGINE" = podman ] && export STREAMS_KAFKA_BASE=$BASE_IMAGE STREAMS_NODE_BASE=$BASE_IMAGE
    # 30 s for each container to stop on SIGTERM (a broker's controlled shutdown writes its
    # clean-shutdown marker; podman-compose's default is 1 s before SIGKILL).
    compose down -t 30 "${volumes[@]}"
    say "down with $ENGINE${volumes:+ (volumes deleted)}"
    ;;
esac
