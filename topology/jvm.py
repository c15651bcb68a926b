"""Running Apache Kafka's Java programs as plain child processes (no Docker, no Kafka scripts).

The broker (`topology.apache_kafka`) and MirrorMaker 2 (`topology.mm2.process`) share what is
here: where the jars are (the cache `scripts/kafka_jars.sh` fills from Maven Central), which
`java` runs them, the log4j2 configuration that sends their logs to one file, and a child JVM
that can be stopped politely (SIGTERM: Kafka's shutdown hooks run a controlled shutdown),
killed (SIGKILL: the crash the fault tests need), frozen (SIGSTOP) and measured (RSS, CPU).

Why not Kafka's `bin/*.sh`: they come only with the release tarball, which no registry serves
here; the jars do, and the scripts are just `java -cp 'libs/*' <main class>` with options.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

from topology.broker import BrokerError

KAFKA_VERSION = "4.3.1"
"""The Kafka version `scripts/kafka/pom.xml` fetches (keep the two equal; 4.4.0's connect-mirror
is not served by Maven Central here). $STREAMS_KAFKA_VERSION picks another cached version."""

JARS_SCRIPT = "scripts/kafka_jars.sh"


def kafka_version() -> str:
    return os.environ.get("STREAMS_KAFKA_VERSION") or KAFKA_VERSION


def kafka_home() -> Path:
    """$STREAMS_KAFKA_HOME, else ~/.cache/streams/kafka-<version> (what kafka_jars.sh fills)."""
    explicit = os.environ.get("STREAMS_KAFKA_HOME")
    if explicit:
        return Path(explicit)
    return Path.home() / ".cache" / "streams" / f"kafka-{kafka_version()}"


def kafka_libs() -> Path:
    """The directory of Kafka's jars, complete (its marker written by kafka_jars.sh): a
    half-copied directory would start a JVM that dies later on a missing class."""
    libs = kafka_home() / "libs"
    if not (libs / ".complete").is_file():
        raise BrokerError(
            f"Apache Kafka {kafka_version()} jars are not in {libs}: run {JARS_SCRIPT} "
            "(needs Java 17 and Maven; it fetches them from Maven Central once)"
        )
    return libs


def java_binary() -> str:
    """$JAVA_HOME/bin/java, else `java` on PATH (Kafka 4 needs Java 17 or newer)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerError(
            "no java found (JAVA_HOME or PATH): Apache Kafka 4 needs Java 17 or newer "
            "(Debian: apt-get install openjdk-17-jre-headless)"
        )
    return found


QUIET_LOGGERS = {
    # Every client and worker prints its whole config at INFO (hundreds of lines per start).
    "org.apache.kafka.common.config.AbstractConfig": "WARN",
    "org.apache.kafka.clients.producer.ProducerConfig": "WARN",
    "org.apache.kafka.clients.consumer.ConsumerConfig": "WARN",
    "org.apache.kafka.clients.admin.AdminClientConfig": "WARN",
    "org.apache.kafka.common.utils.AppInfoParser": "WARN",
    # A line per partition of every internal topic each time a worker reads it from the start.
    "org.apache.kafka.clients.consumer.internals.SubscriptionState": "WARN",
    "kafka.request.logger": "WARN",
    "state.change.logger": "WARN",
    "kafka.authorizer.logger": "WARN",
    "org.apache.kafka.storage.internals.log": "WARN",
    "kafka.log.LogCleaner": "WARN",
    "org.eclipse.jetty": "WARN",
    "org.glassfish": "WARN",
    "org.reflections": "ERROR",
}
"""Loggers held at WARN: what they say at INFO is volume, not news, and the file is read by
people after a failure."""


def write_log4j2(path: Path, log_file: Path, level: str = "INFO") -> None:
    """A log4j2 XML configuration sending every log line to `log_file`.

    XML because log4j-core reads it with no further jar (Kafka 4's own `log4j2.yaml` needs
    jackson-dataformat-yaml, and its log4j 1 `.properties` files are no longer read at all).
    The shutdown hook is off and every line flushed: log4j would otherwise stop logging while
    Kafka's own shutdown hook is still shutting down, the part of a log one reads after a slow
    stop."""
    loggers = "\n".join(
        f"    <Logger name={quoteattr(name)} level={quoteattr(lvl)}/>"
        for name, lvl in QUIET_LOGGERS.items()
    )
    path.write_text(
        f"""<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN" shutdownHook="disable">
  <Appenders>
    <File name="file" fileName={quoteattr(str(log_file))} append="true" immediateFlush="true">
      <PatternLayout pattern="[%d] %p [%t] %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
{loggers}
    <Root level={quoteattr(level)}>
      <AppenderRef ref="file"/>
    </Root>
  </Loggers>
</Configuration>
"""
    )


DEFAULT_JVM_OPTS = (
    # C1 only, no C2: on 2 cores shared by three brokers, MirrorMaker 2 and the nodes, C2's
    # compiler threads cost more CPU than its faster code gives back. Measured (2026-11-29,
    # bench.ab, C2 beside C1 in one run, after 30,000 warm-up XADDs): one region XADD c50 P1
    # 1.27x, P16 1.10x; three regions with MirrorMaker 2 P1 1.49x, P16 1.24x, replicated
    # 1.46x / 1.24x; a broker's start 4.5-5.7 s of CPU -> 2.5-2.9 s, three brokers at once
    # ready in 4.7 s instead of 8.7-9.7 s. `STREAMS_JVM_OPTS=-XX:TieredStopAtLevel=4` gives C2
    # back (machines with cores to spare, long-lived brokers).
    "-XX:TieredStopAtLevel=1",
    # Kafka's own choice (kafka-run-class.sh). Measured on a one-node broker here: SerialGC
    # gave the same RSS (~190-200 MB idle at -Xmx384m) and start time.
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxMetaspaceSize=128m",
    "-Djava.awt.headless=true",
    # IPv4 loopback only, as every listener here is 127.0.0.1.
    "-Djava.net.preferIPv4Stack=true",
)


def extra_jvm_opts() -> list[str]:
    """`STREAMS_JVM_OPTS`: options for every broker and MirrorMaker 2 JVM we start, after ours
    (so a later `-XX:` flag wins), split at white space; e.g. `-XX:TieredStopAtLevel=4` to give
    the JVMs C2 back. Kafka's own `KAFKA_OPTS` is never read: it is meant for the user's own
    Kafka tools."""
    return os.environ.get("STREAMS_JVM_OPTS", "").split()


def class_archive(main_class: str) -> Path:
    """Where the AppCDS archive of `main_class`'s JVM lives: beside Kafka's jars, so a new Kafka
    version (or java) starts a new one."""
    return kafka_home() / "cds" / f"{main_class}.jsa"


class JavaProcess:
    """One JVM child running `main_class` on Kafka's jars, in its own session (a signal meant
    for it never reaches the test runner), its stdout/stderr appended to `log_file`.

    Class data sharing (AppCDS): the first JVM of a main class that stops cleanly dumps the
    classes it loaded into an archive (`class_archive`), and later ones map it instead of
    loading and verifying those classes again: a broker started again on its data in 2.6-2.9 s
    instead of 4.5 s here, which is most of a restart. Each JVM dumps to a file of its own,
    moved into place when it stopped; an archive that does not fit (another java) is ignored
    by the JVM with a warning, and the classes are loaded as usual."""

    def __init__(
        self,
        main_class: str,
        args: Sequence[str],
        log_file: Path,
        log4j2_file: Path,
        heap_mb: int,
        jvm_opts: Sequence[str] = DEFAULT_JVM_OPTS,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        """`prefix`: what runs the JVM (e.g. `ip netns exec NAME`, which execs it in a network
        namespace: the pid stays the JVM's)."""
        self.prefix = list(prefix)
        self.main_class = main_class
        self.args = list(args)
        self.log_file = log_file
        self.log4j2_file = log4j2_file
        self.heap_mb = heap_mb
        self.jvm_opts = list(jvm_opts)
        self.env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._dump: Path | None = None
        """The archive this JVM writes at exit, while no archive of its main class exists."""

    def _sharing(self) -> list[str]:
        archive = class_archive(self.main_class)
        if archive.is_file():
            self._dump = None
            return [f"-XX:SharedArchiveFile={archive}"]
        archive.parent.mkdir(parents=True, exist_ok=True)
        self._dump = archive.with_name(f"{archive.stem}.{os.getpid()}.{id(self)}.jsa")
        return [f"-XX:ArchiveClassesAtExit={self._dump}"]

    def command(self) -> list[str]:
        return [
            *self.prefix,
            java_binary(),
            f"-Xms{min(self.heap_mb, 64)}m",
            f"-Xmx{self.heap_mb}m",
            *self.jvm_opts,
            *extra_jvm_opts(),
            *self._sharing(),
            f"-Dlog4j2.configurationFile={self.log4j2_file}",
            "-cp",
            str(kafka_libs() / "*"),
            self.main_class,
            *self.args,
        ]

    def start(self) -> None:
        if self.alive():
            raise RuntimeError(f"{self.main_class} already runs (pid {self.pid})")
        cmd = self.command()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ if self.env is None else self.env)
        # Never hand the user's own Kafka tooling options to our JVMs.
        for key in ("KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "CLASSPATH"):
            env.pop(key, None)
        with open(self.log_file, "ab") as log:
            log.write(f"--- {time.strftime('%F %T')} {' '.join(cmd)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (the JVM runs its shutdown hooks: Kafka's controlled shutdown, MirrorMaker's
        clean stop of its tasks), then SIGKILL after `timeout`. Returns the exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            self._cont(proc)
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._keep_archive()
        return proc.returncode

    def _keep_archive(self) -> None:
        """Move the archive a stopped JVM dumped into place (the first one to finish wins)."""
        dump, self._dump = self._dump, None
        if dump is None or not dump.is_file():
            return
        if class_archive(self.main_class).is_file():
            dump.unlink(missing_ok=True)
        else:
            os.replace(dump, class_archive(self.main_class))

    def kill(self) -> None:
        """SIGKILL: nothing runs, no shutdown hook, what the OS has is what is left."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        dump, self._dump = self._dump, None
        if dump is not None:
            dump.unlink(missing_ok=True)  # cut short: never an archive

    def discard(self) -> None:
        """End a JVM that nothing will start again on its data (an ephemeral topology's): SIGKILL,
        which takes no time where a clean stop of MirrorMaker 2 takes ~9 s on 2 cores, unless
        this JVM is writing its main class's archive (the first of its kind here): then a
        clean stop, so that the archive exists for every later start."""
        if self._dump is not None:
            self.stop()
        else:
            self.kill()

    def keep_archive(self) -> None:
        """After a JVM run without `start` (a tool run to completion): keep what it dumped."""
        self._keep_archive()

    def pause(self) -> None:
        """SIGSTOP: every thread of the JVM stops where it is (sockets stay open)."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            self._cont(self._proc)

    @staticmethod
    def _cont(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)

    def rss_bytes(self) -> int | None:
        """Resident memory (VmRSS) now, or None when not running."""
        pid = self.pid
        if pid is None:
            return None
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def cpu_seconds(self) -> float | None:
        """User + system CPU time used so far (from /proc/<pid>/stat), or None."""
        pid = self.pid
        if pid is None:
            return None
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
        return ticks / os.sysconf("SC_CLK_TCK")
