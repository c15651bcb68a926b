"""The `streams ui` verb (registered by streams/cli.py): its arguments, and serving until
Ctrl-C. The logs are looked up and `--at` checked before the server starts, so a wrong region,
position or address is an exit status (`streams.exits`, as the replay verbs use them), not a
page of errors."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

from streams import exits
from streams.config import TopologyError
from streams.config import load as load_topology
from streams.replay import kafka_connect, verbs
from streams.replay.arguments import TOPOLOGY_HELP, Handler, _guard
from streams.replay.positions import PositionError
from streams.ui.server import make_server
from streams.ui.source import Source

DEFAULT_PORT = 8093


def _others(args: argparse.Namespace) -> dict[str, str]:
    """With --topology: every other region's name -> its Kafka cluster (diff compares them)."""
    if not args.topology:
        return {}
    try:
        regions = load_topology(args.topology).regions
    except TopologyError as exc:
        raise PositionError(str(exc)) from None
    return {r.name: r.bootstrap for r in regions if r.name != args.region}


def ui_verb(args: argparse.Namespace) -> int:
    source = Source(
        bootstrap=verbs.bootstrap(args),
        region=args.region,
        at=args.at,
        trust=verbs.trust(args),
        others=_others(args),
        id_mode=args.id_mode,
    )
    found = source.check()
    for key in args.key or []:  # folded before serving: these pages open at once
        started = time.monotonic()
        h = source.history(key.encode())
        print(
            f"streams ui: key {key}: {len(h.steps)} op(s) folded in "
            f"{time.monotonic() - started:.1f}s",
            flush=True,
        )
    server = make_server(source, args.port)
    host, port = server.server_address[:2]
    url = f"http://{host!s}:{port}/"
    at = f" at {args.at}" if args.at else " (to the end of its logs; reload re-reads them)"
    print(
        f"streams ui: region {found.region_name} on {source.bootstrap}{at}: {url}  "
        f"(a key's page: {url}key/<key>; JSON under {url}api/; Ctrl-C stops)",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="streams-ui", daemon=True)
    thread.start()
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
    print("streams ui: stopped", file=sys.stderr)
    return exits.OK


def register(sub: Any) -> dict[str, Handler]:
    """Add the `ui` subparser to `sub`; returns verb -> handler."""
    ui = sub.add_parser(
        "ui",
        help="a web page drawing a key's history: lanes per region, causal arrows, state",
        description="Serve a web page (on 127.0.0.1) over a region's op logs: the keys with "
        "their op counts, and for a key one lane per region with each op on its origin's lane in "
        "the order the region applied them, arrows to the ops its causal context had seen, the "
        "state after any op (click it: what `streams replay --at` folds there), the ops not "
        "applied yet, and with --topology the first diverging op `streams diff` finds. The "
        "same JSON is served under /api/ for scripts.",
        epilog=exits.epilog(exits.UNRESOLVED, exits.UNREACHABLE),
    )
    ui.add_argument("--bootstrap", help="the region's Kafka cluster HOST:PORT")
    ui.add_argument(
        "--topology",
        help=TOPOLOGY_HELP + ". The other regions of the file are compared with --region "
        "(`streams diff`)",
    )
    ui.add_argument(
        "--region",
        help="the region shown (default: the one whose .local log the cluster holds; required "
        "with --topology)",
    )
    ui.add_argument(
        "--at",
        help="show the logs as of this position, as `streams history --at` takes it: "
        "r1=120,r2=98 (or the per-shard form '0:r1=120;1:r1=80'); default: their end",
    )
    ui.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"the port to serve on, on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one)",
    )
    ui.add_argument(
        "--key",
        action="append",
        help="fold this key's history before serving (repeat for several), so its page opens "
        "at once; other keys are folded when first asked for, and kept",
    )
    ui.add_argument("--id-mode", default="strict", choices=["strict", "semi-strict", "liberal"])
    kafka_connect.add_verbose_argument(ui)
    return {"ui": _guard("ui", ui_verb)}
