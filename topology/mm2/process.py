"""MirrorMaker 2 (dedicated mode) as a child process: `org.apache.kafka.connect.mirror.MirrorMaker`.

Given a connect-mirror-maker.properties text (from `topology.mm2.render` or written by hand),
`MirrorMaker2` writes it under a work directory and runs it on Kafka's jars (the cache of
`scripts/kafka_jars.sh`) with a small heap and its log in a file; `--clusters` limits the
process to the herders that write to the named clusters (one Connect worker per `source->target`
flow whose target is named).

Subsets of regions: `flow_properties` narrows a full config to one ordered pair (`A->B` enabled,
every other flow into B disabled, run with `--clusters B`), so one process copies one flow and
can be frozen (`pause()`, SIGSTOP) and thawed (`resume()`, SIGCONT) on its own: a test's
`sync(regions=[1, 2])` thaws A->B and B->A only. Measured (scripts/kafka_probe.py, section
`pause`): a flow frozen 5 s or 25 s copies what was written meanwhile within 0.1-0.8 s of the
thaw, with no duplicate and no task restart, at least once and exactly-once alike. A freeze
longer than the worker's `session.timeout.ms` (10 s) or `rebalance.timeout.ms` costs one
group rejoin on the thaw, and nothing else: each flow's Connect group has this one worker, and
the incremental cooperative assignor gives it back the task it never stopped. So Connect's
default worker timeouts are kept (a longer session only delays the first rebalance after a
SIGKILL: the new worker waits for the dead one's session or the rebalance timeout). One risk
was not observed but follows from Kafka's transactions: under exactly-once, a freeze that lands
while the task's transaction is open (a few milliseconds per poll batch) leaves it open on the
target, holding read_committed readers of that partition until the broker aborts it
(`producer.transaction.timeout.ms`), and the thawed task's producer is then fenced. Freeze when
the flow is idle (after a sync caught up), as the tests do.

Start time and memory: `fast_start_settings` (plugin discovery from ServiceLoader manifests
instead of a classpath scan) makes a process start in ~2 s instead of ~20 s, at ~160 MB RSS
instead of ~450-500 MB.

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
DEFAULT_HEAP_MB = 768
"""-Xmx of one MirrorMaker process. Measured with 64 MiB op records (the generated config's
sizes): at -Xmx256m the task died on the first one (OutOfMemoryError in the consumer's fetch,
and a task killed by an error stays dead until the process restarts); at 768m three in a row
were copied. The heap only grows when such records come: idle RSS stays ~160 MB (-Xms64m)."""


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


def fast_start_settings(aliases: Iterable[str]) -> dict[str, str]:
    """Settings that make a MirrorMaker process start in about 2 s instead of 20 (measured on
    2 cores), with a third of the memory.

    Connect's default `plugin.discovery = hybrid_warn` scans every jar on the classpath for
    plugins, once for MirrorMaker's own config and once per herder (about 6 s each here, and
    ~300 MB of RSS that stays); every plugin MirrorMaker needs is declared in a ServiceLoader
    manifest, so `service_load` finds them without a scan. The top-level key reaches
    MirrorMakerConfig, the per-alias ones each herder's worker (the worker config of a herder is
    its target's `<alias>.*` keys). One partition for the offsets and status topics of each
    flow instead of 25 and 5: one worker per flow uses one."""
    settings = {"plugin.discovery": "service_load"}
    settings.update({f"{alias}.plugin.discovery": "service_load" for alias in aliases})
    settings["offset.storage.partitions"] = "1"
    settings["status.storage.partitions"] = "1"
    return settings


def flow_worker_settings(target: str) -> dict[str, str]:
    """Worker settings for the herders writing to `target` (a worker's config is its target's
    `<alias>.*` keys; top-level keys do not reach it, except offset.storage.*, config.storage.*,
    status.storage.*, the converters, task.*, worker.* and replication.policy.*).

    `offset.flush.interval.ms`: without exactly-once, a task killed (SIGKILL) starts again
    from the source offsets committed last, and copies again everything since: with Connect's
    60 s default that was 840 of 1030 records in the probe, with 1 s 210 of 690. Exactly-once
    commits the offsets in each transaction and copied none twice."""
    return {f"{target}.offset.flush.interval.ms": "1000"}


def exactly_once_settings(targets: Iterable[str], rest_port: int | None) -> dict[str, str]:
    """What exactly-once copying into `targets` takes in dedicated mode (KIP-618, KIP-710).

    `<target>.exactly.once.source.support = enabled` makes the target's workers run source
    tasks with transactional producers (transactional.id `<source>-mm2-MirrorSourceConnector-0`)
    and commit the source offsets in each transaction; MirrorSourceConnector declares itself
    exactly-once only if its source consumer reads committed data (`<source>.consumer.
    isolation.level = read_committed`, which the generator sets). Transactions follow
    MirrorMaker's poll batches (up to max.poll.records, 500), not the source's: a source
    transaction can be split across two target transactions (KAFKA-14021: the connector does
    not define its own boundaries).

    The internal REST server (`dedicated.mode.enable.internal.rest`, `listeners` on a port of
    its own per process) lets the workers of one flow that run in several MirrorMaker
    processes reach their leader (zombie fencing, task configs). A process that is the only
    worker of its flows does not need it (measured: exactly-once tasks started and copied
    without it): pass `rest_port=None`. With it, the worker's id is `127.0.0.1:<port>/A->B`,
    stable across restarts if the port is."""
    settings = {f"{target}.exactly.once.source.support": "enabled" for target in targets}
    if rest_port is not None:
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
        self._scan_offset = 0
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
        self._scan_offset = self._log_offset
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

    def new_log(self) -> str:
        """The whole lines logged since the last call (or since start()): a watchdog's cheap
        look at a log that grows by megabytes, never read twice."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._scan_offset)
                chunk = log.read()
        except OSError:
            return ""
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next call
        self._scan_offset += end
        return chunk[:end].decode(errors="replace")

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

    def discard(self) -> None:
        """The end of a process whose offsets nobody reads again (`JavaProcess.discard`)."""
        java, self._java = self._java, None
        self.paused = False
        if java is not None:
            java.discard()

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
