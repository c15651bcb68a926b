"""Record what a region node answers to a fixed corpus of requests, byte for byte.

Why: the node's request pipeline (resolve, authenticate, check arity, queue in MULTI, run
built-ins, dispatch stream commands, hold replies) is restructured now and then; a refactoring
must not change one byte of any reply. This script sends the same corpus (RESP2 and RESP3, in and
out of MULTI, unauthenticated, every COMMAND / INFO / CONFIG / CLIENT form, the stream commands
with good and bad arguments, the CRDT admin commands) to a node built from parts with an
in-memory op log and a pinned clock, and writes one line per request. Values that legitimately
differ between runs (uptime, pid, run id, memory and CPU figures, run times in commandstats and
latencystats) are masked; the slow log is switched off first (its entries depend on timing).

    python scripts/request_corpus.py out.txt     # then diff two recordings

Compare a recording made before a change with one made after: they must be identical.
tests/unit/test_request_corpus.py compares every run with the recording kept in
tests/unit/data/request_corpus.txt; a deliberate change of a reply is recorded anew with
`python scripts/request_corpus.py tests/unit/data/request_corpus.txt`.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator

from streams.config import RegionConfig, Topology
from streams.node.node import NodeOptions, RegionNode
from streams.node.pipeline.auth import AuthConfig
from streams.node.runtime.memory import MemoryLog
from streams.reply import Reply
from streams.resp.encode import encode
from streams.resp.server import Held, Session

MASKED = re.compile(
    rb"(uptime_in_seconds|uptime_in_days|process_id|run_id|master_replid|used_memory[a-z_]*|"
    rb"used_cpu_[a-z_]+|total_connections_received|connected_clients|lru_clock|"
    rb"rdb_last_save_time|server_time_usec|executable|config_file|hz|configured_hz|"
    rb"total_commands_processed|age|idle|id|addr|laddr|ms_since_last_op|"
    rb"last_snapshot_pause_ms|io_threads_active|arch_bits|os|gcc_version|redis_git_sha1|"
    rb"total_system_memory[a-z_]*|instantaneous_[a-z_]*):"
    rb"[^\r\n]*"
)
MASKED_TIME = re.compile(rb"\b(usec|usec_per_call|p[0-9.]+)=[^,\r\n]*")
"""Run times in INFO commandstats and latencystats."""
MASKED_EQ = re.compile(rb"\b(age|idle|id|addr|laddr)=[^ \r\n]*")
INFO_LENGTH = re.compile(rb"\$\d+(\r\n# )")
CONFIG_DIR = re.compile(rb"(\$3\r\ndir\r\n)\$\d+\r\n[^\r\n]*")  # the working directory


def corpus() -> Iterator[list[bytes]]:
    """The requests, in order (a connection sends all of them, in both protocols)."""
    lines = [
        "CONFIG SET slowlog-log-slower-than -1",  # nothing logged: entries depend on timing
        "PING",
        "PING hello",
        "PING a b",
        "ECHO x",
        "ECHO",
        "SELECT 0",
        "SELECT 1",
        "SELECT x",
        "CLIENT ID",
        "CLIENT GETNAME",
        "CLIENT SETNAME me",
        "CLIENT GETNAME",
        "CLIENT SETNAME bad\x01name",
        "CLIENT SETINFO LIB-NAME lib",
        "CLIENT SETINFO LIB-VER 1",
        "CLIENT SETINFO other 1",
        "CLIENT INFO",
        "CLIENT LIST",
        "CLIENT LIST TYPE normal",
        "CLIENT LIST TYPE pubsub",
        "CLIENT LIST TYPE bad",
        "CLIENT LIST ID 1 2",
        "CLIENT LIST ID x",
        "CLIENT NO-EVICT on",
        "CLIENT NO-EVICT maybe",
        "CLIENT HELP",
        "CLIENT",
        "CLIENT nosuch",
        "COMMAND COUNT",
        "COMMAND INFO xadd xread nosuch",
        "COMMAND INFO",
        "COMMAND DOCS xadd",
        "COMMAND DOCS xgroup|create",
        "COMMAND LIST",
        "COMMAND LIST FILTERBY ACLCAT stream",
        "COMMAND LIST FILTERBY PATTERN x*",
        "COMMAND LIST FILTERBY MODULE m",
        "COMMAND LIST BAD",
        "COMMAND GETKEYS xread STREAMS a b 0 0",
        "COMMAND GETKEYS xadd k * f v",
        "COMMAND GETKEYS ping",
        "COMMAND GETKEYS xadd",
        "COMMAND GETKEYS nosuch a",
        "COMMAND HELP",
        "COMMAND",
        "CONFIG GET *",
        "CONFIG GET port",
        "CONFIG GET stream-node-max-*",
        "CONFIG SET stream-node-max-entries 100",
        "CONFIG SET nosuch 1",
        "CONFIG SET stream-node-max-bytes lots",
        "CONFIG RESETSTAT",
        "CONFIG HELP",
        "CONFIG REWRITE",
        "CONFIG",
        "INFO server",
        "INFO clients",
        "INFO memory",
        "INFO persistence",
        "INFO stats",
        "INFO replication",
        "INFO cpu",
        "INFO modules",
        "INFO errorstats",
        "INFO commandstats",
        "INFO latencystats",
        "INFO cluster",
        "INFO keyspace",
        "INFO nosuch",
        "INFO all",
        "INFO everything",
        "INFO default",
        "INFO server clients",
        "INFO commandstats default",
        "SLOWLOG LEN",
        "SLOWLOG GET",
        "SLOWLOG GET -1",
        "SLOWLOG GET -2",
        "SLOWLOG GET x",
        "SLOWLOG GET 1 2",
        "SLOWLOG RESET",
        "SLOWLOG RESET x",
        "SLOWLOG HELP",
        "SLOWLOG",
        "SLOWLOG nosuch",
        "LATENCY LATEST",
        "LATENCY HISTORY command",
        "LATENCY HISTORY",
        "LATENCY RESET",
        "LATENCY RESET command fast-command",
        "LATENCY DOCTOR",
        "LATENCY GRAPH command",
        "LATENCY HISTOGRAM nosuch",
        "LATENCY HELP",
        "LATENCY nosuch",
        "CONFIG GET latency-*",
        "CONFIG SET latency-tracking-info-percentiles 50",
        "CONFIG SET latency-tracking-info-percentiles 101",
        "CONFIG SET latency-tracking-info-percentiles x",
        "CONFIG SET latency-tracking maybe",
        "SET k v",
        "GET k",
        "LPUSH l a",
        "NOSUCH",
        "nosuch a b",
        "XGROUP NOSUCH",
        "XINFO NOSUCH k",
        "XADD s 1 f v",
        "XADD s 2 f v g w",
        "XADD s 1 f v",
        "XADD s * f",
        "XADD s",
        "XADD s x f v",
        "XADD s MAXLEN 1 * f v",
        "XADD s NOMKSTREAM * f v",
        "XADD t NOMKSTREAM * f v",
        "XLEN s",
        "XLEN nosuch",
        "XRANGE s - +",
        "XRANGE s - + COUNT 1",
        "XRANGE s x +",
        "XREVRANGE s + -",
        "XREAD STREAMS s 0",
        "XREAD COUNT 1 STREAMS s 0",
        "XREAD STREAMS s",
        "XREAD BLOCK 10 STREAMS s $",
        "XREAD BLOCK x STREAMS s $",
        "XDEL s 1-0",
        "XDEL s 999-0",
        "XTRIM s MAXLEN 10",
        "XTRIM s MINID 0",
        "XTRIM s BAD 1",
        "XSETID s 5000-0",
        "XSETID s 1-0",
        "XADD s 6000 a b",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE nosuch g 0",
        "XGROUP CREATE nosuch g $ MKSTREAM",
        "XGROUP CREATECONSUMER s g c1",
        "XREADGROUP GROUP g c1 COUNT 2 STREAMS s >",
        "XREADGROUP GROUP g c1 STREAMS s 0",
        "XREADGROUP GROUP nog c1 STREAMS s >",
        "XPENDING s g",
        "XPENDING s g - + 10",
        "XPENDING s g - + 10 c1",
        "XACK s g 6000-0",
        "XACK s g x",
        "XCLAIM s g c2 0 6000-0",
        "XCLAIM s g c2 0 6000-0 JUSTID",
        "XAUTOCLAIM s g c3 0 0",
        "XAUTOCLAIM s g c3 0 0 COUNT 0",
        "XINFO STREAM s",
        "XINFO STREAM s FULL",
        "XINFO GROUPS s",
        "XINFO CONSUMERS s g",
        "XINFO HELP",
        "XGROUP SETID s g 0",
        "XGROUP DELCONSUMER s g c2",
        "XGROUP HELP",
        "XGROUP DESTROY s g",
        "XGROUP DESTROY s g",
        "EXISTS s nosuch",
        "TYPE s",
        "TYPE nosuch",
        "DBSIZE",
        "KEYS *",
        "SCAN 0",
        "SCAN 0 MATCH s*",
        "SCAN x",
        "RENAME s s2",
        "RENAME nosuch x",
        "UNLINK s2",
        "DEL nosuch",
        "XADD a * f v",
        "XADD b * f v",
        "FLUSHDB",
        "FLUSHALL",
        "DBSIZE",
        "MULTI",
        "XADD m 1 f v",
        "XLEN m",
        "EXEC",
        "MULTI",
        "XADD m 2 f v",
        "NOSUCH",
        "EXEC",
        "MULTI",
        "XADD m x f v",
        "XLEN m",
        "EXEC",
        "MULTI",
        "MULTI",
        "DISCARD",
        "DISCARD",
        "EXEC",
        "MULTI",
        "WATCH k",
        "EXEC",
        "WATCH k",
        "UNWATCH",
        "MULTI",
        "XADD m 3 f v",
        "EXEC extra",
        "MULTI",
        "CRDT.FLUSH",
        "EXEC",
        "MULTI",
        "XREAD BLOCK 100 STREAMS m $",
        "EXEC",
        "INFO commandstats",
        "INFO errorstats",
        "CONFIG RESETSTAT",
        "INFO commandstats",
        "INFO errorstats",
        "CLUSTER INFO",
        "CLUSTER SLOTS",
        "CLUSTER",
        "READONLY",
        "READWRITE",
        "ASKING",
        "CRDT.SHARDS",
        "CRDT.VECTOR",
        "CRDT.DIGEST",
        "CRDT.INFO",
        "CRDT.FLUSH",
        "CRDT.CLOCK",
        "CRDT.CLOCK 5",
        "CRDT.FAULT APPEND 1",
        "CRDT.SNAPSHOT x",
        "HELLO 4",
        "HELLO x",
        "HELLO 2 AUTH a b",
        "HELLO",
        "HELLO 2 SETNAME n1",
        "CLIENT GETNAME",
        "RESET",
        "QUIT",
    ]
    for line in lines:
        yield [w.encode("latin-1") for w in line.split(" ")]


UNAUTHENTICATED = [
    "PING",
    "XLEN s",
    "SET k v",
    "NOSUCH",
    "HELLO 3",
    "AUTH wrong",
    "AUTH default wrong",
    "HELLO 2 AUTH default pw",
    "XLEN s",
    "AUTH pw",
    "PING",
]


TOPOLOGY = Topology(
    regions=(
        RegionConfig("r1", 1, "127.0.0.1:1", 7001),
        RegionConfig("r2", 2, "127.0.0.1:2", 7002),
    ),
    mirror_naming="identity",
)


async def memory_node(requirepass: str | None = None) -> RegionNode:
    """A serving node of region r1 on an in-memory log, its clock pinned at 1 s."""
    options = NodeOptions(
        TOPOLOGY, "r1", clock=lambda: 1.0, debug_clock=True, auth=AuthConfig.build(requirepass, [])
    )
    node = RegionNode(options, log=MemoryLog())
    await node.start(serve_resp=False)
    return node


async def _answer(handle: object, session: Session, args: list[bytes]) -> Reply:
    reply = await handle(session, args)  # type: ignore[operator]
    if isinstance(reply, Held):
        failure = await reply.until
        return reply.reply if failure is None else failure
    return reply


def mask(raw: bytes) -> bytes:
    masked = MASKED_EQ.sub(rb"\1=*", MASKED.sub(rb"\1:*", CONFIG_DIR.sub(rb"\1$*\r\n*", raw)))
    masked = MASKED_TIME.sub(rb"\1=*", masked)
    return INFO_LENGTH.sub(rb"$*\1", masked)


async def record() -> list[str]:
    out: list[str] = []
    for proto in (2, 3):
        node = await memory_node()
        session = Session(1000 + proto)
        if proto == 3:
            await _answer(node.handle, session, [b"HELLO", b"3"])
        for args in corpus():
            reply = await _answer(node.handle, session, args)
            out.append(f"{proto} {args!r} {mask(encode(reply, session.proto))!r}")
        await node.stop()
    node = await memory_node(requirepass="pw")
    session = Session(2000)
    for line in UNAUTHENTICATED:
        args = [w.encode() for w in line.split(" ")]
        reply = await _answer(node.handle, session, args)
        out.append(f"auth {args!r} {mask(encode(reply, session.proto))!r}")
    await node.stop()
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lines = asyncio.run(record())
    with open(sys.argv[1], "w") as fp:
        fp.write("\n".join(lines) + "\n")
    print(f"{len(lines)} requests recorded in {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
