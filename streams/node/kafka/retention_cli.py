"""`streams retention apply`: delete what the topology's `[retention]` policy lets go from every op
log (`streams.node.kafka.log_retention`), and say per partition what was deleted or what held it.

Run it after snapshots (a cron job, or by hand): nothing goes that a kept snapshot does not cover,
that another region has not applied, or that is younger than the tail kept.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from streams import exits
from streams.config import TopologyError, load
from streams.kafka.topics import TopicError
from streams.node.kafka import log_retention


def add_parser(sub: Any, state_dir: Path) -> None:
    """Register the `retention` verb on the `streams` command's subparsers."""
    parser = sub.add_parser(
        "retention",
        help="apply the topology's [retention] policy to every op log (DeleteRecords)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=exits.epilog(exits.UNRESOLVED, exits.UNREACHABLE),
    )
    parser.add_argument("action", choices=["apply"], help="apply: delete what may go now")
    parser.add_argument("--topology", help="topology file (default: the one `streams up` wrote)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=state_dir,
        help="where `streams up` wrote topology.toml (default .streams)",
    )
    parser.add_argument("--quiet", action="store_true", help="print only what was deleted")


def run(args: argparse.Namespace) -> int:
    path = Path(args.topology) if args.topology else args.state_dir / "topology.toml"
    try:
        topology = load(path)
    except (OSError, TopologyError) as exc:
        print(f"streams retention: {exc}", file=sys.stderr)
        return exits.UNRESOLVED
    try:
        report = log_retention.apply(topology)
    except ValueError as exc:
        print(f"streams retention: {path}: {exc}", file=sys.stderr)
        return exits.UNRESOLVED
    except (KafkaException, TopicError, TimeoutError) as exc:
        print(f"streams retention: a broker did not answer: {exc}", file=sys.stderr)
        return exits.UNREACHABLE
    for trim in report.trims:
        if trim.cut is not None or not args.quiet:
            print(trim.text())
    for region in report.unsupported:
        print(f"{region}: the broker does not support DeleteRecords; its op logs keep everything")
    print(f"{report.deleted} records deleted")
    return exits.OK
