"""The `streams` command: run a topology, look at it, and show the seed tables holding on it."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from streams import exits, importer, regioncli, statuscli
from streams.config import Topology, TopologyError, load
from streams.ids import IdMode
from streams.node.kafka import retention_cli
from streams.pipeline import verbs as sparkcli
from streams.replay import kafka_connect
from streams.replay.arguments import register as register_replay_verbs
from streams.scenarios import Scenario, SyncStep, load_all
from streams.scenarios.keyspace import KeyspaceDriver
from streams.scenarios.runner import Outcome, run
from streams.scenarios.sim import SimulatedRegions
from streams.sdk import groupcli
from streams.ui.arguments import register as register_ui_verbs
from topology.local import LocalTopology

STATE_DIR = Path(".streams")
DATA_DIR = Path("streams-data")
BROKER_NAMES = {"kafka": "Apache Kafka", "tansu": "Tansu"}
MIRROR_NAMES = {"mm2": "MirrorMaker 2", "embedded": "the embedded mirror"}


# --- up ---------------------------------------------------------------------------------------


def _up(args: argparse.Namespace) -> int:
    external = None
    if args.topology:
        if (args.shards, args.nodes) != (1, 1):
            print(
                "streams up: --shards and --nodes shape embedded regions; with --topology the"
                " file says them ([topology] shards, [[region.node]] tables)",
                file=sys.stderr,
            )
            return exits.USAGE
        try:
            external = load(args.topology)
        except (OSError, TopologyError) as exc:
            print(f"streams up: {exc}", file=sys.stderr)
            return exits.UNRESOLVED
    args.broker = args.broker or ("tansu" if args.ephemeral else "kafka")
    if args.broker == "tansu" and not args.ephemeral and args.topology is None:
        print(
            "streams up: Tansu keeps nothing on disk (its S3 storage could not restart past about"
            " 1,500 writes: docs/durability.md); add --ephemeral, or run Apache Kafka (the"
            " default)",
            file=sys.stderr,
        )
        return exits.USAGE
    args.mirror = args.mirror or ("mm2" if args.broker == "kafka" else "embedded")
    what = f"topology {args.topology}" if external else f"{args.regions} embedded regions"
    if external is None and (args.shards, args.nodes) != (1, 1):
        what += f", {args.shards} shard(s) on {args.nodes} node(s) each"
    if external is None:
        what += f" on {BROKER_NAMES[args.broker]}"
        what += (
            ", ephemeral (everything is gone once they stop)"
            if args.ephemeral
            else f", durable (data in {args.data_dir.resolve()})"
        )
    what += f", replicated by {MIRROR_NAMES[args.mirror]}"
    try:
        topo = LocalTopology(
            regions=args.regions,
            manual_sync=False,
            id_mode=args.id_mode,
            mirror_naming=args.mirror_naming,
            port_base=args.port_base,
            external=external,
            workdir=str(args.state_dir),
            shards=args.shards,
            nodes=args.nodes,
            metrics=args.metrics,
            data_dir=None if external is not None or args.ephemeral else args.data_dir,
            broker=args.broker,
            mirror=args.mirror,
            tls=args.tls,
        )
    except ValueError as exc:
        print(f"streams up: {exc}", file=sys.stderr)
        return exits.USAGE
    print(f"streams up: starting {what} ...", flush=True)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        topo.start()
    except Exception as exc:
        topo.close()
        print(f"streams up: {exc}", file=sys.stderr)
        return exits.FAILED
    try:
        assert topo.topology is not None
        _print_regions(topo.topology)
        if args.metrics:
            _print_metrics(topo)
        print(f"topology file: {topo.topology_path}   (streams status reads it)")
        if (files := topo.tls_files) is not None:
            print(f"TLS: redis-cli --tls --cacert {files.ca} --cert {files.cert} --key {files.key}")
        if external is None and args.ephemeral:
            print(
                "note: --ephemeral: the brokers keep nothing once they stop; stopping them "
                "loses every stream (without --ephemeral they keep it in --data-dir)"
            )
        elif external is None:
            print(
                f"data directory: {args.data_dir.resolve()}   (each region's broker keeps its "
                "log there; the same command finds it all again)"
            )
        print("replicating continuously; Ctrl-C stops everything", flush=True)
        stop.wait()
    finally:
        print("streams up: stopping ...", flush=True)
        topo.close()
    return 0


def _print_regions(topology: Topology) -> None:
    """Each region's first node (the port a plain client uses), then every node with its slots
    and shards, and how a cluster client connects when a region runs several nodes."""
    print(f"{'region':<8} {'id':>3}  {'RESP':<22} {'Kafka bootstrap':<22} id mode")
    for cfg in topology.regions:
        resp = cfg.nodes[0].address + ("" if cfg.resp_port else " (TLS)")
        print(f"{cfg.name:<8} {cfg.id:>3}  {resp:<22} {cfg.bootstrap:<22} {cfg.id_mode}")
    print(f"nodes ({topology.shards} shard(s) of the 16384 hash slots):")
    for cfg in topology.regions:
        nodes = ", ".join(
            f"{node.address} ({statuscli.slots_text(topology.shards, node)})" for node in cfg.nodes
        )
        print(f"  {cfg.name}: {nodes}")
    clustered = [cfg for cfg in topology.regions if len(cfg.nodes) > 1]
    if clustered:
        print(
            "cluster clients (redis-cli -c, redis-py RedisCluster) may start at any node of a"
            " region and follow MOVED to a key's node: redis-cli -c"
            + (" --tls" if not clustered[0].resp_port else "")
            + f" -p {clustered[0].resp_port or clustered[0].tls_port}"
        )


def _print_metrics(topo: LocalTopology) -> None:
    """Where each node serves its Prometheus metrics (docs/monitoring.md)."""
    assert topo.topology is not None
    print("Prometheus metrics (docs/monitoring.md):")
    for cfg in topo.topology.regions:
        urls = ", ".join(
            f"http://{node.bind}:{port}/metrics"
            for node, port in zip(cfg.nodes, topo.node_metrics_ports[cfg.id], strict=True)
        )
        print(f"  {cfg.name}: {urls}")


# --- demo -------------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    """Run every seed scenario table and print actual results next to the expected ones."""
    scenarios = [s for s in load_all() if not args.only or args.only in s.slug]
    where = (
        "simulated regions (pure core)"
        if args.sim
        else "embedded brokers, one node per region (one topology per ID mode, each table on "
        "keys of its own)"
    )
    print(f"streams demo: {len(scenarios)} seed tables on {where}", flush=True)
    failed = 0
    if args.sim:
        for scenario in scenarios:
            failed += _print_scenario(scenario, _run_simulated(scenario))
    else:
        for mode in sorted({s.id_mode for s in scenarios}):
            tables = [s for s in scenarios if s.id_mode == mode]
            for scenario, outcomes in _run_embedded(mode, tables):
                failed += _print_scenario(scenario, outcomes)
    total = len(scenarios)
    print(f"\n{total - failed} of {total} seed tables hold ({failed} failed)")
    return 1 if failed else 0


def _run_simulated(scenario: Scenario) -> list[Outcome]:
    return run(scenario, SimulatedRegions(scenario.regions, IdMode.parse(scenario.id_mode)))


def _run_embedded(
    id_mode: str, scenarios: list[Scenario]
) -> Iterator[tuple[Scenario, list[Outcome]]]:
    """The tables of one ID mode on one topology (as many regions as the biggest needs), each on
    keys of its own (`streams.scenarios.keyspace`): a topology per table took ~50 starts."""
    regions = max(s.regions for s in scenarios)
    with LocalTopology(
        regions=regions, manual_sync=True, id_mode=id_mode, debug_clock=True
    ) as topo:
        for scenario in scenarios:
            driver = KeyspaceDriver.for_table(topo, scenario)
            try:
                outcomes = run(scenario, driver)
            finally:
                driver.close()
            yield scenario, outcomes


def _print_scenario(scenario: Scenario, outcomes: list[Outcome]) -> int:
    bad = [o for o in outcomes if not o.ok]
    print(
        f"\n== {scenario.slug}: {scenario.name}  [{scenario.id_mode}, "
        f"{scenario.regions} regions] {'OK' if not bad else 'FAILED'}"
    )
    print(f"   {scenario.source}")
    for o in outcomes:
        step = o.step
        if isinstance(step, SyncStep):
            who = "all" if step.regions is None else ",".join(f"r{r}" for r in step.regions)
            print(f"   {step.t:<5} -- sync ({who}) --")
            continue
        cmd = " ".join(a.decode("utf-8", "replace") for a in step.args)
        if step.field:
            cmd += f"  [{step.field}]"
        line = f"   {step.t:<5} r{step.region}  {cmd}"
        if o.expected:
            mark = "ok" if o.ok else "MISMATCH"
            line = f"{line:<62} -> {o.actual}  (seed: {o.expected}) {mark}"
        elif not o.ok:
            line = f"{line:<62} -> {o.actual}  FAILED"
        print(line, flush=True)
    return 1 if bad else 0


# --- not built yet ----------------------------------------------------------------------------

NOT_BUILT: dict[str, str] = {}


def main(argv: list[str] | None = None) -> int:
    """The `streams` command. A closed stdout and Ctrl-C end it quietly, with the statuses of
    `streams.exits` (141, 130); usage errors exit 64."""
    return exits.guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = exits.ArgumentParser(
        prog="streams",
        description="Active-active Redis Streams, event-sourced on Kafka.",
        epilog=exits.epilog(*exits.MEANING),
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show the Kafka client's own log on stderr (-vv: with debug contexts); "
        "also accepted after the verb",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser(
        "up",
        help="start brokers, mirrors and region nodes; print the RESP ports",
        description="Start a local topology (one Kafka broker per region, the mirrors, the "
        "nodes of each region) or, with --topology, nodes and mirrors for existing Kafka "
        "clusters. By default each region runs Apache Kafka (a Java 17 process; "
        "scripts/setup.sh fetches its jars) keeping its log under --data-dir, replicated by "
        "MirrorMaker 2, and the same command run again comes back with every stream, group and "
        "pending entry (docs/durability.md). --ephemeral runs the light stack instead (Tansu "
        "in memory and the embedded mirror): starts in about a second, nothing survives a stop.",
        epilog=exits.epilog(exits.UNRESOLVED, exits.FAILED),
    )
    up.add_argument("--regions", type=int, default=3, help="embedded regions (default 3)")
    up.add_argument("--topology", help="topology TOML file naming existing Kafka clusters")
    up.add_argument("--id-mode", default="strict", choices=[m.value for m in IdMode])
    up.add_argument("--mirror-naming", default="identity", choices=["identity", "default"])
    up.add_argument(
        "--port-base",
        type=int,
        help="RESP port of r1's first node (then +1 per node, region by region); default free",
    )
    up.add_argument(
        "--state-dir",
        type=Path,
        default=STATE_DIR,
        help="where the topology file and the logs go (default .streams)",
    )
    up.add_argument(
        "--data-dir",
        type=Path,
        default=DATA_DIR,
        help="where the brokers keep their data (default ./streams-data, a directory per "
        "region; locked while `streams up` runs on it). Not used with --ephemeral or --topology",
    )
    up.add_argument(
        "--broker",
        choices=["kafka", "tansu"],
        default=None,
        help="each region's broker: Apache Kafka (KRaft, a Java 17 process on the jars of "
        "scripts/kafka_jars.sh; the default) or Tansu (the light embedded broker; the default "
        "with --ephemeral, where it runs in memory)",
    )
    up.add_argument(
        "--mirror",
        choices=["mm2", "embedded"],
        default=None,
        help="what copies each region's op log to the other clusters: MirrorMaker 2 (Apache "
        "Kafka's, one Java process; the default with --broker kafka) or the embedded mirror "
        "(threads of `streams up`; the default with Tansu)",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help="TLS everywhere (Apache Kafka only): a CA and a certificate made under "
        "--data-dir/tls, brokers serving SSL only with client certificates, MirrorMaker 2 over "
        "SSL, nodes serving RESP over TLS only (redis-cli --tls with the printed files)",
    )
    up.add_argument(
        "--ephemeral",
        action="store_true",
        help="the light stack, as `streams demo` and the fast tests run it: Tansu brokers in "
        "memory (no Java), started in about a second; everything is gone once they stop",
    )
    up.add_argument(
        "--shards",
        type=int,
        default=1,
        metavar="S",
        help="shards of the database (default 1, at most 1024): a key's hash slot (CRC16 mod "
        "16384, as Redis Cluster) falls in one shard's slot range, and shard s is partition s "
        "of every op-log topic and its own replicated state; a node process commits its "
        "shards' writes in one transaction at a time, so shards spread over more --nodes put "
        "more write transactions in flight. Fixed once the topics exist",
    )
    up.add_argument(
        "--nodes",
        type=int,
        default=1,
        metavar="M",
        help="node processes per region (default 1, at most S), each owning a contiguous group "
        "of the shards on its own port; with more than one, a region's nodes speak the Redis "
        "Cluster protocol (redis-cli -c, redis-py RedisCluster follow MOVED)",
    )
    up.add_argument(
        "--metrics",
        action="store_true",
        help="every node serves Prometheus metrics of the CRDT layer (replication lag, commit "
        "latency, batch size, snapshot age, tombstones) on a free port, printed at start "
        "(python -m streams.node --metrics-port; docs/monitoring.md)",
    )

    statuscli.add_parser(sub, STATE_DIR)

    demo = sub.add_parser(
        "demo",
        help="run every seed scenario table and show actual results next to the seed's",
        description="Each table runs on a fresh embedded topology (real brokers, mirrors, "
        "nodes, redis protocol), ephemeral: its brokers keep everything in memory and nothing "
        "on disk; --sim runs them on the pure core in-process instead.",
        epilog=exits.epilog(exits.DIFFERS),
    )
    demo.add_argument("--sim", action="store_true", help="simulated in-process regions")
    demo.add_argument("--only", default="", help="only scenarios whose name contains this")

    replay_verbs = register_replay_verbs(sub)
    replay_verbs.update(register_ui_verbs(sub))

    groupcli.add_parser(sub)
    sparkcli.add_parser(sub)
    importer.add_parser(sub)
    retention_cli.add_parser(sub, STATE_DIR)
    regioncli.add_parser(sub, STATE_DIR)

    for name, what in NOT_BUILT.items():
        unbuilt = sub.add_parser(name, help=f"not built yet: {what}")
        unbuilt.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    args = parser.parse_args(argv)
    kafka_connect.configure(args.verbose, getattr(args, "topology", None))
    if args.command in replay_verbs:
        return replay_verbs[args.command](args)
    if args.command == "group":
        return groupcli.run(args)
    if args.command == "spark":
        return sparkcli.run(args)
    if args.command == "import":
        return importer.run(args)
    if args.command == "retention":
        return retention_cli.run(args)
    if args.command == "region":
        return regioncli.run(args)
    if args.command == "up":
        return _up(args)
    if args.command == "status":
        return statuscli.run(args)
    if args.command == "demo":
        return _demo(args)
    print(f"streams {args.command}: not built yet ({NOT_BUILT[args.command]}).", file=sys.stderr)
    return exits.USAGE


if __name__ == "__main__":
    sys.exit(main())
