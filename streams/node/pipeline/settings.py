"""CONFIG GET / SET / RESETSTAT / REWRITE: the node's parameters, with Redis's names and checks.

Replies follow redis-server 7.0.15 byte for byte where the same reply makes sense
(tests/unit/test_connection_commands.py, tests/security/). The client limits (`maxclients`,
`timeout`, `proto-max-bulk-len`, `client-output-buffer-limit`) are written through to the RESP
server's `streams.resp.limits.Limits`, so a change applies at once to every connection.
Deliberate differences: `databases` is 1 (only SELECT 0 works); CONFIG GET requirepass is always
empty; CONFIG SET accepts the `HARMLESS` parameters (stored, without effect) and any parameter
set to its current value, and refuses to change the others.
"""

from __future__ import annotations

import os

from streams import errors
from streams.commands.base import parse_int
from streams.commands.glob import Pattern
from streams.crdt import idmp
from streams.crdt.entries import set_node_limits
from streams.errors import CommandError
from streams.reply import OK, Map, Reply, Status
from streams.resp.limits import Limits, OutputLimit, fit_maxclients

CONFIG_HELP = [
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
]

_INT_MAX = 2**63 - 1
_ENUMS = {
    "appendfsync": ("everysec", "always", "no"),
    "maxmemory-policy": (
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
    ),
    "loglevel": ("debug", "verbose", "notice", "warning"),
    "lazyfree-lazy-user-flush": ("yes", "no"),
    "latency-tracking": ("yes", "no"),
}
_INTS = {
    "timeout": (0, 2**31 - 1),
    "tcp-keepalive": (0, 2**31 - 1),
    "hz": (0, 2**31 - 1),
    "slowlog-log-slower-than": (-1, _INT_MAX),
    "slowlog-max-len": (0, _INT_MAX),
    "latency-monitor-threshold": (0, _INT_MAX),
    "stream-idmp-duration": idmp.DURATION_RANGE,
    "stream-idmp-maxsize": idmp.MAXSIZE_RANGE,
}
_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1024,
    "m": 1000**2,
    "mb": 1024**2,
    "g": 1000**3,
    "gb": 1024**3,
}
_STREAM_NODE = {"stream-node-max-bytes": True, "stream-node-max-entries": False}
"""Parameters that shape stream nodes (entry blocks): name -> is a memory value. They take
effect for nodes filled from now on, as in Redis (`streams.crdt.entries.set_node_limits`)."""
MONITORING = frozenset(
    {
        "slowlog-log-slower-than",
        "slowlog-max-len",
        "latency-monitor-threshold",
        "latency-tracking",
        "latency-tracking-info-percentiles",
    }
)
"""Parameters the node's counting reads (`streams.node.pipeline.stats.Stats.configure`)."""
LIMITS = frozenset({"maxclients", "timeout", "proto-max-bulk-len", "client-output-buffer-limit"})
"""Parameters the RESP server enforces (`streams.resp.limits.Limits`)."""
IDMP = frozenset({"stream-idmp-duration", "stream-idmp-maxsize"})
"""Redis 8.6's IDMP window for streams that never had one (`streams.crdt.idmp.set_defaults`)."""
HARMLESS = (frozenset(_ENUMS) | frozenset(_INTS) | {"save"}) - MONITORING - LIMITS - IDMP
"""Parameters CONFIG SET accepts and remembers (CONFIG GET shows the new value) although they
change nothing here: persistence is the Kafka op log and nothing is evicted."""
_CLIENT_CLASSES = {"normal": "normal", "slave": "slave", "replica": "slave", "pubsub": "pubsub"}
_BUFFER_LIMIT = "buffer limit configuration."


def default_settings(port: int, bind: str, cluster: bool = False) -> dict[str, str]:
    """What CONFIG GET shows (`cluster`: the node speaks the Redis Cluster protocol).
    `requirepass` is always empty: a user whose ACL rules allow CONFIG may not be meant to learn
    the default user's password, so it is never shown (Redis shows it)."""
    return {
        "bind": bind,
        "port": str(port),
        "requirepass": "",
        "databases": "1",
        "save": "",
        "appendonly": "no",
        "appendfsync": "everysec",
        "maxmemory": "0",
        "maxmemory-policy": "noeviction",
        "stream-node-max-entries": "100",
        "stream-node-max-bytes": "4096",
        "stream-idmp-duration": str(idmp.DEFAULT_DURATION_S),
        "stream-idmp-maxsize": str(idmp.DEFAULT_MAXSIZE),
        "timeout": "0",
        "tcp-keepalive": "300",
        "maxclients": "10000",
        "loglevel": "notice",
        "hz": "10",
        "slowlog-log-slower-than": "10000",
        "slowlog-max-len": "128",
        "latency-monitor-threshold": "0",
        "latency-tracking": "yes",
        "latency-tracking-info-percentiles": "50 99 99.9",
        "notify-keyspace-events": "",
        "lazyfree-lazy-user-flush": "no",
        "protected-mode": "no",
        "cluster-enabled": "yes" if cluster else "no",
        "replica-read-only": "yes",
        "proto-max-bulk-len": "536870912",
        "client-output-buffer-limit": (
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        ),
        "busy-reply-threshold": "5000",
        "lua-time-limit": "5000",
        "io-threads": "1",
        "daemonize": "no",
        "dir": os.getcwd(),
        "dbfilename": "dump.rdb",
        "logfile": "",
    }


class Settings:
    """The node's CONFIG parameters (values as strings, Redis's spelling); `limits`, if given,
    receives the client limits whenever they are set."""

    def __init__(self, values: dict[str, str], limits: Limits | None = None) -> None:
        self.values = dict(values)
        self.limits = limits
        if limits is not None:
            self.values["maxclients"] = str(fit_maxclients(int(self.values["maxclients"])))
            self._apply_limits()

    def _apply_limits(self) -> None:
        """Write the client limits through to the RESP server."""
        if self.limits is None:
            return
        values = self.values
        self.limits.maxclients = int(values["maxclients"])
        self.limits.timeout_s = int(values["timeout"])
        self.limits.max_bulk = int(values["proto-max-bulk-len"])
        words = values["client-output-buffer-limit"].split()
        for i in range(0, len(words), 4):
            if words[i] == "normal":
                hard, soft, seconds = (int(w) for w in words[i + 1 : i + 4])
                self.limits.output = OutputLimit(hard, soft, seconds)

    def get(self, patterns: list[bytes]) -> Reply:
        """The parameters matching any pattern (case-insensitive), in the table's order, each
        once; an exact name is echoed as typed, as Redis does."""
        shown: dict[str, bytes] = {}
        for raw in patterns:
            text = raw.decode("utf-8", "replace")
            if not any(c in text for c in "*?["):
                if text.lower() in self.values:
                    shown.setdefault(text.lower(), raw)
                continue
            pattern = Pattern(raw.lower())
            for name in self.values:
                if pattern.match(name.encode()):
                    shown.setdefault(name, name.encode())
        return Map(
            tuple(
                (shown[name], value.encode())
                for name, value in self.values.items()
                if name in shown
            )
        )

    def set(self, args: list[bytes]) -> Reply:
        if len(args) % 2:
            raise CommandError(errors.SYNTAX)
        changes: dict[str, str] = {}
        for raw_name, raw_value in zip(args[::2], args[1::2], strict=True):
            name = raw_name.decode("utf-8", "replace").lower()
            if name not in self.values:
                raise CommandError(
                    errors.CONFIG_SET_UNKNOWN_FMT.format(name=raw_name.decode("utf-8", "replace"))
                )
            if name in changes:
                raise _set_failed(name, "duplicate parameter")
            changes[name] = self._validate(name, raw_value.decode("utf-8", "replace"))
        self.values.update(changes)
        if any(name in LIMITS for name in changes):
            self._apply_limits()
        if any(name in IDMP for name in changes):
            idmp.set_defaults(
                int(self.values["stream-idmp-duration"]), int(self.values["stream-idmp-maxsize"])
            )
        if any(name in _STREAM_NODE for name in changes):
            set_node_limits(
                max_bytes=int(self.values["stream-node-max-bytes"]),
                max_entries=int(self.values["stream-node-max-entries"]),
            )
        return OK

    def _validate(self, name: str, value: str) -> str:
        if name in _ENUMS:
            if value.lower() not in _ENUMS[name]:
                if _ENUMS[name] == ("yes", "no"):
                    raise _set_failed(name, "argument must be 'yes' or 'no'")
                raise _set_failed(
                    name, "argument(s) must be one of the following: " + ", ".join(_ENUMS[name])
                )
            return value.lower()
        if name in _INTS:
            try:
                number = parse_int(value.encode())
            except CommandError:
                raise _set_failed(name, "argument couldn't be parsed into an integer") from None
            low, high = _INTS[name]
            if not low <= number <= high:
                raise _set_failed(name, f"argument must be between {low} and {high} inclusive")
            if name == "hz":
                number = min(max(number, 1), 500)
            return str(number)
        if name in _STREAM_NODE:
            return _stream_node_value(name, value, memory=_STREAM_NODE[name])
        if name == "proto-max-bulk-len":
            return _stream_node_value(name, value, memory=True, low=1024 * 1024)
        if name == "maxclients":
            return _maxclients(value)
        if name == "client-output-buffer-limit":
            return _output_limits(value, self.values[name])
        if name == "latency-tracking-info-percentiles":
            return _percentiles(value)
        if name == "save":
            parts = value.split()
            if len(parts) % 2 or not all(p.isdigit() for p in parts):
                raise _set_failed(name, "Invalid save parameters")
            return " ".join(parts)
        if value == self.values[name]:
            return value
        raise _set_failed(name, "not changeable in this database")


def _memory(value: str) -> int | None:
    """Redis's memtoull: digits and an optional unit (4kb, 1mb, 2g ...), else None."""
    text = value.lower()
    digits = text.rstrip("kmgb")
    unit = text[len(digits) :]
    if digits.isdigit() and digits.isascii() and unit in _MEMORY_UNITS:
        return int(digits) * _MEMORY_UNITS[unit]
    return None


def _maxclients(value: str) -> str:
    """Redis's checks: 1..UINT_MAX, and no more than the file-descriptor limit allows (raised
    if it can be, as Redis raises it)."""
    name = "maxclients"
    try:
        number = parse_int(value.encode())
    except CommandError:
        raise _set_failed(name, "argument couldn't be parsed into an integer") from None
    if not 1 <= number <= 2**32 - 1:
        raise _set_failed(name, "argument must be between 1 and 4294967295 inclusive")
    fits = fit_maxclients(number)
    if fits < number:
        raise _set_failed(
            name,
            "The operating system is not able to handle the specified number of clients, "
            f"try with {fits}",
        )
    return str(number)


def _output_limits(value: str, current: str) -> str:
    """Redis's client-output-buffer-limit: `<class> <hard> <soft> <soft_seconds>` groups, every
    group checked before any is applied; the result lists all three classes, in bytes. Only
    the `normal` class applies here (no replica, no Pub/Sub client): a blocked reader is
    normal, as in Redis."""
    name = "client-output-buffer-limit"
    words = value.split()
    if len(words) % 4:
        raise _set_failed(name, "Wrong number of arguments in " + _BUFFER_LIMIT)
    classes = current.split()
    table = {classes[i]: classes[i + 1 : i + 4] for i in range(0, len(classes), 4)}
    for i in range(0, len(words), 4):
        kind = _CLIENT_CLASSES.get(words[i].lower())
        if kind is None:
            raise _set_failed(name, "Invalid client class specified in " + _BUFFER_LIMIT)
        hard, soft = _memory(words[i + 1]), _memory(words[i + 2])
        seconds = words[i + 3]
        if hard is None or soft is None or not seconds.lstrip("+").isdigit():
            raise _set_failed(
                name, "Error in hard, soft or soft_seconds setting in " + _BUFFER_LIMIT
            )
        table[kind] = [str(hard), str(soft), str(int(seconds))]
    return " ".join(" ".join([kind, *table[kind]]) for kind in ("normal", "slave", "pubsub"))


def _stream_node_value(name: str, value: str, *, memory: bool, low: int = 0) -> str:
    """Redis's checks for a memory value (4kb, 1mb...: stream-node-max-bytes,
    proto-max-bulk-len) or an integer (stream-node-max-entries), `low`..LONG_MAX."""
    number: int | None = None
    if memory:
        number = _memory(value)
        if number is None:
            raise _set_failed(name, "argument must be a memory value")
    else:
        try:
            number = parse_int(value.encode())
        except CommandError:
            raise _set_failed(name, "argument couldn't be parsed into an integer") from None
    if not low <= number <= _INT_MAX:
        raise _set_failed(name, f"argument must be between {low} and {_INT_MAX} inclusive")
    return str(number)


def _percentiles(value: str) -> str:
    """Redis's check: numbers (strtod) separated by single spaces, each in 0..100; kept as `%f`
    trimmed (CONFIG GET and INFO latencystats show them so)."""
    name = "latency-tracking-info-percentiles"
    if not value:
        return ""
    numbers: list[float] = []
    for part in value.split(" "):
        try:
            number = float(part) if "_" not in part else float("nan")
        except ValueError:
            raise _set_failed(name, errors.PERCENTILES_INVALID) from None
        if part.strip() != part or number != number:  # float() allows spaces and nan
            raise _set_failed(name, errors.PERCENTILES_INVALID)
        if not 0.0 <= number <= 100.0:
            raise _set_failed(name, errors.PERCENTILES_RANGE)
        numbers.append(number)
    return " ".join(f"{n:f}".rstrip("0").rstrip(".") for n in numbers)


def _set_failed(name: str, why: str) -> CommandError:
    return CommandError(errors.CONFIG_SET_FAILED_FMT.format(name=name, why=why))


def config(args: list[bytes], settings: Settings) -> Reply:
    """CONFIG GET / SET / RESETSTAT (the caller resets its statistics) / REWRITE / HELP."""
    sub = args[1].lower()
    if sub == b"get":
        return settings.get(args[2:])
    if sub == b"set":
        return settings.set(args[2:])
    if sub == b"resetstat":
        return OK
    if sub == b"rewrite":
        raise CommandError(errors.NO_CONFIG_FILE)
    return [Status(line) for line in CONFIG_HELP]
