"""`python -m topology.mirror --topology FILE [--once]`: run the mirrors of a topology file.

The command line of the package (`MirrorSet`): mirror every region's op log to every other
region's cluster until Ctrl-C / SIGTERM, printing a line per pair whose count moved, or
(`--once`) copy what exists now and exit.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from streams.config import load
from topology.mirror import MirrorError, MirrorSet, MirrorTimeout


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Stop on SIGTERM as on Ctrl-C, so a launcher's terminate() gets a clean shutdown."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Progress:
    """Prints one line per pair whose count moved since the last report."""

    def __init__(self, mirrors: MirrorSet) -> None:
        self.mirrors = mirrors
        self.last = {pair: 0 for pair in mirrors.mirrors}

    def report(self) -> None:
        for pair, mirror in self.mirrors.mirrors.items():
            copied = mirror.copied
            if copied != self.last[pair]:
                delta, self.last[pair] = copied - self.last[pair], copied
                print(f"{pair[0]} -> {pair[1]}: {copied} copied (+{delta})", flush=True)


def _copy_once(mirrors: MirrorSet, timeout: float) -> int:
    try:
        for (source, target), mirror in mirrors.mirrors.items():
            n = mirror.copy_available(timeout)
            print(f"{source} -> {target}: copied {n} ({mirror.name})", flush=True)
    except (MirrorError, MirrorTimeout) as exc:
        print(f"mirror failed: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


def _run_forever(mirrors: MirrorSet, interval: float) -> int:
    progress = _Progress(mirrors)
    mirrors.start()
    print(
        f"mirroring {len(mirrors.mirrors)} pairs ({mirrors.naming} naming); Ctrl-C stops",
        flush=True,
    )
    try:
        while True:
            time.sleep(interval)
            progress.report()
            if mirrors.errors:
                for (source, target), error in mirrors.errors.items():
                    print(f"{source} -> {target} failed: {error}", file=sys.stderr, flush=True)
                return 1
    except KeyboardInterrupt:
        print("stopping", flush=True)
        return 0
    finally:
        mirrors.stop()
        progress.report()  # what arrived since the last report (stop flushes the producers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m topology.mirror",
        description="Mirror every region's op log to every other region's cluster.",
    )
    parser.add_argument("--topology", required=True, help="topology TOML file")
    parser.add_argument("--once", action="store_true", help="copy what exists now, then exit")
    parser.add_argument("--timeout", type=float, default=60.0, help="--once: seconds per pair")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between reports")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    topology = load(args.topology)
    mirrors = MirrorSet(topology)
    if not mirrors.mirrors:
        print("no mirrors: every region shares one cluster", flush=True)
        return 0
    try:
        with _sigterm_as_interrupt():
            if args.once:
                return _copy_once(mirrors, args.timeout)
            return _run_forever(mirrors, args.interval)
    except KeyboardInterrupt:  # arrived outside the loop (while starting or copying once)
        print("stopping", flush=True)
        return 0
    finally:
        mirrors.stop()


if __name__ == "__main__":
    sys.exit(main())
