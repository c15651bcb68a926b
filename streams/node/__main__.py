"""`python -m streams.node --topology FILE --region NAME`: run one region node until stopped."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from streams.node.node import RegionNode
from topology.config import load


async def _run(topology_path: str, region: str, debug_clock: bool) -> int:
    node = RegionNode(load(topology_path), region, debug_clock=debug_clock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await node.start()
    except Exception as exc:
        print(f"streams node {region}: cannot start: {exc}", file=sys.stderr)
        await node.stop()
        return 1
    print(f"region {region} ready on {node.config.bind}:{node.config.resp_port}", flush=True)
    await stop.wait()
    await node.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streams.node", description="Run one region node of a topology."
    )
    parser.add_argument("--topology", required=True, help="topology TOML file")
    parser.add_argument("--region", required=True, help="region name, e.g. r1")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument(
        "--debug-clock",
        action="store_true",
        help="allow CRDT.CLOCK to pin the node's wall clock (tests and demos only)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    return asyncio.run(_run(args.topology, args.region, args.debug_clock))


if __name__ == "__main__":
    sys.exit(main())
