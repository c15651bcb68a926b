"""`python -m topology.mm2`: print (or write) MirrorMaker 2 properties for a topology file.

Without arguments it regenerates the checked-in configs from topology/mm2/topology.toml, for both
naming policies, so the files cannot drift from the generator.
"""

from __future__ import annotations

import argparse
import sys

from streams.config import load
from streams.kafka.topics import NAMINGS
from topology.mm2 import EXAMPLE_TOPOLOGY, properties_path, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m topology.mm2",
        description="Generate connect-mirror-maker.properties from a topology file.",
    )
    parser.add_argument(
        "--topology",
        help="topology TOML file to render to stdout (default: regenerate the checked-in configs"
        " from topology/mm2/topology.toml)",
    )
    parser.add_argument("--naming", choices=NAMINGS, help="override the topology's mirror_naming")
    args = parser.parse_args(argv)
    if args.topology:
        sys.stdout.write(render(load(args.topology), args.naming))
        return 0
    topology = load(EXAMPLE_TOPOLOGY)
    for naming in NAMINGS:
        path = properties_path(naming)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(topology, naming), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
