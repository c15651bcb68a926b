"""MirrorMaker 2 (dedicated mode) as a child process: `org.apache.kafka.connect.mirror.MirrorMaker`.

Given a connect-mirror-maker.properties text (from `topology.mm2.render` or written by hand),
`MirrorMaker2` writes it under a work directory and runs it on Kafka's jars (the cache of
`scripts/kafka_jars.sh`) with a small heap and its log in a file; `--clusters` limits the
process to the herders that write to the named clusters (one Connect worker per `source->target`
flow whose target is named).

Subsets of regions: `flow_properties` narrows a full config to one ordered pair (`A->B` enabled,
every other flow into B disabled, run with `--clusters B`), so one process copies one flow and
can be frozen (`pause()`, SIGSTOP) and thawed (`resume()`, SIGCONT) on its own: a test's
`sync(regions=[1, 2])` thaws A->B and B->A only. Freezing a JVM is safe for its copies (what it
wrote is written; a transaction it had open is aborted by the broker after the producer's
`transaction.timeout.ms`) but not for its Connect worker group: the frozen worker stops
heartbeating, and after `session.timeout.ms` the group coordinator drops it, so a thaw costs a
rebalance and a restart of the task (which resumes from its last committed offsets: copies again
whatever it copied since, unless exactly-once). `FLOW_WORKER_SETTINGS` raises what needs
raising; see scripts/kafka_probe.py for what was measured.

Readiness: `start()` returns once MirrorMaker logged "Kafka MirrorMaker started" (its herders
run); `wait_tasks()` waits until every MirrorSourceConnector task of the process has started,
which is when copying begins.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from topology.jvm import DEFAULT_JVM_OPTS, JavaProcess, kafka_libs, write_log4j2
from topology.ports import free_port

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
DEFAULT_HEAP_MB = 256
"""-Xmx of one MirrorMaker process: a producer buffer of 2 x 64 MiB (the op records' size,
`producer.buffer.memory` in the generated config) must fit, with the consumer's fetch of one
64 MiB record besides."""


class MirrorMakerError(RuntimeError):
    pass


def flow_properties(base: str, source: str, target: str) -> str:
    """`base` (a full config, every flow enabled) narrowed to the one flow `source->target`:
    every other flow into `target` is disabled (a properties file keeps the last value of a
    key, so appending overrides). Run it with `clusters=[target]`: the process then has one
    herder, one Connect worker, one MirrorSourceConnector."""
    aliases = _clusters(base)
    if source not in aliases or target not in aliases or source == target:
        raise ValueError(f"no flow {source}->{target} among clusters {aliases}")
    lines = [f"# This process copies {source}->{target} only (run with --clusters {target})."]
    lines += [
        f"{other}->{target}.enabled = false" for other in aliases if other not in (source, target)
    ]
    lines.append(f"{source}->{target}.enabled = true")
    return base.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def _clusters(properties: str) -> list[str]:
    for line in properties.splitlines():
        match = re.match(r"\s*clusters\s*[=:]\s*(.*)$", line)
        if match:
            return [alias.strip() for alias in match.group(1).split(",") if alias.strip()]
    raise ValueError("the properties name no clusters")


def exactly_once_settings(targets: Iterable[str], rest_port: int) -> dict[str, str]:
    """What exactly-once copying into `targets` takes in dedicated mode (KIP-618, KIP-710):
    each target's workers run source tasks with transactional producers, and the workers talk
    through the internal REST server (its leader fences zombie tasks and writes task configs),
    which listens on `rest_port` of loopback (one port per MirrorMaker process)."""
    settings = {f"{target}.exactly.once.source.support": "enabled" for target in targets}
    settings["dedicated.mode.enable.internal.rest"] = "true"
    settings["listeners"] = f"http://127.0.0.1:{rest_port}"
    return settings


def with_settings(properties: str, settings: Mapping[str, str], why: str = "") -> str:
    """`properties` with `settings` appended (later keys override earlier ones)."""
    if not settings:
        return properties
    lines = [f"# {why}"] if why else []
    lines += [f"{key} = {value}" for key, value in settings.items()]
    return properties.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


class MirrorMaker2:
    """One MirrorMaker 2 process in dedicated mode."""

    def __init__(
        self,
        name: str,
        properties: str,
        work_dir: str | Path | None = None,
        clusters: Sequence[str] | None = None,
        heap_mb: int = DEFAULT_HEAP_MB,
        log_level: str = "INFO",
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
    ) -> None:
        """`name`: a label for files and messages ("A-B"); `clusters`: the target aliases this
        process serves (`--clusters`), None for all; `work_dir`: where the properties, log4j2
        config and log go (a new temporary directory when None; kept after stop, for the
        log)."""
        self.name = name
        self.properties = properties
        self.clusters = list(clusters or [])
        self.heap_mb = heap_mb
        self.log_level = log_level
        self.jvm_opts = list(jvm_opts)
        self.work_dir = (
            Path(work_dir)
            if work_dir is not None
            else Path(tempfile.mkdtemp(prefix=f"streams-mm2-{name}-"))
        )
        self._java: JavaProcess | None = None
        self._log_offset = 0
        self.start_seconds: float | None = None
        """How long the last start() took (launch to "MirrorMaker started")."""
        self.paused = False

    @property
    def log_path(self) -> Path:
        return self.work_dir / "mirrormaker.log"

    @property
    def properties_path(self) -> Path:
        return self.work_dir / "connect-mirror-maker.properties"

    @property
    def pid(self) -> int | None:
        return self._java.pid if self._java is not None else None

    def start(self, timeout: float = 60.0) -> None:
        if self.alive():
            return
        kafka_libs()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(self.properties)
        log4j2 = self.work_dir / "log4j2.xml"
        write_log4j2(log4j2, self.log_path, self.log_level)
        args = [str(self.properties_path)]
        if self.clusters:
            args += ["--clusters", *self.clusters]
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        began = time.monotonic()
        self._java = JavaProcess(
            MAIN_CLASS, args, self.log_path, log4j2, self.heap_mb, self.jvm_opts
        )
        self._java.start()
        self.paused = False
        try:
            self._wait_log([("Kafka MirrorMaker started",)], began + timeout)
        except MirrorMakerError:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - began

    def wait_tasks(self, flows: Iterable[str], timeout: float = 60.0) -> float:
        """Until the Connect worker of every flow ("A->B") started its MirrorSourceConnector
        task since this process started (the herder logs it under `clientId=A->B`; the task
        lines themselves do not say which flow they copy); returns the seconds waited."""
        began = time.monotonic()
        needles: list[tuple[str, ...]] = [
            (f"clientId={flow},", "Starting task MirrorSourceConnector-0") for flow in flows
        ]
        self._wait_log(needles, began + timeout)
        return time.monotonic() - began

    def log_since_start(self) -> str:
        """What the process logged since its last start()."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _wait_log(self, needles: Sequence[tuple[str, ...]], deadline: float) -> None:
        """Until, for every needle, one line logged since start() holds all of its parts."""
        while True:
            java = self._java
            if java is None or not java.alive():
                code = java.exit_code() if java is not None else None
                raise MirrorMakerError(
                    f"MirrorMaker {self.name} exited ({code}); see {self.log_path}"
                )
            lines = self.log_since_start().splitlines()
            missing = [
                needle
                for needle in needles
                if not any(all(part in line for part in needle) for line in lines)
            ]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise MirrorMakerError(
                    f"MirrorMaker {self.name}: nothing logged {missing} in time; "
                    f"see {self.log_path}"
                )
            time.sleep(0.1)

    def alive(self) -> bool:
        return self._java is not None and self._java.alive()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (after SIGCONT if paused): tasks stop, offsets are committed, the worker
        leaves its group (so the next start does not wait for a ghost member); SIGKILL after
        `timeout`."""
        java, self._java = self._java, None
        self.paused = False
        if java is not None:
            java.stop(timeout)

    def kill(self) -> None:
        """SIGKILL: no offset commit, the worker stays a group member until its session times
        out (the next start's first rebalance waits for it)."""
        java, self._java = self._java, None
        self.paused = False
        if java is not None:
            java.kill()

    def pause(self) -> None:
        """SIGSTOP the whole JVM (see the module docstring for what that costs)."""
        if self._java is not None:
            self._java.pause()
            self.paused = True

    def resume(self) -> None:
        if self._java is not None:
            self._java.resume()
        self.paused = False

    def rss_bytes(self) -> int | None:
        return self._java.rss_bytes() if self._java is not None else None

    def cpu_seconds(self) -> float | None:
        return self._java.cpu_seconds() if self._java is not None else None


def new_rest_port() -> int:
    """A free loopback port for one process's internal REST server (keep it across restarts:
    the worker's id is derived from it, so a restarted process is the same worker)."""
    return free_port()
