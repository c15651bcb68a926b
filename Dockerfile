# A region node built from this repository (docker-compose.yml runs one per node process of each region: `--node K`).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY topology ./topology
RUN pip install --no-cache-dir .
ENTRYPOINT ["python", "-m", "streams.node"]
