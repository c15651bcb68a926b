"""Which mirror a local topology replicates with: MirrorMaker 2, or the project's own mirror.

- `mm2`: Apache Kafka's MirrorMaker 2 in dedicated mode (`topology.mm2.process`), configured by
  the same generator as the compose file (`topology.mm2.render`: read_committed, one flow per
  ordered pair carrying the source region's op logs only, 64 MiB records), with exactly-once
  source support on (each poll batch of a flow is one transaction on the target; the nodes
  apply another region's transaction whole however MirrorMaker cuts it, `streams.crdt.fold`).
  A topology that syncs by hand (the tests) runs one process per ordered pair of clusters, so
  that `sync(regions=[1, 2])` can let exactly the flows among r1 and r2 copy while the others
  stay frozen (SIGSTOP: a frozen JVM copies nothing; a thaw after more than the worker's
  session timeout costs one rejoin of a group of one, which gets back the task it never
  stopped: measured, scripts/kafka_probe.py pause); one that replicates continuously (`streams up`)
  runs every flow in one process, as a deployment would (one JVM instead of n(n-1)).
- `embedded`: `topology.mirror` (threads of this process, Python), the light stack: it copies
  on demand (`copy_among`), which makes manual sync exact and fast for the fast test tier.

Both copy each region's op log to every other cluster at least once, partition p to partition
p, under the topology's naming policy; the nodes absorb duplicates by dot.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from streams.config import Topology
from topology.mirror import MirrorSet
from topology.mm2 import render
from topology.mm2.process import (
    MirrorMaker2,
    exactly_once_settings,
    fast_start_settings,
    flow_properties,
    flow_worker_settings,
    with_settings,
)

MIRRORS = ("mm2", "embedded")

TASK_DIED = "Task threw an uncaught and unrecoverable exception"
"""What MirrorMaker logs when a copy task died: the JVM lives on, copying nothing."""
WATCH_INTERVAL_S = 2.0
"""How often the watchdog reads what each MirrorMaker 2 process logged."""

log = logging.getLogger(__name__)


class Replication(Protocol):
    """What a local topology needs of its mirrors."""

    def start(self, copying: bool) -> None:
        """Start the mirrors; `copying` False: frozen until `resume` or `copy_among`."""
        ...

    def stop(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def copy_among(self, names: list[str], timeout: float) -> None:
        """Let the flows among `names` copy what their sources hold (the caller waits for the
        nodes to have applied it, then calls `hold`)."""
        ...

    def hold(self) -> None:
        """Freeze the flows `copy_among` let go, if the topology syncs by hand."""
        ...

    def kill(self) -> None:
        """SIGKILL the mirror processes (the embedded mirror: stop its threads at once)."""
        ...

    def discard(self) -> None:
        """Stop for good, nothing to resume later (an ephemeral topology's close): as fast as
        the mirrors allow."""
        ...

    def restart(self) -> None:
        """Start again after `kill`, resuming from what the targets hold."""
        ...

    def failures(self) -> list[str]:
        """Mirrors that gave up, and why (empty while all copy)."""
        ...


class EmbeddedReplication:
    """`topology.mirror.MirrorSet`: copies on demand, or continuously once started."""

    def __init__(self, topology: Topology, joining: frozenset[str] = frozenset()) -> None:
        self.topology = topology
        self.joining = joining
        """Regions whose clusters are filled from each log's first record held (a join)."""
        self.mirrors = MirrorSet(topology, joining=joining)
        self._copying = False

    def start(self, copying: bool) -> None:
        self._copying = copying
        if copying:
            self.mirrors.start()

    def stop(self) -> None:
        self.mirrors.stop()

    def pause(self) -> None:
        self.mirrors.pause()

    def resume(self) -> None:
        self._copying = True
        self.mirrors.resume()
        self.mirrors.start()

    def copy_among(self, names: list[str], timeout: float) -> None:
        if not self._copying or self.mirrors.paused:
            self.mirrors.copy_among(names, timeout)

    def hold(self) -> None:
        return None

    def kill(self) -> None:
        self.mirrors.stop()

    def discard(self) -> None:
        self.mirrors.stop()

    def restart(self) -> None:
        self.mirrors = MirrorSet(self.topology, joining=self.joining)
        if self._copying:
            self.mirrors.start()

    def failures(self) -> list[str]:
        return [f"{s}->{t}: {e}" for (s, t), e in self.mirrors.errors.items()]


class MirrorMakerReplication:
    """MirrorMaker 2 in dedicated mode: one process per ordered pair of clusters (`per_flow`),
    or one process for every flow."""

    def __init__(
        self,
        topology: Topology,
        work_dir: Path,
        exactly_once: bool = True,
        per_flow: bool = True,
    ) -> None:
        self.topology = topology
        self.work_dir = work_dir
        self.exactly_once = exactly_once
        base = render(topology)
        aliases = list(dict.fromkeys(r.alias for r in topology.regions))
        self._alias_of = {r.name: r.alias for r in topology.regions}
        self.flows: dict[tuple[str, str], MirrorMaker2] = {}
        """Per flow (source alias, target alias), the process that runs it."""
        pairs = [(s, t) for s in aliases for t in aliases if s != t]
        if per_flow:
            for source, target in pairs:
                text = with_settings(
                    flow_properties(base, source, target),
                    _settings(aliases, [target], exactly_once),
                    "local topology: fast start, offsets flushed every second, exactly once",
                )
                self.flows[(source, target)] = MirrorMaker2(
                    f"{source}-{target}", text, work_dir / f"{source}-{target}", [target]
                )
        else:
            text = with_settings(
                base, _settings(aliases, aliases, exactly_once), "local topology: fast start"
            )
            every = MirrorMaker2("all", text, work_dir / "all")
            self.flows = dict.fromkeys(pairs, every)
        self._copying = False
        self._thawed: list[MirrorMaker2] = []
        self._lock = threading.RLock()
        """Held by every change of the processes' state: the watchdog's thread restarts them."""
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()
        self.healed: list[str] = []
        """The processes the watchdog restarted after a task died, in order."""

    @property
    def processes(self) -> list[MirrorMaker2]:
        return list(dict.fromkeys(self.flows.values()))

    def _each(self, flows: list[MirrorMaker2], action: str) -> None:
        if not flows:
            return
        with ThreadPoolExecutor(max_workers=len(flows), thread_name_prefix="mm2") as pool:
            for future in [pool.submit(getattr(flow, action)) for flow in flows]:
                future.result()

    def start(self, copying: bool) -> None:
        with self._lock:
            self._copying = copying
            self._launch()
        self._watch()

    def _launch(self) -> None:
        processes = self.processes
        self._each(processes, "start")
        for process in processes:
            process.wait_tasks(self._flow_names(process))
        if not self._copying:
            self._each(processes, "pause")

    def _flow_names(self, process: MirrorMaker2) -> list[str]:
        return [f"{s}->{t}" for (s, t), flow in self.flows.items() if flow is process]

    def stop(self) -> None:
        self._unwatch()
        with self._lock:
            self._each([f for f in self.processes if f.paused], "resume")
            self._each(self.processes, "stop")

    def pause(self) -> None:
        with self._lock:
            self._each([f for f in self.processes if not f.paused], "pause")

    def resume(self) -> None:
        with self._lock:
            self._copying = True
            self._thawed = []
            self._each([f for f in self.processes if f.paused], "resume")

    def copy_among(self, names: list[str], timeout: float) -> None:
        chosen = {self._alias_of[name] for name in names}
        with self._lock:
            flows = list(
                dict.fromkeys(
                    flow
                    for (source, target), flow in self.flows.items()
                    if source in chosen and target in chosen and flow.paused
                )
            )
            self._each(flows, "resume")
            self._thawed += flows

    def hold(self) -> None:
        with self._lock:
            thawed, self._thawed = self._thawed, []
            if not self._copying:
                self._each(thawed, "pause")

    def kill(self) -> None:
        self._unwatch()
        with self._lock:
            self._each(self.processes, "kill")

    def discard(self) -> None:
        self._unwatch()
        with self._lock:
            self._each(self.processes, "discard")

    def restart(self) -> None:
        with self._lock:
            self._launch()
        self._watch()

    def failures(self) -> list[str]:
        out = []
        for flow in self.processes:
            if not flow.alive():
                out.append(f"MirrorMaker {flow.name} exited; see {flow.log_path}")
            elif TASK_DIED in flow.log_since_start():
                out.append(f"a copy task of MirrorMaker {flow.name} died; see {flow.log_path}")
        return out

    # The watchdog. A copy task that dies (seen: the exactly-once producer of a flow into a
    # cluster whose broker was SIGKILLed and took ~35 s to come back on a loaded machine) stays
    # dead in a JVM that lives on: Connect in dedicated mode never restarts a failed task, and
    # a restart policy on the process (compose's) never fires. What an operator's supervisor
    # does, this does: the process whose task died is stopped and started again; it resumes
    # from the offsets it committed, and what it copies twice the nodes absorb by dot.

    def _watch(self) -> None:
        if self._watcher is not None:
            return
        self._stopping.clear()
        self._watcher = threading.Thread(target=self._watch_loop, name="mm2-watchdog", daemon=True)
        self._watcher.start()

    def _unwatch(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            self._stopping.set()
            watcher.join()

    def _watch_loop(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_S):
            try:
                self.heal()
            except Exception:  # a supervisor that dies helps nobody: say it, keep watching
                log.exception("MirrorMaker 2 watchdog: a restart failed; trying again")

    def heal(self) -> list[str]:
        """Restart every running process that logged a task's death since it was last looked
        at; returns their names (also kept in `healed`)."""
        healed = []
        with self._lock:
            for process in self.processes:
                if not process.alive() or process.paused:
                    continue  # killed on purpose, or frozen: its log says nothing new
                if TASK_DIED not in process.new_log():
                    continue
                log.warning(
                    "MirrorMaker 2 %s: a copy task died (see %s); restarting the process",
                    process.name,
                    process.log_path,
                )
                process.kill()
                process.start()
                process.wait_tasks(self._flow_names(process))
                if not self._copying and process not in self._thawed:
                    process.pause()
                healed.append(process.name)
        self.healed += healed
        return healed


def _settings(aliases: list[str], targets: list[str], exactly_once: bool) -> dict[str, str]:
    """Fast start (no plugin scan), offsets flushed every second, a dead worker's tasks given to
    the next at once, and exactly-once into each of `targets` (`topology.mm2.process`)."""
    settings = fast_start_settings(aliases)
    for target in targets:
        settings.update(flow_worker_settings(target))
        # A worker started after a SIGKILL joins under a new id, and Connect keeps the dead
        # one's tasks unassigned for scheduled.rebalance.max.delay.ms (5 min) in case it
        # comes back: a restart of MirrorMaker 2 took 70 s. Nothing else runs these tasks.
        settings[f"{target}.scheduled.rebalance.max.delay.ms"] = "0"
    if exactly_once:
        settings.update(exactly_once_settings(targets, None))
    return settings


def make_replication(
    kind: str,
    topology: Topology,
    work_dir: Path,
    exactly_once: bool = True,
    per_flow: bool = True,
    joining: frozenset[str] = frozenset(),
) -> Replication:
    """The mirrors of `kind` for `topology`; `per_flow`: MirrorMaker 2 in one process per flow
    (syncs among some regions only), else in one process; `joining` (embedded mirror): regions
    whose clusters are filled from each log's first record held (`topology.join`)."""
    if kind == "embedded":
        return EmbeddedReplication(topology, joining)
    if kind == "mm2":
        return MirrorMakerReplication(topology, work_dir / "mm2", exactly_once, per_flow)
    raise ValueError(f"unknown mirror {kind!r}: expected one of {', '.join(MIRRORS)}")
