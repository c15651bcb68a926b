"""The region node: the composition root that wires a node process from its parts.

    node = RegionNode(NodeOptions(topology, "r1"))          # on the region's Kafka cluster
    node = RegionNode(options, log=MemoryLog(...))          # a test: an in-memory op log
    await node.start(); ...; await node.stop()

The parts, each owning its state (docs/architecture.md, "The region node"):
- per shard (`Shard`): the replica (state, fold), the writer and its group commit, the loader
  (boot, catch-up, reload after a failed batch), the snapshotter; made from the `OpLog` handed in;
- `ShardSet`: the shards as one keyspace, the request pipeline's backend;
- `Dispatcher`: the request pipeline (resolve, authenticate, arity, MULTI, built-ins, blocking);
- `Admin` (CRDT.*), `Report` (CRDT.INFO, INFO), `Settings` (CONFIG), clients and auth.

Everything runs on one asyncio event loop: commands one at a time (Redis-like atomicity, no
lock: dispatching a command and applying its ops never awaits), the readers' batches applied
between commands, the write paths committing in the background.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from streams.config import NodeConfig, Topology, format_shard_set
from streams.ids import IdMode
from streams.kafka.topics import Replication
from streams.node.kafka.kafka_log import KafkaLog
from streams.node.kafka.presence import Identity, LiveWriterError, Presence, taken_over_text
from streams.node.kafka.writer import transactional_id
from streams.node.pipeline import (
    auth,
    cluster,
    connection,
    latency,
    settings,
    slowlog,
    transactions,
)
from streams.node.pipeline import info as info_command
from streams.node.pipeline.admin import Admin
from streams.node.pipeline.clients import Client, Clients
from streams.node.pipeline.dispatch import Builtin, Dispatcher, sync
from streams.node.pipeline.peers import Peer, Peers
from streams.node.pipeline.report import Report
from streams.node.pipeline.stats import Stats
from streams.node.runtime.clock import NodeClock
from streams.node.runtime.loader import DEFAULT_CATCH_UP_TIMEOUT_S
from streams.node.runtime.oplog import OpLog, RecordAt
from streams.node.runtime.shard import Shard, ShardSetup
from streams.node.runtime.shards import ShardSet
from streams.node.runtime.snapshotter import (
    DEFAULT_SNAPSHOT_EVERY_OPS,
    DEFAULT_SNAPSHOT_EVERY_S,
    Pause,
    SnapshotPolicy,
)
from streams.node.runtime.tasks import Tasks
from streams.node.runtime.waiters import Waiters
from streams.node.runtime.writepath import DEFAULT_COMMIT_LINGER_S, DEFAULT_WRITE_TIMEOUT_S
from streams.node.topology_watch import TopologyWatch
from streams.reply import Reply
from streams.resp.limits import Connections, Limits
from streams.resp.server import Held, Session, serve
from streams.resp.tls import TlsOptions, client_context, server_context
from streams.snapshot import read_shard

log = logging.getLogger(__name__)

TOPOLOGY_WATCH_S = 1.0
"""How often a node looks at its topology file for removed regions."""
ACK_FLUSH_S = 0.1
"""How often the shards' housekeeping runs (coalesced XACK effects are logged at this pace)."""

__all__ = [
    "DEFAULT_CATCH_UP_TIMEOUT_S",
    "DEFAULT_SNAPSHOT_EVERY_OPS",
    "DEFAULT_SNAPSHOT_EVERY_S",
    "NodeOptions",
    "RegionNode",
]


@dataclass(frozen=True)
class NodeOptions:
    """Everything a node is told at start (`python -m streams.node`'s options)."""

    topology: Topology
    region: str
    node: int = 0
    """Which of the region's node processes this is (`--node K`): its port and shards."""
    bind: str | None = None
    """Overrides the topology's RESP bind address."""
    port: int | None = None
    """Overrides the topology's RESP port (0: no plaintext port, with a TLS port)."""
    tls_port: int | None = None
    """Overrides the topology's TLS port (`--tls-port`; 0: none)."""
    tls: TlsOptions | None = None
    """The TLS files (`--tls-*`); None: the region's `[region.tls]`."""
    auth: auth.AuthConfig = field(default_factory=auth.AuthConfig)
    clock: Callable[[], float] = time.time
    debug_clock: bool = False
    debug_faults: bool = False
    snapshots: tuple[str, ...] = ()
    """Snapshot files to boot from, one per shard at most (`streams.snapshot.read_shard` tells
    which); a shard without one boots from the newest stored snapshot."""
    snapshot_every_ops: int = DEFAULT_SNAPSHOT_EVERY_OPS
    snapshot_every_s: float = DEFAULT_SNAPSHOT_EVERY_S
    skip_records: frozenset[RecordAt] = frozenset()
    """(topic, partition, offset) of records that do not decode and that an operator decided
    to skip (each skip is logged)."""
    takeover: bool = False
    """Start even when a live node writes these shards (`--takeover`): it is fenced."""
    write_timeout: float = DEFAULT_WRITE_TIMEOUT_S
    """`--write-timeout`: a write is committed or refused within it (`runtime.writepath`)."""
    commit_linger: float = DEFAULT_COMMIT_LINGER_S
    """`--commit-linger-ms` in seconds: how long a batch waits for the writers the last commit
    answered (`streams.node.runtime.writepath.WritePath._linger`)."""
    catch_up_wait_ms: int | None = None
    """`--catch-up-wait-ms`, the catch-up's fetch wait (`Pacing`; None: its default, Tansu's)."""
    topology_path: str | None = None
    """The topology file, followed while the node runs (regions removed: `topology_watch`)."""

    def node_config(self) -> NodeConfig:
        """This node's address and shards, with --bind / --port applied."""
        config = self.topology.region(self.region).node(self.node)
        return dataclasses.replace(
            config,
            bind=config.bind if self.bind is None else self.bind,
            resp_port=config.resp_port if self.port is None else self.port,
            tls_port=config.tls_port if self.tls_port is None else self.tls_port,
        )

    def tls_options(self) -> TlsOptions:
        """The TLS files this node serves with: `--tls-*`, else the region's."""
        return self.tls if self.tls is not None else self.topology.region(self.region).tls


def _snapshot_files(files: tuple[str, ...], owned: tuple[int, ...]) -> dict[int, str]:
    """Which shard boots from which of the snapshot files given; ValueError when a file is of
    a shard this node does not own, or two files are of one shard."""
    chosen: dict[int, str] = {}
    for path in files:
        with open(path, "rb") as fp:
            shard = read_shard(fp)
        if shard not in owned:
            raise ValueError(f"{path} is a snapshot of shard {shard}, which this node does not own")
        if shard in chosen:
            raise ValueError(f"{chosen[shard]} and {path} are both snapshots of shard {shard}")
        chosen[shard] = path
    return chosen


class RegionNode:
    def __init__(self, options: NodeOptions, log: OpLog | None = None) -> None:
        self.options = options
        topology = options.topology
        self.region = region = topology.region(options.region)
        node = options.node_config()
        self.name = region.name
        self.bind, self.port = node.bind, node.resp_port
        self.tls_port = node.tls_port
        self.tls_context: ssl.SSLContext | None = (
            server_context(options.tls_options()) if node.tls_port else None
        )
        """The TLS port's server context, made (and its files checked) before anything else."""
        total = topology.shards
        self.log: OpLog = log or KafkaLog(
            region.bootstrap,
            region.name,
            region.id,
            total,
            options.skip_records,
            regions=topology.origins,  # a removed region's old records stay valid
            replication=Replication(topology.replication_factor, topology.min_insync_replicas),
            keys={r.id: bytes.fromhex(r.signing_key) for r in topology.signers if r.signing_key},
            snapshots_kept=topology.retention.snapshots if topology.retention else 1,
            # The process's shards share one transactional producer (one transaction per batch
            # of the process, streams.node.kafka.process_writer); STREAMS_WRITER_PER_SHARD=1
            # gives each shard its own, as before.
            owned=None if os.environ.get("STREAMS_WRITER_PER_SHARD") == "1" else node.shards,
            commit_linger=options.commit_linger,
            catch_up_wait_ms=options.catch_up_wait_ms,
        )
        self.presence: Presence | None = None
        """Announcements and takeover watch (`streams.node.kafka.presence`); on Kafka only."""
        if isinstance(self.log, KafkaLog):
            me = Identity.here(
                region.name,
                options.node,
                f"{node.announced}:{node.address.rsplit(':', 1)[1]}",
                node.shards,
            )
            self.presence = Presence(region.bootstrap, self.log.writers_topic, me)
            self.presence.txn = self.log.transactional_id or ""
            self.presence.shard_txn = lambda s: transactional_id(region.name, s, total)
        self.topology = topology
        """The topology as this node knows it now (regions removed while it runs included)."""
        self.watch = (
            None
            if options.topology_path is None
            else TopologyWatch(options.topology_path, topology)
        )
        self.clock = NodeClock(options.clock, pinnable=options.debug_clock)
        self.waiters = Waiters()
        self.pause = Pause()
        names = topology.origins  # removed regions' ids still name their old ops
        setup = ShardSetup(
            region_name=region.name,
            region_id=region.id,
            mode=IdMode.parse(region.id_mode),
            regions=tuple(sorted(r.id for r in topology.regions)),
            log=self.log,
            waiters=self.waiters,
            clock=self.clock,
            pause=self.pause,
            policy=SnapshotPolicy(options.snapshot_every_ops, options.snapshot_every_s),
            snapshot_files=_snapshot_files(options.snapshots, node.shards),
            shards=total,
            write_timeout=options.write_timeout,
            commit_linger=options.commit_linger,
            superseded=self._superseded,
            former=tuple(sorted(r.id for r in topology.removed)),
        )
        self.shards = ShardSet(
            [Shard(i, setup) for i in node.shards],
            total,
            self.clock,
            names,
            self.waiters,
            self.pause,
        )
        self.layout = (
            cluster.layout_of(region, total, options.node, node) if len(region.nodes) > 1 else None
        )
        self.tls_layout = (
            cluster.layout_of(region, total, options.node, node, tls=True)
            if self.layout is not None
            else None
        )
        """What CLUSTER SLOTS / SHARDS / NODES and MOVED announce to a client that came over
        TLS: every node's TLS port (a node without one: its plaintext port)."""
        self.clients = Clients()
        self.stats = Stats()
        self.limits = Limits(auth_required=options.auth.required)
        """The RESP server's client limits; CONFIG SET writes them (`settings.Settings`)."""
        self.settings = settings.Settings(
            settings.default_settings(self.port, self.bind, cluster=self.layout is not None),
            self.limits,
        )
        self.stats.configure(self.settings.values)
        self.report = Report(
            region.name,
            region.id,
            region.id_mode,
            self.port,
            names,
            self.shards,
            self.log,
            self.clients,
            self.waiters,
            self.stats,
            self.clock,
            started=time.time(),
            run_id=secrets.token_hex(20),
            cluster=self.layout is not None,
            limits=self.limits,
        )
        self.admin = Admin(
            self.shards, self.clock, self.report, options.debug_faults, self._peers(options)
        )
        routing = (
            None
            if self.layout is None or self.tls_layout is None
            else cluster.ClusterRouting(self.layout, self.tls_layout)
        )
        self.dispatcher = Dispatcher(self.shards, options.auth, self.clients, self.stats, routing)
        self.dispatcher.bind(self._builtins())
        self._tasks = Tasks()
        self._servers: list[asyncio.Server] = []

    def _peers(self, options: NodeOptions) -> Peers | None:
        """The region's other nodes, asked for their shards' figures (CRDT.DIGEST, CRDT.VECTOR)."""
        if self.layout is None:
            return None
        tls_only = {n.index for n in self.region.nodes if not n.resp_port}
        others = [
            Peer(n.index, n.ip, n.port, n.index in tls_only)
            for n in self.layout.nodes
            if n.index != options.node
        ]
        context = client_context(options.tls_options()) if tls_only else None
        return Peers(self.name, others, options.auth.credentials(), context)

    # --- life cycle -----------------------------------------------------------------------------

    async def start(
        self, serve_resp: bool = True, catch_up_timeout: float = DEFAULT_CATCH_UP_TIMEOUT_S
    ) -> None:
        """Make sure the logs exist, load every shard (snapshot, then the logs to their end),
        then serve. Raises `CatchUpTimeout` naming how far each topic got when a shard's backlog
        is not read within `catch_up_timeout` seconds."""
        loop = asyncio.get_running_loop()
        began = time.monotonic()
        await loop.run_in_executor(None, self.log.prepare)
        self.limits.max_arg = self.log.record_limit  # a longer value could never be logged
        log.info("%s: logs ready in %.2f s", self.name, time.monotonic() - began)
        if self.presence is not None:
            await loop.run_in_executor(None, self._claim, self.presence, loop)
            log.info("%s: writers checked at %.2f s", self.name, time.monotonic() - began)
        await asyncio.gather(*(s.start(catch_up_timeout) for s in self.shards.shards))
        log.info("%s: shards loaded at %.2f s", self.name, time.monotonic() - began)
        self._tasks.spawn(self._housekeeping())
        if serve_resp:
            connections = Connections(self.limits)
            for port, context in ((self.port, None), (self.tls_port, self.tls_context)):
                if port:
                    server = await serve(
                        self.handle,
                        self.bind,
                        port,
                        self.stats.traffic,
                        self.limits,
                        context,
                        connections,
                    )
                    self._servers.append(server)
        log.info("%s serving RESP on %s", self.name, self.endpoints)

    @property
    def endpoints(self) -> str:
        """Where the node serves: `host:port` and / or `host:port (TLS)`."""
        served = [f"{self.bind}:{self.port}"] if self.port else []
        if self.tls_port:
            served.append(f"{self.bind}:{self.tls_port} (TLS)")
        return ", ".join(served)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        self._tasks.cancel_all()
        await asyncio.gather(*(s.stop() for s in self.shards.shards))
        if self.presence is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.presence.close)

    def _claim(self, presence: Presence, loop: asyncio.AbstractEventLoop) -> None:
        """Refuse to start beside a live writer of these shards unless told to take over;
        then announce this node and watch for a node that takes over from it (blocking)."""
        found = presence.check()
        live = [who for who, alive in found if alive]
        if live and not self.options.takeover:
            who = live[0]
            shared = format_shard_set(set(who.shards) & set(presence.me.shards))
            which = f" (shards {shared})" if self.shards.total > 1 else ""
            raise LiveWriterError(
                f"region {self.name}{which} already has a live writer: {who.describe()}, which "
                f"answered through {presence.topic}. Stop it first, or start this node with "
                "--takeover to make it the writer: the running node is then fenced and refuses "
                "every write"
            )
        for who, alive in found:
            state = "live (--takeover)" if alive else "not running any more, or frozen"
            log.warning("%s: taking over from %s: %s", self.name, who.describe(), state)
        if presence.former_ids and isinstance(self.log, KafkaLog):
            # A shard that another process (another transactional id) wrote last: register
            # that id first, fencing its holder, before this process's own id is registered.
            self.log.fence_first = presence.former_ids
            if self.log.process_writer is not None:
                self.log.process_writer.fence_first = presence.former_ids
        presence.announce(self.options.takeover)

        def taken_over(shard: int, by: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(self._taken_over, shard, by)

        presence.watch(taken_over)

    def _superseded(self, index: int) -> str | None:
        """Whether another node announced itself as shard `index`'s writer since this one
        started (blocking; asked before a writer is renewed)."""
        if self.presence is None:
            return None
        name = self.name if self.options.topology.shards == 1 else f"{self.name} shard {index}"
        return self.presence.superseded(index, name)

    def _taken_over(self, index: int, by: dict[str, Any]) -> None:
        for shard in self.shards.shards:
            if shard.index == index:
                shard.taken_over(taken_over_text(shard.writer_name, by))

    async def handle(self, session: Session, args: list[bytes]) -> Reply | Held:
        """The RESP entry point (`streams.node.pipeline.dispatch`)."""
        return await self.dispatcher.handle(session, args)

    async def _housekeeping(self) -> None:
        watch_at = time.monotonic() + TOPOLOGY_WATCH_S
        while True:
            await asyncio.sleep(ACK_FLUSH_S)
            self.stats.sample()  # every 100 ms, as Redis samples its instantaneous rates
            if self.watch is not None and time.monotonic() >= watch_at:
                watch_at = time.monotonic() + TOPOLOGY_WATCH_S
                fresh = self.watch.poll()
                if fresh is not None:
                    self._regions_changed(fresh)
            for shard in self.shards.shards:
                try:
                    shard.housekeep()
                except Exception:
                    log.exception("%s: housekeeping failed", shard.name)

    def _regions_changed(self, topology: Topology) -> None:
        """Regions were removed from the topology file (no longer waited for) or added to it
        (waited for from now on, their records accepted): `streams.node.topology_watch`."""
        gone = sorted(set(self.topology.names) - set(topology.names))
        added = sorted(set(topology.names) - set(self.topology.names))
        if self.name in gone:  # this node's own region left: it should have been stopped
            log.error(
                "%s: this region was removed from the topology (streams region remove): stop"
                " this node; nothing it writes from now on is copied to the other regions",
                self.name,
            )
            return
        self.topology = topology
        if added:
            # Before the shards count them: a record of theirs must find a gate that knows them.
            self.shards.names.update(topology.origins)
            if isinstance(self.log, KafkaLog):
                joined = [topology.region(name) for name in added]
                self.log.admit_regions(
                    {r.id: r.name for r in joined},
                    {r.id: bytes.fromhex(r.signing_key) for r in joined if r.signing_key},
                )
        current = tuple(sorted(r.id for r in topology.regions))
        former = tuple(sorted(r.id for r in topology.removed))
        for shard in self.shards.shards:
            shard.set_regions(current, former)
        log.warning(
            "%s: region(s)%s%s: regions now %s",
            self.name,
            f" {', '.join(gone)} removed (no longer waited for)" if gone else "",
            f" {', '.join(added)} added (waited for from now on)" if added else "",
            ", ".join(topology.names),
        )

    # --- the commands the node runs itself ------------------------------------------------------

    def _builtins(self) -> dict[str, Builtin]:
        """The handlers of `router.BUILTINS`, bound once."""
        admin = self.admin
        return {
            **connection.builtins(self.options.auth, self.clients),
            **cluster.builtins(self.layout, self._keys, self.clock.now_ms, self.tls_layout),
            "info": sync(lambda c, a: info_command.info(a, self.report.info_sections())),
            "time": sync(lambda c, a: connection.server_time(self.options.clock())),
            "config": sync(self._config),
            "slowlog": sync(lambda c, a: slowlog.slowlog(a, self.stats.slowlog)),
            "latency": sync(self._latency),
            "multi": sync(transactions.multi),
            "discard": sync(transactions.discard),
            "watch": sync(transactions.watch),
            "unwatch": sync(transactions.unwatch),
            "exec": self.dispatcher.exec_transaction,
            "crdt.digest": admin.digest,
            "crdt.vector": admin.vector,
            "crdt.shards": admin.shard_figures,
            "crdt.flush": admin.flush,
            "crdt.info": admin.info,
            "crdt.clock": admin.clock_,
            "crdt.fault": admin.fault,
            "crdt.snapshot": admin.snapshot,
        }

    def _keys(self) -> Iterator[bytes]:
        for shard in self.shards.shards:
            yield from shard.replica.region.state.existing_keys()

    def _config(self, client: Client, args: list[bytes]) -> Reply:
        if args[1].lower() == b"resetstat":
            self.stats.reset()
            self.limits.rejected = 0
        reply = settings.config(args, self.settings)
        if args[1].lower() == b"set":
            self.stats.configure(self.settings.values)
        return reply

    def _latency(self, client: Client, args: list[bytes]) -> Reply:
        values = self.settings.values
        return latency.latency(
            args,
            self.stats.latency,
            self.stats.histograms,
            int(values["slowlog-log-slower-than"]),
            int(values["latency-monitor-threshold"]),
        )
