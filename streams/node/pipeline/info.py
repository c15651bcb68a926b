"""INFO: Redis's text format over the sections the node fills in, and the counters it reports.

The node (`streams.node.pipeline.report.Report.info_sections`) supplies the values, in Redis's
order and with Redis's field names where they apply; INFO and its sections are bulk strings in
RESP3 too (Redis: verbatim strings).
"""

from __future__ import annotations

import os
import platform
import struct
import sys
import time

from streams import REDIS_COMPAT_VERSION, __version__
from streams.reply import Reply

SECTION_TITLES = {
    "server": "Server",
    "clients": "Clients",
    "memory": "Memory",
    "persistence": "Persistence",
    "stats": "Stats",
    "replication": "Replication",
    "cpu": "CPU",
    "modules": "Modules",
    "commandstats": "Commandstats",
    "errorstats": "Errorstats",
    "latencystats": "Latencystats",
    "cluster": "Cluster",
    "keyspace": "Keyspace",
}


NOT_DEFAULT = frozenset({"commandstats", "latencystats"})
"""Sections that INFO without arguments (or `default`) leaves out, as Redis 7.0 does: they grow
with every command name."""


def info(args: list[bytes], sections: dict[str, dict[str, object]]) -> Reply:
    """INFO [section ...]: Redis's text (`# Title` then `key:value` lines, CRLF; sections
    separated by an empty line). `all` and `everything` give every section, no argument or
    `default` every section but commandstats and latencystats."""
    wanted = {a.lower().decode("utf-8", "replace") for a in args[1:]}
    every = bool(wanted & {"all", "everything"})
    default = not wanted or "default" in wanted
    parts: list[str] = []
    for name, values in sections.items():
        if not (every or name in wanted or (default and name not in NOT_DEFAULT)):
            continue
        title = SECTION_TITLES.get(name, name.capitalize())
        parts.append(f"# {title}\r\n" + "".join(f"{k}:{v}\r\n" for k, v in values.items()))
    return "\r\n".join(parts).encode()


def human_bytes(n: int) -> str:
    """Redis's bytesToHuman: B, K, M, G with two decimals."""
    if n < 1024:
        return f"{n}B"
    for unit, size in (("K", 1024), ("M", 1024**2), ("G", 1024**3), ("T", 1024**4)):
        if n < size * 1024 or unit == "T":
            return f"{n / size:.2f}{unit}"
    return f"{n}B"  # pragma: no cover


def system_memory_bytes() -> int:
    """The machine's physical memory (INFO memory's total_system_memory), 0 if unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):  # pragma: no cover
        return 0


def rss_bytes() -> int:
    """The process's resident set size (Linux /proc, else the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):  # pragma: no cover
        return 0
    return int(peak) * (1 if platform.system() == "Darwin" else 1024)


def server_section(
    port: int, started: float, run_id: str, cluster: bool = False
) -> dict[str, object]:
    uname = platform.uname()
    uptime = int(time.time() - started)
    return {
        "redis_version": REDIS_COMPAT_VERSION,
        "redis_git_sha1": "00000000",
        "redis_git_dirty": 0,
        "redis_mode": "cluster" if cluster else "standalone",
        "os": f"{uname.system} {uname.release} {uname.machine}",
        "arch_bits": struct.calcsize("P") * 8,
        "multiplexing_api": "asyncio",
        "process_id": os.getpid(),
        "process_supervised": "no",
        "run_id": run_id,
        "tcp_port": port,
        "server_time_usec": int(time.time() * 1_000_000),
        "uptime_in_seconds": uptime,
        "uptime_in_days": uptime // 86400,
        "hz": 10,
        "configured_hz": 10,
        "executable": sys.executable,
        "config_file": "",
        "io_threads_active": 0,
        "streams_version": __version__,
    }
