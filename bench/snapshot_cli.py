"""Time of `streams snapshot` and `streams replay --snapshot` against a region's size.

    python -m bench.snapshot_cli [--size 1000000] [--repeat 3]

One embedded region (liberal IDs), `--size` XADDs written in pipelines of 1,000 over 8 keys (as
`bench.restart` writes them), CRDT.FLUSH; then `streams snapshot` (a replay of every record, then
the file written) and `--repeat` times `streams replay --snapshot FILE --digest` (the snapshot
read back, the empty tail read, the digest printed), each a process timed from its start to its
exit. The replayed digest is checked against the node's CRDT.DIGEST. Prints one line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from bench.restart import fill
from topology.local import LocalTopology


def measure(n: int, repeat: int) -> str:
    with (
        LocalTopology(
            regions=1,
            manual_sync=False,
            id_mode="liberal",
            node_args=["--snapshot-every-ops", "0", "--snapshot-every-s", "0"],
        ) as topo,
        tempfile.TemporaryDirectory() as tmp,
    ):
        client = topo.client(1)
        fill(client, n)
        client.execute_command("CRDT.FLUSH")  # type: ignore[no-untyped-call]
        out = os.path.join(tmp, "r1.snapshot")
        where = ["--bootstrap", topo.bootstrap[1], "--region", "r1", "--id-mode", "liberal"]
        cli = [sys.executable, "-m", "streams.cli"]
        started = time.monotonic()
        subprocess.run(
            [*cli, "snapshot", *where, "--out", out, "--quiet"], check=True, capture_output=True
        )
        write_s = time.monotonic() - started
        reads = []
        for _ in range(repeat):
            started = time.monotonic()
            done = subprocess.run(
                [*cli, "replay", *where, "--snapshot", out, "--digest", "--quiet"],
                check=True,
                capture_output=True,
            )
            reads.append(time.monotonic() - started)
        live = client.execute_command("CRDT.DIGEST")  # type: ignore[no-untyped-call]
        same = done.stdout.strip() == live
        return (
            f"{n:,} entries: streams snapshot {write_s:.2f} s ({os.path.getsize(out) / 1e6:.1f} "
            f"MB); streams replay --snapshot --digest {' / '.join(f'{t:.2f}' for t in reads)} s; "
            f"digest {'= CRDT.DIGEST' if same else 'DIFFERS from CRDT.DIGEST'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.snapshot_cli", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(measure(args.size, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
