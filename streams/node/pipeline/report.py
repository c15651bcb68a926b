"""What a node says about itself: CRDT.INFO's fields and INFO's sections.

INFO follows Redis 7.0's section order and field names where they apply (the replication section
also carries each other region's applied seq and lag); CRDT.INFO is the node's own account:
region, ID mode, applied vector, ops waiting, lag per origin, how it booted, snapshots, faults.
With several shards on a node, the node-wide fields add the shards' figures up and a `shard<i>`
field per shard gives that shard's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.cluster import info_section as cluster_info_section
from streams.node.pipeline import info
from streams.node.pipeline.clients import Clients
from streams.node.pipeline.stats import Stats, cpu_section
from streams.node.runtime.clock import NodeClock
from streams.node.runtime.oplog import OpLog
from streams.node.runtime.shard import Shard
from streams.node.runtime.shards import ShardSet
from streams.node.runtime.waiters import Waiters
from streams.resp.limits import Limits

Fields = dict[str, object]


@dataclass
class Report:
    region_name: str
    region_id: int
    id_mode: str
    port: int
    names: dict[int, str]
    shards: ShardSet
    log: OpLog
    clients: Clients
    waiters: Waiters
    stats: Stats
    clock: NodeClock
    started: float
    run_id: str
    cluster: bool = False
    """The node speaks the Redis Cluster protocol (its region's shards are on several nodes)."""
    limits: Limits = field(default_factory=Limits)
    """The RESP server's client limits (INFO's maxclients, rejected_connections)."""
    startup_rss: int = field(default_factory=info.rss_bytes)
    """The process's RSS when the node was built, before any shard loaded (used_memory_startup)."""

    def _name(self, origin: int) -> str:
        return self.names.get(origin, f"r{origin}")

    def _vector_text(self, vector: dict[int, int]) -> str:
        return " ".join(f"{self._name(o)}={s}" for o, s in sorted(vector.items()))

    def _newest(self) -> dict[int, int]:
        """Per origin region, the origin time of the newest op applied live, over the shards."""
        newest: dict[int, int] = {}
        for shard in self.shards.shards:
            for origin, ts in shard.replica.last_ts.items():
                newest[origin] = max(newest.get(origin, ts), ts)
        return newest

    def _lag(self) -> dict[str, int]:
        now = self.clock.now_ms()
        return {
            self._name(o): max(0, now - ts)
            for o, ts in sorted(self._newest().items())
            if o != self.region_id
        }

    # --- CRDT.INFO ------------------------------------------------------------------------------

    def crdt_info(self) -> Fields:
        shards = self.shards.shards
        single = shards[0] if len(shards) == 1 else None
        lag = self._lag()
        fields: Fields = {
            "region": self.region_name,
            "region_id": self.region_id,
            "id_mode": self.id_mode,
            "regions": " ".join(self._name(r) for r in shards[0].regions),
            "removed_regions": " ".join(self._name(r) for r in shards[0].former),
            "vector": self._vector_text(self.shards.vector()),
            "waiting_ops": sum(s.replica.region.causal.waiting for s in shards),
            "ms_since_last_op": " ".join(f"{k}={v}" for k, v in lag.items()),
            "local_seq": sum(s.replica.region.local_seq for s in shards),
            "booted_from": single.loader.booted_from
            if single
            else "; ".join(sorted({s.loader.booted_from for s in shards})),
            "snapshot_digest_check": single.loader.digest_check
            if single
            else " ".join(f"{s.index}:{s.loader.digest_check}" for s in shards),
            "snapshots_taken": sum(s.snapshotter.taken for s in shards),
            "tombstones_collected": sum(s.tombstones_collected for s in shards),
            "last_snapshot": single.snapshotter.last
            if single
            else " ".join(f"{s.index}:{s.snapshotter.last}" for s in shards if s.snapshotter.last),
            "last_snapshot_pause_ms": round(max(s.snapshotter.last_pause_ms for s in shards), 2),
            "boot_records_read": sum(s.loader.boot_records for s in shards),
            "write_fault": _first(s.write_fault for s in shards),
            "fenced": _first(
                s.fenced_by or s.write_fault or "another writer took over (fenced)"
                for s in shards
                if s.writer.fenced
            ),
            "materializer_error": _first(s.loader.fatal for s in shards),
            "records_skipped": sum(
                s.loader.reader.records_skipped for s in shards if s.loader.reader is not None
            ),
            "topics": " ".join(self._topics(shards)),
            "blocked_clients": len(self.waiters),
        }
        process_writer = getattr(self.log, "process_writer", None)
        if process_writer is not None:  # the process's shards share a producer (kafka_log.py)
            fields["writer_transactions"] = process_writer.transactions
            fields["writer_batches"] = process_writer.batches
        if single is None:
            fields["shards"] = f"{len(shards)} of {self.shards.total}"
            for shard in shards:
                fields[f"shard{shard.index}"] = self._shard_line(shard)
        return fields

    def _topics(self, shards: list[Shard]) -> list[str]:
        out: list[str] = []
        for shard in shards:
            reader = shard.loader.reader
            if reader is None:
                continue
            where = "" if self.shards.total == 1 else f"/{shard.index}"
            out += [f"{t}{where}@{p}" for t, p in sorted(reader.positions.items())]
        return out

    def _shard_line(self, shard: Shard) -> str:
        region = shard.replica.region
        return ",".join(
            [
                f"vector={self._vector_text(region.vector).replace(' ', ';')}",
                f"waiting_ops={region.causal.waiting}",
                f"local_seq={region.local_seq}",
                f"loading={int(shard.loading is not None)}",
                f"write_batches={shard.writepath.batches}",
                f"write_batch_ops={shard.writepath.ops}",
                f"last_snapshot={shard.snapshotter.last}",
            ]
        )

    # --- INFO -----------------------------------------------------------------------------------

    def write_refused(self) -> bool:
        return any(s.write_refusal() is not None for s in self.shards.shards)

    def info_sections(self) -> dict[str, Fields]:
        """INFO's sections, in Redis's order, with Redis's field names where they apply."""
        shards = self.shards.shards
        keys = sum(1 for s in shards for _ in s.replica.region.state.existing_keys())
        rss = info.rss_bytes()
        peak = max(rss, info.peak_rss_bytes())
        vector = self.shards.vector()
        stats = self.stats.stats()
        return {
            "server": info.server_section(self.port, self.started, self.run_id, self.cluster),
            "clients": {
                "connected_clients": len(self.clients.live()),
                "cluster_connections": 0,
                "maxclients": self.limits.maxclients,
                "client_recent_max_input_buffer": 0,
                "client_recent_max_output_buffer": 0,
                "blocked_clients": len(self.waiters),
                "tracking_clients": 0,
                "clients_in_timeout_table": 0,
            },
            "memory": self._memory(rss, peak),
            "persistence": {
                "loading": int(any(s.loading is not None for s in shards)),
                "async_loading": 0,
                "rdb_changes_since_last_save": 0,
                "rdb_bgsave_in_progress": 0,
                "rdb_last_save_time": int(self.started),
                "rdb_last_bgsave_status": "ok",
                "aof_enabled": 0,
                "aof_rewrite_in_progress": 0,
                "aof_last_write_status": "err" if self.write_refused() else "ok",
                "crdt_oplog": self.log.oplog_topic,
                "crdt_local_log": self.log.local_topic,
                "crdt_write_batches": sum(s.writepath.batches for s in shards),
                "crdt_write_batch_ops": sum(s.writepath.ops for s in shards),
            },
            "stats": {
                "total_connections_received": stats["total_connections_received"],
                "total_commands_processed": stats["total_commands_processed"],
                "instantaneous_ops_per_sec": stats["instantaneous_ops_per_sec"],
                "total_net_input_bytes": stats["total_net_input_bytes"],
                "total_net_output_bytes": stats["total_net_output_bytes"],
                "instantaneous_input_kbps": stats["instantaneous_input_kbps"],
                "instantaneous_output_kbps": stats["instantaneous_output_kbps"],
                "rejected_connections": self.limits.rejected,
                "expired_keys": 0,
                "evicted_keys": 0,
                "keyspace_hits": 0,
                "keyspace_misses": 0,
                "pubsub_channels": 0,
                "pubsub_patterns": 0,
                "latest_fork_usec": int(max(s.snapshotter.last_pause_ms for s in shards) * 1000),
                "total_forks": sum(s.snapshotter.taken for s in shards),
                "unexpected_error_replies": 0,
                "total_error_replies": stats["total_error_replies"],
                "total_reads_processed": stats["total_reads_processed"],
                "total_writes_processed": stats["total_writes_processed"],
                "io_threaded_reads_processed": 0,
                "io_threaded_writes_processed": 0,
            },
            "replication": self._replication(vector),
            "cpu": cpu_section(),
            "modules": {},
            "commandstats": self.stats.commandstats(),
            "errorstats": self.stats.errorstats(),
            "latencystats": self.stats.latencystats(),
            "cluster": cluster_info_section() if self.cluster else {"cluster_enabled": 0},
            "keyspace": {"db0": f"keys={keys},expires=0,avg_ttl=0"} if keys else {},
        }

    def _memory(self, rss: int, peak: int) -> Fields:
        """What Python can tell truthfully: the process's resident set (used_memory is the RSS:
        the interpreter's allocators hold no byte count), its peak, the RSS when the node was
        built (used_memory_startup, counted as the overhead) and the growth since (the dataset),
        the machine's memory. No allocator, fragmentation, Lua or replication figures."""
        startup = min(self.startup_rss, rss)
        dataset = rss - startup
        system = info.system_memory_bytes()
        return {
            "used_memory": rss,
            "used_memory_human": info.human_bytes(rss),
            "used_memory_rss": rss,
            "used_memory_rss_human": info.human_bytes(rss),
            "used_memory_peak": peak,
            "used_memory_peak_human": info.human_bytes(peak),
            "used_memory_peak_perc": f"{100 * rss / peak if peak else 0:.2f}%",
            "used_memory_overhead": startup,
            "used_memory_startup": startup,
            "used_memory_dataset": dataset,
            "used_memory_dataset_perc": f"{100 * dataset / rss if rss else 0:.2f}%",
            "total_system_memory": system,
            "total_system_memory_human": info.human_bytes(system),
            "maxmemory": 0,
            "maxmemory_human": "0B",
            "maxmemory_policy": "noeviction",
            "mem_clients_normal": 0,  # as CLIENT LIST's tot-mem: client buffers are not measured
            "mem_allocator": "libc",
        }

    def _replication(self, vector: dict[int, int]) -> Fields:
        shards = self.shards.shards
        now = self.clock.now_ms()
        replication: Fields = {
            "role": "master",
            "connected_slaves": 0,
            "master_failover_state": "no-failover",
            "master_replid": self.run_id,
            "master_replid2": "0" * 40,
            "master_repl_offset": vector.get(self.region_id, 0),
            "second_repl_offset": -1,
            "repl_backlog_active": 0,
            "crdt_region": self.region_name,
            "crdt_region_id": self.region_id,
            "crdt_id_mode": self.id_mode,
            "crdt_vector": self._vector_text(vector),
            "crdt_waiting_ops": sum(s.replica.region.causal.waiting for s in shards),
            "crdt_write_fault": _first(s.write_fault for s in shards)
            or _first(s.loader.fatal for s in shards),
        }
        newest = self._newest()
        peers = [r for r in shards[0].regions if r != self.region_id]
        replication["crdt_peers"] = len(peers)
        for i, origin in enumerate(peers):
            seen = newest.get(origin)
            replication[f"crdt_peer{i}"] = (
                f"region={self.names[origin]},id={origin},"
                f"applied_seq={vector.get(origin, 0)},"
                f"ms_since_last_op={-1 if seen is None else max(0, now - seen)}"
            )
        return replication


def _first(values: Any) -> str:
    """The first non-empty text among `values`, else ''."""
    for value in values:
        if value:
            return str(value)
    return ""
