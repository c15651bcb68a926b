"""`python -m bench.tls`: what TLS costs, with `redis-benchmark` (Debian's redis-tools is built
with TLS: `--tls --cacert --cert --key`).

    python -m bench.tls [--requests 100000] [--clients 50] [--pipeline 16] [--rounds 2]

1. RESP over TLS against plaintext on the same node: one region on Apache Kafka over SSL
   (`LocalTopology(regions=1, broker="kafka", tls=True)`), its node serving a plaintext port
   too (`--port`), XADD on random keys at c50 P16 on each port in turn, `--rounds` times.
2. The whole stack: the same workload on a plaintext topology (PLAINTEXT Kafka, plaintext
   RESP) and on a TLS one (SSL Kafka with client certificates, RESP over TLS).

Printed, never asserted; results in docs/benchmarks.md, "TLS".
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from topology.local import LocalTopology
from topology.ports import free_port


def benchmark(port: int, args: argparse.Namespace, tls: LocalTopology | None) -> float:
    """XADD requests per second that redis-benchmark reports (TLS with `tls`'s files)."""
    cmd = [
        "redis-benchmark",
        "-p",
        str(port),
        "-c",
        str(args.clients),
        "-P",
        str(args.pipeline),
        "-n",
        str(args.requests),
        "-r",
        "100000",
        "-q",
    ]
    if tls is not None and tls.tls_files is not None:
        files = tls.tls_files
        cmd += ["--tls", "--cacert", str(files.ca), "--cert", str(files.cert)]
        cmd += ["--key", str(files.key)]
    cmd += args.command.split()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    found = re.findall(r"([0-9.]+) requests per second", out)
    if not found:
        raise RuntimeError(f"redis-benchmark printed no rate: {out!r}")
    return float(found[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tls", description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--pipeline", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--command",
        default="XADD bench:__rand_int__ * f v",
        help="what redis-benchmark sends (PING: the RESP layer alone, no Kafka)",
    )
    parser.add_argument(
        "--same-node-only", action="store_true", help="skip part 2 (the whole stack)"
    )
    args = parser.parse_args(argv)
    shape = f"{args.command.split()[0]} c{args.clients} P{args.pipeline}, {args.requests} requests"
    plain_port = free_port()
    print(f"1. same node, plaintext port vs TLS port ({shape}), Kafka over SSL")
    with LocalTopology(
        regions=1, broker="kafka", tls=True, node_args=["--port", str(plain_port)]
    ) as topo:
        for round_ in range(args.rounds):
            plain = benchmark(plain_port, args, None)
            secure = benchmark(topo.ports[1], args, topo)
            print(
                f"   round {round_ + 1}: plaintext {plain:,.0f}/s, TLS {secure:,.0f}/s"
                f" ({secure / plain - 1:+.1%})",
                flush=True,
            )
    if args.same_node_only:
        return 0
    print(f"2. whole stack, plaintext topology vs TLS topology ({shape})")
    rates = {}
    for tls in (False, True):
        with LocalTopology(regions=1, broker="kafka", tls=tls) as topo:
            rates[tls] = benchmark(topo.ports[1], args, topo if tls else None)
        print(f"   {'TLS' if tls else 'plaintext'}: {rates[tls]:,.0f}/s", flush=True)
    print(f"   TLS / plaintext: {rates[True] / rates[False] - 1:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
