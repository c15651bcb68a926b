# A region node built from this repository (docker-compose.yml runs one per node process of each
# region: `--node K`). The image also has the `streams` CLI, for `docker compose exec`:
#   docker compose exec region-r3 streams status --topology /topology/topology.toml --password ...
#
# BASE: python:3.11-slim by default; any Debian bookworm image with apt works too (Debian's
# python3 is 3.11): scripts/compose-local.sh passes one it made with debootstrap where no
# registry answers (podman). The project is installed into a virtualenv on PATH either way, so
# `python` and `streams` are the same commands on both bases.
ARG BASE=python:3.11-slim
FROM ${BASE}
RUN if ! command -v python3 >/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/streams \
    && useradd --system --no-create-home streams
ENV PATH=/opt/streams/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY topology ./topology
RUN pip install --no-cache-dir .
# The node keeps nothing on disk (its state is in Kafka; snapshot files are temporary): it needs
# no root and no volume.
USER streams
ENTRYPOINT ["python", "-m", "streams.node"]
