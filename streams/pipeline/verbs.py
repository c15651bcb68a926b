"""`streams spark audit|export|follow|snapshot`: argument parsing and running (docs/pipeline.md).

PySpark is imported only when a subcommand runs, so `streams --help` works without it.
"""

from __future__ import annotations

import argparse
import sys
import time

from streams import exits, progress
from streams.replay import kafka_connect

_CODES = (exits.UNREACHABLE, exits.FAILED)
"""What every job may exit with besides 0 (and `streams.exits.ALWAYS`)."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    spark = sub.add_parser(
        "spark",
        help="Spark jobs over the op logs: audit, export, follow, snapshot",
        description="Run a PySpark job over the op logs read by the streams_oplog data source "
        "(docs/pipeline.md). --master defaults to local[*]; Spark's console progress bar reports "
        "its progress on a terminal (--quiet: off; --progress: also when not a terminal).",
        epilog=exits.epilog(exits.DIFFERS, *_CODES),
    )
    jobs = spark.add_subparsers(dest="job", required=True, metavar="JOB")

    def common(p: argparse.ArgumentParser) -> None:
        kafka_connect.add_verbose_argument(p)
        p.add_argument("--master", default=None, help="Spark master (default local[*])")
        p.add_argument(
            "--shuffle-partitions",
            type=int,
            default=None,
            help="spark.sql.shuffle.partitions (default: Spark's)",
        )
        p.add_argument(
            "--conf",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a Spark setting (repeatable), e.g. spark.driver.host=HOST; on a local master "
            "the driver binds to 127.0.0.1 unless this, SPARK_LOCAL_IP or PYSPARK_SUBMIT_ARGS "
            "says otherwise (docs/pipeline.md)",
        )
        p.add_argument(
            "--topology",
            default=None,
            help="a topology file: every record read is checked against its regions and "
            "signing keys as a node checks it (read by every executor: give a path they "
            "reach); without it the regions the op logs name are checked (each log holds its "
            "region's ops, a dot's records agree), signatures are not",
        )
        progress.add_arguments(p)

    audit = jobs.add_parser(
        "audit",
        help="compare clusters: digests per key, duplicate IDs, op counts, lag percentiles",
        description="Read every op log of each cluster and compare them: the shard count, op "
        "counts per origin and type, lag percentiles (record time minus origin time), duplicate "
        "IDs, per-key digests at a common causally closed position, the keys that differ, each "
        "cluster's shard and region digests there, and dots whose contents differ. Exit 1 when "
        "the clusters diverged.",
        epilog=exits.epilog(exits.DIFFERS, *_CODES),
    )
    audit.add_argument(
        "--bootstrap",
        action="append",
        required=True,
        help="a cluster's Kafka bootstrap HOST:PORT (repeat once per cluster)",
    )
    common(audit)

    export = jobs.add_parser(
        "export",
        help="converged entries as Parquet, partitioned by key",
        description="Fold every op log of the cluster (each shard's partitions on their own, "
        "with the node's code) and write the converged entries of every key to OUT as Parquet, "
        "one directory per key (OUT/key=<key>/; columns key_bytes, pos, id, origin, fields). "
        "OUT is replaced.",
        epilog=exits.epilog(*_CODES),
    )
    export.add_argument(
        "--bootstrap", required=True, help="the cluster's Kafka bootstrap HOST:PORT"
    )
    export.add_argument("--out", required=True, help="output directory (replaced)")
    export.add_argument(
        "--format", default="parquet", choices=["parquet"], help="output format (parquet)"
    )
    export.add_argument(
        "--min-partitions",
        type=int,
        default=None,
        help="split offset ranges into at least this many read tasks",
    )
    common(export)

    follow = jobs.add_parser(
        "follow",
        help="keep exported entries up to date (streaming)",
        description="A Structured Streaming query over every op-log partition that keeps OUT "
        "equal to what `export` would write: each micro-batch stores its ops under OUT/_ops and "
        "refolds the keys it touched, exactly once across restarts (the progress is in "
        "--checkpoint). Runs until Ctrl-C, or with --available-now until what is there now is "
        "processed.",
        epilog=exits.epilog(*_CODES),
    )
    follow.add_argument(
        "--bootstrap", required=True, help="the cluster's Kafka bootstrap HOST:PORT"
    )
    follow.add_argument(
        "--out", required=True, help="output directory, kept equal to export's output"
    )
    follow.add_argument(
        "--checkpoint",
        required=True,
        help="Spark checkpoint directory (where the query resumes after a restart)",
    )
    follow.add_argument(
        "--trigger-seconds",
        type=float,
        default=1.0,
        help="start a micro-batch every this many seconds (default 1.0)",
    )
    follow.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=None,
        help="at most this many offsets per micro-batch, shared among partitions in proportion "
        "to their backlog (default: everything available)",
    )
    follow.add_argument(
        "--available-now", action="store_true", help="process what is there now, then stop"
    )
    common(follow)

    snap = jobs.add_parser(
        "snapshot",
        help="a region's snapshot (the format nodes boot from)",
        description="Fold region R's logs on its cluster (R.local included: groups, PEL, "
        "consumers) and write the snapshot a node boots from, one file per shard.",
        epilog=exits.epilog(*_CODES),
    )
    snap.add_argument("--bootstrap", required=True, help="the region's cluster HOST:PORT")
    snap.add_argument("--region", required=True, help="region name (its .local log is read)")
    snap.add_argument(
        "--out",
        required=True,
        help="snapshot file to write; with S > 1 shards one file per shard: {shard} in the name "
        "is replaced by the shard, else the files are OUT.shard0 ... OUT.shard<S-1>",
    )
    snap.add_argument(
        "--id-mode",
        default="strict",
        choices=["strict", "semi-strict", "liberal"],
        help="the region's ID mode (default strict)",
    )
    snap.add_argument(
        "--region-id", type=int, default=None, help="the region's id, if its logs cannot tell"
    )
    common(snap)


def run(args: argparse.Namespace) -> int:
    try:  # before PySpark is even imported: a wrong bootstrap fails at once, in one line
        for bootstrap in [args.bootstrap] if isinstance(args.bootstrap, str) else args.bootstrap:
            kafka_connect.ensure(bootstrap)
    except kafka_connect.Unreachable as exc:
        print(f"streams spark {args.job}: {exc}", file=sys.stderr)
        return exits.UNREACHABLE
    try:
        from streams.pipeline.session import spark_session
    except ImportError as exc:
        print(
            f"streams spark: PySpark is not installed ({exc}); pip install -e '.[spark]'",
            file=sys.stderr,
        )
        return exits.FAILED
    from pyspark.errors import PySparkException

    from streams.pipeline.folding import ConflictingDot
    from streams.pipeline.kafka_io import SourceError
    from streams.pipeline.options import OptionError
    from streams.pipeline.session import parse_conf

    try:
        conf = parse_conf(args.conf)
    except ValueError as exc:
        print(f"streams spark {args.job}: {exc}", file=sys.stderr)
        return exits.USAGE
    spark = spark_session(
        args.master,
        args.shuffle_partitions,
        app=f"streams-{args.job}",
        progress=progress.wanted(args),
        conf=conf,
    )
    try:
        return _run(spark, args)
    except (SourceError, OptionError, ValueError, ConflictingDot, PySparkException) as exc:
        print(f"streams spark {args.job}: {_message(exc)}", file=sys.stderr)
        return exits.FAILED
    finally:
        spark.stop()


def _message(exc: BaseException) -> str:
    """Our own error's line out of a Python data source traceback Spark wrapped, else line 1."""
    lines = str(exc).splitlines()
    for line in reversed(lines):
        for marker in (
            "SourceError: ",
            "DataLossError: ",
            "OptionError: ",
            "CorruptRecordError: ",
            "ConflictingDot: ",
        ):
            if marker in line:
                return line.split(marker, 1)[1].strip()
    return lines[0] if lines else type(exc).__name__


def _run(spark: object, args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    started = time.monotonic()
    if args.job == "audit":
        from streams.pipeline.audit import audit

        report = audit(spark, list(args.bootstrap), args.topology)
        print(report.render())
        return 0 if report.ok else 1
    if args.job == "export":
        from streams.pipeline.export import export

        n = export(spark, args.bootstrap, args.out, args.format, args.min_partitions, args.topology)
        print(f"exported {n} entries to {args.out} in {time.monotonic() - started:.1f}s")
        return 0
    if args.job == "follow":
        from streams.pipeline.export import follow

        query = follow(
            spark,
            args.bootstrap,
            args.out,
            args.checkpoint,
            args.trigger_seconds,
            args.max_offsets_per_trigger,
            args.available_now,
            args.topology,
        )
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        return 0
    from streams.pipeline.snapshot import snapshot

    result = snapshot(
        spark,
        args.bootstrap,
        args.region,
        args.out,
        args.id_mode,
        args.region_id,
        topology=args.topology,
    )
    if len(result.files) == 1:
        print(f"snapshot of {args.region} written to {result.files[0]}: digest {result.digest}")
        return 0
    print(f"snapshot of {args.region}, {len(result.files)} shards: digest {result.digest}")
    for s, (path, digest) in enumerate(zip(result.files, result.shard_digests, strict=True)):
        print(f"  shard {s}: {path} (digest {digest})")
    print("boot a node with --snapshot FILE once per shard it owns")
    return 0
