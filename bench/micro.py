"""`python -m bench.micro`: the request parser's and the op-log codec's own cost, in process.

    python -m bench.micro     # parser requests/s (next to hiredis's Reader), codec ops/s

Printed, never asserted (the tests assert no speed): figures only make sense on a quiet machine.
Best of three rounds each: shared machines are noisy and the best run is the code's own cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import hiredis

from streams.crdt.ops import Op, XAdd
from streams.ops.codec import decode, encode
from streams.resp.parser import RequestParser


def _best(run: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def parser(count: int = 100_000, rounds: int = 3) -> str:
    """Pipelined `XADD s * f v` in 64 KB reads through our parser and through hiredis's Reader
    (faster, but a reply parser: it accepts `*2\\r\\n+A\\r\\n...`, knows no inline commands and
    has other error texts, see streams/resp/parser.py)."""
    request = b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nf\r\n$1\r\nv\r\n"
    data = request * count
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]

    def ours() -> None:
        p = RequestParser()
        assert sum(len(p.feed(c)) for c in chunks) == count

    def theirs() -> None:
        reader = hiredis.Reader()
        got = 0
        for c in chunks:
            reader.feed(c)
            while reader.gets() is not False:
                got += 1
        assert got == count

    mine, hiredis_s = _best(ours, rounds), _best(theirs, rounds)
    return (
        f"resp parser, pipelined XADD: {count / mine:,.0f} requests/s "
        f"(hiredis Reader: {count / hiredis_s:,.0f})"
    )


def _sample_xadd(i: int) -> Op:
    return Op(
        1,
        i,
        ((1, i - 1), (2, 7)),
        1_700_000_000_000 + i,
        XAdd(b"orders", (1_700_000_000_000 + i, 1), (b"name", b"alice", b"qty", b"3")),
    )


def codec(n: int = 100_000, rounds: int = 3) -> str:
    ops = [_sample_xadd(i) for i in range(1, n + 1)]
    encoded = [encode(op) for op in ops]
    assert [decode(data) for data in encoded] == ops
    enc_s = _best(lambda: [encode(op) for op in ops], rounds)
    dec_s = _best(lambda: [decode(data) for data in encoded], rounds)
    size = sum(map(len, encoded)) / n
    return (
        f"op-log codec, {n} XAdd ops, 2 fields, 2-region ctx, {size:.1f} bytes each: "
        f"encode {n / enc_s:,.0f}/s ({enc_s / n * 1e6:.1f} us), "
        f"decode {n / dec_s:,.0f}/s ({dec_s / n * 1e6:.1f} us), "
        f"encode+decode {n / (enc_s + dec_s):,.0f} ops/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser_ = argparse.ArgumentParser(
        prog="python -m bench.micro", description=__doc__.split("\n")[0]
    )
    parser_.add_argument("--count", type=int, default=100_000, help="requests / ops per round")
    parser_.add_argument("--rounds", type=int, default=3)
    args = parser_.parse_args(argv)
    print(parser(args.count, args.rounds), flush=True)
    print(codec(args.count, args.rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
