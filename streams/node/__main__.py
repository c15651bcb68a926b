"""`python -m streams.node --topology FILE --region NAME`: run one region node until stopped.

`--bind` / `--port` override the topology's RESP address; `--requirepass PASS` and
`--user NAME:PASS[:RULES]` (repeatable; RULES: Redis's ACL command rules such as
`+@read -@dangerous`, see docs/security.md) make clients authenticate (AUTH / HELLO ... AUTH)
first.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys

from streams import eventloop
from streams.config import Topology, format_shard_set, load, parse_shard_set
from streams.kafka.reading import Pacing
from streams.node import metrics
from streams.node.kafka.presence import LiveWriterError
from streams.node.node import (
    DEFAULT_CATCH_UP_TIMEOUT_S,
    DEFAULT_SNAPSHOT_EVERY_OPS,
    DEFAULT_SNAPSHOT_EVERY_S,
    NodeOptions,
    RegionNode,
)
from streams.node.pipeline.auth import AuthConfig
from streams.node.runtime.oplog import RecordAt, parse_record_at
from streams.node.runtime.writepath import DEFAULT_COMMIT_LINGER_S, DEFAULT_WRITE_TIMEOUT_S
from streams.resp.tls import AUTH_CLIENTS, TlsOptions
from streams.snapshot import SnapshotError

EXIT_LIVE_WRITER = 3
COMMIT_LINGER_ENV = "STREAMS_COMMIT_LINGER_MS"
"""The default of `--commit-linger-ms` when the flag is not given (`python -m bench.ab` arms)."""
"""A live node writes the region's shards and --takeover was not given."""


def _record_at(text: str) -> RecordAt:
    try:
        return parse_record_at(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


async def _run(args: argparse.Namespace, auth: AuthConfig) -> int:
    region = args.region
    exporter = None
    try:
        topology = load(args.topology)
        options = NodeOptions(
            topology,
            region,
            node=_node_index(topology, region, args.node, args.shards),
            debug_clock=args.debug_clock,
            topology_path=args.topology,
            debug_faults=args.debug_faults,
            snapshots=tuple(args.snapshot),
            snapshot_every_ops=args.snapshot_every_ops,
            snapshot_every_s=args.snapshot_every_s,
            skip_records=frozenset(args.skip_record),
            bind=args.bind,
            port=args.port,
            tls_port=args.tls_port,
            tls=_tls_options(args, topology.region(region).tls),
            auth=auth,
            takeover=args.takeover,
            write_timeout=args.write_timeout,
            commit_linger=args.commit_linger_ms / 1000,
            catch_up_wait_ms=args.catch_up_wait_ms,
        )
        if args.metrics_port is not None:
            exporter = metrics.Exporter.listen(options.node_config().bind, args.metrics_port)
        node = RegionNode(options)
    except (OSError, ValueError, KeyError, SnapshotError) as exc:
        print(f"streams node {region}: cannot start: {exc}", file=sys.stderr)
        return 2
    if exporter is not None:
        exporter.attach(node)
        print(f"region {region} metrics on http://{node.bind}:{exporter.port}/metrics", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await node.start(catch_up_timeout=args.catch_up_timeout)
    except LiveWriterError as exc:
        print(f"streams node {region}: not started: {exc}", file=sys.stderr)
        await node.stop()
        return EXIT_LIVE_WRITER
    except Exception as exc:
        print(f"streams node {region}: cannot start: {exc}", file=sys.stderr)
        await node.stop()
        return 1
    gc.freeze()  # the state loaded at boot is never walked by the collector again
    print(f"region {region} ready on {node.endpoints}", flush=True)
    await stop.wait()
    await node.stop()
    if exporter is not None:
        exporter.close()
    return 0


def _tls_options(args: argparse.Namespace, region: TlsOptions) -> TlsOptions:
    """The region's `[region.tls]` with the `--tls-*` options given on top."""
    return TlsOptions(
        cert_file=args.tls_cert_file if args.tls_cert_file is not None else region.cert_file,
        key_file=args.tls_key_file if args.tls_key_file is not None else region.key_file,
        ca_cert_file=(
            args.tls_ca_cert_file if args.tls_ca_cert_file is not None else region.ca_cert_file
        ),
        auth_clients=(
            args.tls_auth_clients if args.tls_auth_clients is not None else region.auth_clients
        ),
    )


def _node_index(topology: Topology, region: str, node: int | None, shards: str | None) -> int:
    """The node of the region to run: `--node K`, or the node that owns exactly `--shards`."""
    config = topology.region(region)
    if shards is None:
        return 0 if node is None else config.node(node).index
    wanted = parse_shard_set(shards)
    for candidate in config.nodes:
        if candidate.shards == wanted and node in (None, candidate.index):
            return candidate.index
    owners = ", ".join(f"node {n.index}: {format_shard_set(n.shards)}" for n in config.nodes)
    raise ValueError(f"no node of region {region} owns exactly shards {shards} ({owners})")


GC_THRESHOLDS = (100_000, 50, 100)
"""The cyclic garbage collector's thresholds in a node process. With Python's defaults (700, 10,
10) a node under write load spent a quarter to two fifths of its GIL time in the collector
(py-spy --native on `python -m bench`): each XADD allocates a dozen tracked containers, and the
state (a stream per key) was walked again and again as it grew. Measured in process, 100,000
XADDs on random keys: 20.3k/s with the defaults, 33.2k/s with these, 34.0k/s with no collector at
all. Memory is still freed by reference counting at once; only reference cycles (rare here:
exceptions kept with their tracebacks) wait longer to be collected."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streams.node",
        description="Run one region node of a topology.",
        epilog="Exit codes: 0 stopped, 1 could not start (catch-up timeout, Kafka), 2 bad "
        f"options or topology, {EXIT_LIVE_WRITER} a live node already writes the region's "
        "shards (--takeover to replace it).",
    )
    parser.add_argument("--topology", required=True, help="topology TOML file")
    parser.add_argument("--region", required=True, help="region name, e.g. r1")
    parser.add_argument(
        "--node",
        type=int,
        default=None,
        metavar="K",
        help="which of the region's node processes to run (its [[region.node]] table, from 0; "
        "default 0): its port and the shards it owns",
    )
    parser.add_argument(
        "--shards",
        default=None,
        metavar="SET",
        help="alternatively, the node owning exactly these shards (e.g. 0-3)",
    )
    parser.add_argument(
        "--log-level", default="INFO", help="INFO (default) shows catch-up progress"
    )
    parser.add_argument(
        "--catch-up-timeout",
        type=float,
        default=DEFAULT_CATCH_UP_TIMEOUT_S,
        metavar="SECONDS",
        help="give up starting when the op logs are not read to their end within this long "
        f"(default {DEFAULT_CATCH_UP_TIMEOUT_S:g}); the error says how far each topic got",
    )
    parser.add_argument(
        "--debug-clock",
        action="store_true",
        help="allow CRDT.CLOCK to pin the node's wall clock (tests and demos only)",
    )
    parser.add_argument(
        "--snapshot",
        action="append",
        default=[],
        metavar="FILE",
        help="boot from this snapshot file (streams snapshot / streams spark snapshot) and read "
        "only the op logs' tails; repeat it with one file per shard of the node",
    )
    parser.add_argument(
        "--snapshot-every-ops",
        type=int,
        default=DEFAULT_SNAPSHOT_EVERY_OPS,
        metavar="N",
        help="write a snapshot to <region>.snapshot after N new ops, its own committed writes "
        f"and the other regions' ops it applied (default {DEFAULT_SNAPSHOT_EVERY_OPS}; 0: never "
        "by count); a clean stop snapshots too after 10,000 new ops or more",
    )
    parser.add_argument(
        "--snapshot-every-s",
        type=float,
        default=DEFAULT_SNAPSHOT_EVERY_S,
        metavar="SECONDS",
        help="... or after this long with new ops "
        f"(default {DEFAULT_SNAPSHOT_EVERY_S:g}; 0: never by time)",
    )
    parser.add_argument(
        "--skip-record",
        action="append",
        default=[],
        type=_record_at,
        metavar="TOPIC:PARTITION:OFFSET",
        help="skip this record if it does not decode (repeatable; logged). Without it a record "
        "that does not decode stops the node's reading, naming where it is",
    )
    parser.add_argument(
        "--debug-faults",
        action="store_true",
        help="allow CRDT.FAULT to make op-log appends fail (tests only)",
    )
    parser.add_argument(
        "--takeover",
        action="store_true",
        help="start even when a live node already writes this region's shards: this node "
        "becomes the writer and the running one is fenced (it refuses every write from then "
        f"on, saying so). Without it such a start is refused (exit {EXIT_LIVE_WRITER}), "
        "naming the running node",
    )
    parser.add_argument(
        "--write-timeout",
        type=float,
        default=DEFAULT_WRITE_TIMEOUT_S,
        metavar="S",
        help="a write is committed or refused within S seconds of its arrival; while the op "
        "log stays unreachable after one was refused, later writes are refused at once and "
        f"reads go on (default: {DEFAULT_WRITE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--commit-linger-ms",
        type=float,
        default=None,
        metavar="MS",
        help="when a commit answers writers while others' writes already wait, hold the next "
        "batch up to MS milliseconds for the answered writers' next writes, so that many "
        "clients sending one request at a time share transactions instead of alternating "
        "between two (a process of several shards holds its shared transaction, counting "
        "over all its shards); a lone client is never held; 0 turns it off (default: "
        f"{DEFAULT_COMMIT_LINGER_S * 1000:g}, or ${COMMIT_LINGER_ENV})",
    )
    parser.add_argument(
        "--catch-up-wait-ms",
        type=int,
        default=None,
        metavar="MS",
        help="how long a fetch of the boot's catch-up may wait at the end of a log: the "
        "catch-up ends with one such empty fetch per phase. Apache Kafka answers a fetch as "
        "soon as it has records, so 10 suits it (what `streams up --broker kafka` passes); "
        "Tansu needs the time to assemble a fetch of a long log (default: "
        f"{Pacing().catch_up_ms}; a broker that runs out of time doubles it)",
    )
    parser.add_argument(
        "--bind", default=None, help="RESP bind address (default: the topology's, 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="RESP port (default: the topology's resp_port); 0: no plaintext port (with "
        "--tls-port), as Redis's `port 0`",
    )
    parser.add_argument(
        "--tls-port",
        type=int,
        default=None,
        metavar="P",
        help="serve RESP over TLS on P too (default: the topology's tls_port; 0: none)",
    )
    parser.add_argument(
        "--tls-cert-file",
        default=None,
        metavar="FILE",
        help="the node's certificate chain, PEM (default: the region's [region.tls] cert_file)",
    )
    parser.add_argument(
        "--tls-key-file", default=None, metavar="FILE", help="the certificate's private key, PEM"
    )
    parser.add_argument(
        "--tls-ca-cert-file",
        default=None,
        metavar="FILE",
        help="CA certificates that client certificates must chain to, PEM",
    )
    parser.add_argument(
        "--tls-auth-clients",
        default=None,
        metavar="yes|no|optional",
        help="yes (Redis's default): a client must present a certificate signed by the CA; "
        "optional: checked when presented; no: not asked for",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="P",
        help="serve Prometheus metrics (replication lag, commit latency, snapshots, tombstones; "
        "docs/monitoring.md) on http://BIND:P/metrics, bound as the RESP port is; 0 picks a "
        "free port and prints it (default: off)",
    )
    parser.add_argument(
        "--requirepass",
        default=None,
        metavar="PASS",
        help="password of the 'default' user (AUTH PASS); clients must authenticate first",
    )
    parser.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME:PASS[:RULES]",
        help="a user for AUTH NAME PASS (repeatable); RULES: Redis's ACL command rules, e.g. "
        "'+@read -@dangerous' or '+@all -@admin' (the user may run only what they allow; "
        "without RULES: every command); without --requirepass the 'default' user is then "
        "disabled",
    )
    args = parser.parse_args(argv)
    if args.snapshot_every_ops < 0 or args.snapshot_every_s < 0:
        parser.error("--snapshot-every-ops / --snapshot-every-s must not be negative")
    if args.commit_linger_ms is None:
        setting = os.environ.get(COMMIT_LINGER_ENV, f"{DEFAULT_COMMIT_LINGER_S * 1000:g}")
        try:
            args.commit_linger_ms = float(setting)
        except ValueError:
            parser.error(f"${COMMIT_LINGER_ENV} must be a number of milliseconds, got {setting!r}")
    if args.catch_up_wait_ms is not None and not 1 <= args.catch_up_wait_ms <= 10_000:
        parser.error(f"--catch-up-wait-ms must be within [1, 10000], got {args.catch_up_wait_ms}")
    if not 0 <= args.commit_linger_ms <= 1000:
        parser.error(f"--commit-linger-ms must be within [0, 1000], got {args.commit_linger_ms:g}")
    if not 0 < args.write_timeout <= 3600:
        parser.error(f"--write-timeout must be within (0, 3600], got {args.write_timeout:g}")
    if not args.catch_up_timeout > 0:
        parser.error(f"--catch-up-timeout must be positive, got {args.catch_up_timeout:g}")
    if args.port is not None and not 0 <= args.port < 65536:
        parser.error(f"--port must be within 0..65535, got {args.port}")
    if args.tls_port is not None and not 0 <= args.tls_port < 65536:
        parser.error(f"--tls-port must be within 0..65535, got {args.tls_port}")
    if args.tls_auth_clients is not None and args.tls_auth_clients not in AUTH_CLIENTS:
        parser.error(
            f"--tls-auth-clients must be one of {', '.join(AUTH_CLIENTS)},"
            f" got {args.tls_auth_clients!r}"
        )
    if args.metrics_port is not None and not 0 <= args.metrics_port < 65536:
        parser.error(f"--metrics-port must be within 0..65535, got {args.metrics_port}")
    try:
        auth = AuthConfig.build(args.requirepass, args.user)
    except ValueError as exc:
        parser.error(str(exc))
    gc.set_threshold(*GC_THRESHOLDS)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        eventloop.chosen()
    except eventloop.EventLoopError as exc:
        parser.error(str(exc))
    return eventloop.run(_run(args, auth))


if __name__ == "__main__":
    sys.exit(main())
