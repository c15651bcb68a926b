"""100,000 generated commands and RESP frames against a live node: wrong arity, bad IDs, huge
COUNTs, negative numbers, binary keys, truncated frames, protocol garbage and 10 MB values. Each
request gets exactly one reply (an error or a valid RESP value), a protocol error closes only its
own connection, and the node never dies.

Generated with `random` (seeded, printed) rather than hypothesis: the point is volume against one
live process, not shrinking; tests/integration/test_resp_robustness.py does the shrinking kind
and compares protocol errors with redis-server byte for byte. BLOCK is left out (a block forever
would hang the pipeline; test_hostile_clients.py covers BLOCK 0), and so are the commands that
change the connection itself (HELLO 3, QUIT, CLIENT KILL, AUTH, CONFIG, CRDT.SNAPSHOT).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import hiredis
from fuzz_words import OPTION_WORDS
from support import RawClient, encode_command

from faults.workload import node_memory_mb, node_pid, plain_client
from topology.local import LocalTopology

TOTAL = 100_000
ROUND = 250
"""Requests per connection: a pipeline of ROUND - 1 commands and one odd frame."""

NAMES = [
    b"XADD", b"XRANGE", b"XREVRANGE", b"XREAD", b"XREADGROUP", b"XGROUP", b"XACK", b"XCLAIM",
    b"XAUTOCLAIM", b"XPENDING", b"XINFO", b"XTRIM", b"XDEL", b"XSETID", b"XLEN", b"DEL",
    b"EXISTS", b"TYPE", b"SCAN", b"KEYS", b"RENAME", b"UNLINK", b"DBSIZE", b"PING", b"ECHO",
    b"MULTI", b"EXEC", b"DISCARD", b"WATCH", b"INFO", b"COMMAND", b"CRDT.INFO", b"CRDT.DIGEST",
    b"SELECT", b"GET", b"SET", b"EVAL", b"SUBSCRIBE", b"NOSUCHCMD", b"xAdD",
]  # fmt: skip
KEYS = [b"k%d" % i for i in range(20)] + [
    b"", b"\x00", b"\x00bin\xff", b"\xff\xfe\xfd", b"k\r\nx", b" ", b"*1\r\n", b"\xe2\x82\xac",
    b"K" * 1024,
]  # fmt: skip
IDS = [
    b"*", b"0", b"0-0", b"0-1", b"1-1", b"1", b"-", b"+", b"$", b">", b"(1-1", b"1-", b"-1",
    b"1-*", b"abc", b"18446744073709551615-18446744073709551615", b"18446744073709551616-0",
    b"1-18446744073709551616", b"99999999999999999999", b"1.5", b"", b"0x10", b"1 - 1",
]  # fmt: skip
NUMBERS = [
    b"0", b"1", b"-1", b"10", b"-10", b"9223372036854775807", b"9223372036854775808",
    b"-9223372036854775808", b"99999999999999999999999", b"1e3", b"+5", b" 5", b"", b"nan",
    b"2147483648", b"4294967296",
]  # fmt: skip
WORDS = [w for w in OPTION_WORDS if w != b"BLOCK"]


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def arg(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(10)
        if kind < 2:
            return rng.choice(WORDS)
        if kind < 4:
            return rng.choice(IDS)
        if kind < 6:
            return rng.choice(NUMBERS)
        if kind < 8:
            return rng.choice(KEYS)
        if kind < 9:
            return rng.randbytes(rng.randrange(17))
        return rng.randbytes(rng.choice([100, 1000, 65536]))

    def shaped(self) -> list[bytes]:
        """A plausible command with one slot or two swapped for a bad value."""
        rng = self.rng
        k, g, c = rng.choice(KEYS), rng.choice([b"g", b"g2"]), rng.choice([b"c1", b"c2"])
        n = rng.choice(NUMBERS)
        i = rng.choice(IDS)
        shapes = [
            [b"XADD", k, b"*", b"f", rng.randbytes(8)],
            [b"XADD", k, b"MAXLEN", b"~", n, i, b"f", b"v"],
            [b"XADD", k, b"NOMKSTREAM", b"MINID", i, b"*", b"f"],
            [b"XRANGE", k, b"-", b"+", b"COUNT", n],
            [b"XREVRANGE", k, i, i, b"COUNT", n],
            [b"XREAD", b"COUNT", n, b"STREAMS", k, i],
            [b"XGROUP", b"CREATE", k, g, i, b"MKSTREAM", b"ENTRIESREAD", n],
            [b"XGROUP", b"DESTROY", k, g],
            [b"XGROUP", b"SETID", k, g, i],
            [b"XGROUP", b"CREATECONSUMER", k, g, c],
            [b"XREADGROUP", b"GROUP", g, c, b"COUNT", n, b"STREAMS", k, b">"],
            [b"XREADGROUP", b"GROUP", g, c, b"NOACK", b"STREAMS", k, i],
            [b"XACK", k, g, i, i],
            [b"XCLAIM", k, g, c, n, i, b"IDLE", n, b"RETRYCOUNT", n, b"FORCE"],
            [b"XAUTOCLAIM", k, g, c, n, i, b"COUNT", n, b"JUSTID"],
            [b"XPENDING", k, g, b"IDLE", n, i, i, n, c],
            [b"XINFO", b"STREAM", k, b"FULL", b"COUNT", n],
            [b"XINFO", b"GROUPS", k],
            [b"XINFO", b"CONSUMERS", k, g],
            [b"XTRIM", k, b"MAXLEN", n],
            [b"XTRIM", k, b"MINID", b"~", i, b"LIMIT", n],
            [b"XDEL", k, i, i],
            [b"XSETID", k, i, b"ENTRIESADDED", n, b"MAXDELETEDID", i],
            [b"SCAN", n, b"COUNT", n, b"MATCH", k, b"TYPE", b"stream"],
            [b"DEL", k],
            [b"RENAME", k, rng.choice(KEYS)],
        ]
        args = list(rng.choice(shapes))
        for _ in range(rng.randrange(3)):
            args[rng.randrange(1, len(args))] = self.arg()
        return args

    def command(self) -> list[bytes]:
        rng = self.rng
        if rng.random() < 0.6:
            return self.shaped()
        name = rng.choice(NAMES)
        return [name] + [self.arg() for _ in range(rng.randrange(9))]

    def odd_frame(self) -> tuple[str, bytes]:
        """A frame that is not a complete, well-formed request: (kind, bytes)."""
        rng = self.rng
        whole = encode_command(self.shaped())
        kind = rng.choice(["truncated", "truncated", "protocol", "protocol", "none"])
        if kind == "truncated":
            return kind, whole[: rng.randrange(1, len(whole))]
        if kind == "protocol":
            return kind, rng.choice(
                [
                    b"*abc\r\n",
                    b"*1\r\n$abc\r\n",
                    b"*1\r\n:5\r\n",
                    b"*1\r\n$-5\r\n",
                    b"*1\r\n$999999999999\r\n",
                    b"*9999999999999\r\n",
                    b'"unbalanced\r\n',
                    b"*1\r\n+x\r\n",
                ]
            )
        return kind, b""


def test_100k_generated_commands_and_frames_each_get_a_reply_and_the_node_survives() -> None:
    seed = int(os.environ.get("FAULTS_SEED", random.randrange(1 << 30)))
    gen = Generator(seed)
    kinds: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    sent = 0
    started = time.monotonic()
    with LocalTopology(regions=1, manual_sync=True, id_mode="liberal") as topo:
        bystander = plain_client(topo.ports[1])
        bystander.ping()
        pid = node_pid(bystander)
        rss_before, _peak = node_memory_mb(pid)
        while sent < TOTAL:
            conn = RawClient(topo.ports[1], timeout_s=60)
            commands = [encode_command(gen.command()) for _ in range(ROUND - 1)]
            kind, odd = gen.odd_frame()
            kinds[kind] += 1
            conn.sock.sendall(b"".join(commands) + odd)
            expected = len(commands) + (1 if kind == "protocol" else 0)
            try:
                got, _raw = conn.replies(expected)
            except ConnectionError as exc:
                raise AssertionError((seed, kind, "closed before every reply came")) from exc
            closed = kind == "protocol" and conn.sock.recv(1) == b""
            conn.close()
            sent += ROUND
            for reply in got:
                if isinstance(reply, hiredis.ReplyError):
                    text = str(reply)
                    assert "internal error" not in text, (seed, text)
                    errors[" ".join(text.split()[:3])[:48]] += 1
            if kind == "protocol":
                assert isinstance(got[-1], hiredis.ReplyError) and closed, (seed, got[-1])
                assert str(got[-1]).startswith("ERR Protocol error"), (seed, got[-1])
        # A few 10 MB values: as a field, as a key, as an ID, and read back.
        big = os.urandom(10 * 1024 * 1024)
        client = plain_client(topo.ports[1], timeout=120)
        for n in range(3):
            eid = client.xadd(b"big", {b"v": big, b"n": b"%d" % n})
            assert client.xrange(b"big", eid, eid) == [(eid, {b"v": big, b"n": b"%d" % n})]
        assert client.xlen(big) == 0
        try:
            client.xrange(b"big", big, b"+")
            raise AssertionError("a 10 MB ID was accepted")
        except Exception as exc:
            assert "Invalid stream ID" in str(exc), exc
        sent += 8
        elapsed = time.monotonic() - started
        assert bystander.ping()
        sid = client.xadd(b"alive", {b"f": b"v"})
        assert client.xrange(b"alive", sid, sid) == [(sid, {b"f": b"v"})]
        rss_after, rss_peak = node_memory_mb(pid)
        print(
            f"\nbad input: seed {seed}, {sent} requests on {sum(kinds.values())} connections in "
            f"{elapsed:.1f}s ({sent / elapsed:,.0f}/s); odd frames {dict(kinds)}; node RSS "
            f"{rss_before} MB -> {rss_after} MB (peak {rss_peak} MB)"
        )
        print("  most common errors: " + "; ".join(f"{k} x{v}" for k, v in errors.most_common(8)))
        print(f"  distinct error kinds: {len(errors)}; no 'internal error'; node alive")


def test_64_bit_stream_counters_wrap_like_redis() -> None:
    with LocalTopology(regions=1, manual_sync=True, id_mode="liberal") as topo:
        client = plain_client(topo.ports[1])
        client.xadd(b"k", {b"f": b"v"}, id=b"1-1")
        client.execute_command("XSETID", b"k", b"5-0", b"ENTRIESADDED", b"%d" % (2**63 - 1))
        client.xadd(b"k", {b"f": b"v"}, id=b"6-0")
        assert client.xinfo_stream(b"k")["entries-added"] == -(2**63)
        client.xgroup_create(b"k", b"g", id=b"0", entries_read=2**63 - 1)
        assert len(client.xreadgroup(b"g", b"c", {b"k": b">"})[0][1]) == 2
        assert client.xinfo_groups(b"k")[0]["entries-read"] == -(2**63) + 1
        assert client.xinfo_groups(b"k")[0]["lag"] == -1  # as redis-server 7.0.15 answers
        assert client.rename(b"k", b"k2")
        assert client.xlen(b"k2") == 2
