# A region node built from this repository (docker-compose.yml runs one per node process of each
# region: `--node K`). The image also has the `streams` CLI, for `docker compose exec`:
#   docker compose exec region-r3 streams status --topology /topology/topology.toml --password ...
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY topology ./topology
RUN pip install --no-cache-dir . && useradd --system --no-create-home streams
# The node keeps nothing on disk (its state is in Kafka; snapshot files are temporary): it needs
# no root and no volume.
USER streams
ENTRYPOINT ["python", "-m", "streams.node"]
